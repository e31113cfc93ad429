/** `sandbox-snapshot list|get|delete`: the sandboxSnapshots methods, so a kept snapshot of a deleted sandbox can be found and removed. */
import { defineCommand, type AnyCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';

const list = defineCommand({
  name: 'sandbox-snapshot list',
  group: 'Sandboxes',
  summary: 'List your sandbox snapshots, or the tenant’s with --all (sandboxSnapshots.list)',
  target: 'token',
  calls: ['sandboxSnapshots.list'],
  flags: {
    all: { type: 'boolean', description: 'Every snapshot of the tenant, not only yours' },
    sandbox: { type: 'id', kind: 'sandbox', description: 'Only snapshots of this sandbox' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute sandbox-snapshot list --sandbox sbx_01k5w…'],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('sandboxSnapshots.list', {
      ...pageOf(flags),
      all: flags.all,
      ...defined({ sandboxId: flags.sandbox }),
    });
    return listResult({ global }, page, (s) => ({
      id: s.id,
      sandbox: s.sandboxId,
      state: s.state,
      memory: s.memory ? 'yes' : 'no',
      keep: s.keep ? 'yes' : 'no',
      node: s.nodeId,
      created: s.createdAt,
    }));
  },
});

const get = defineCommand({
  name: 'sandbox-snapshot get',
  group: 'Sandboxes',
  summary: 'Show a sandbox snapshot (sandboxSnapshots.get)',
  target: 'token',
  calls: ['sandboxSnapshots.get'],
  positionals: [{ name: 'snapshot', description: 'The snapshot, snap_…', required: true, kind: 'snapshot' }],
  examples: ['better-compute sandbox-snapshot get snap_01k5w…'],
  async run({ args, api }) {
    return (await api()).call('sandboxSnapshots.get', { snapshotId: args.snapshot });
  },
});

const remove = defineCommand({
  name: 'sandbox-snapshot delete',
  group: 'Sandboxes',
  summary: 'Delete a sandbox snapshot and its files on the node (sandboxSnapshots.delete)',
  target: 'token',
  calls: ['sandboxSnapshots.delete'],
  positionals: [{ name: 'snapshot', description: 'The snapshot, snap_…', required: true, kind: 'snapshot' }],
  examples: ['better-compute sandbox-snapshot delete snap_01k5w…'],
  async run({ args, api }) {
    return (await api()).call('sandboxSnapshots.delete', { snapshotId: args.snapshot });
  },
});

export const sandboxSnapshotCommands: readonly AnyCommand[] = [list, get, remove] as readonly AnyCommand[];
