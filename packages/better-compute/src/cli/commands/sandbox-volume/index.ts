/** `sandbox-volume create|list|get|resize|delete`: persistent volumes, an agent's memory (sandboxVolumes). */
import { defineCommand, type AnyCommand, nameFlag } from '../../define.js';
import {
  defined,
  ifVersionFlag,
  keyFlag,
  listResult,
  pageFlags,
  pageOf,
  withIdempotencyKey,
} from '../shared.js';

const size = {
  type: 'number',
  integer: true,
  min: 1,
  max: 16384,
  required: true,
  description: 'Its size in GiB (1-16384)',
  placeholder: 'GIB',
} as const;

const create = defineCommand({
  name: 'sandbox-volume create',
  group: 'Sandboxes',
  summary: 'Create a persistent volume on a node of a VPS pool (sandboxVolumes.create)',
  target: 'token',
  calls: ['sandboxVolumes.create'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The VPS pool' },
    name: nameFlag('Its name in the tenant'),
    size,
    key: keyFlag,
  },
  examples: ['better-compute sandbox-volume create --pool pool_01k5w… --name agent-notes --size 20'],
  async run(context) {
    const { flags, api } = context;
    const client = await api();
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('sandboxVolumes.create', {
        poolId: flags.pool,
        name: flags.name,
        sizeGiB: flags.size,
        idempotencyKey,
      }),
    );
  },
});

const list = defineCommand({
  name: 'sandbox-volume list',
  group: 'Sandboxes',
  summary: 'List your sandbox volumes, or the tenant’s with --all (sandboxVolumes.list)',
  target: 'token',
  calls: ['sandboxVolumes.list'],
  flags: {
    all: { type: 'boolean', description: 'Every volume of the tenant, not only yours' },
    pool: { type: 'id', kind: 'pool', description: 'Only volumes of this pool' },
    deleted: { type: 'boolean', description: 'Deleted volumes too' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute sandbox-volume list --pool pool_01k5w… --format table'],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('sandboxVolumes.list', {
      ...pageOf(flags),
      all: flags.all,
      deleted: flags.deleted,
      ...defined({ poolId: flags.pool }),
    });
    return listResult({ global }, page, (v) => ({
      id: v.id,
      name: v.name,
      size: `${v.sizeGiB} GiB`,
      state: v.state,
      node: v.nodeId ?? '',
      templates: v.templateIds.join(','),
    }));
  },
});

const get = defineCommand({
  name: 'sandbox-volume get',
  group: 'Sandboxes',
  summary: 'Show a sandbox volume and the templates that mount it (sandboxVolumes.get)',
  target: 'token',
  calls: ['sandboxVolumes.get'],
  positionals: [{ name: 'volume', description: 'The volume, vol_…', required: true, kind: 'volume' }],
  examples: ['better-compute sandbox-volume get vol_01k5w…'],
  async run({ args, api }) {
    return (await api()).call('sandboxVolumes.get', { volumeId: args.volume });
  },
});

const resize = defineCommand({
  name: 'sandbox-volume resize',
  group: 'Sandboxes',
  summary: 'Grow a volume; it never shrinks (sandboxVolumes.resize)',
  target: 'token',
  calls: ['sandboxVolumes.resize'],
  positionals: [{ name: 'volume', description: 'The volume, vol_…', required: true, kind: 'volume' }],
  flags: {
    size: { ...size, description: 'Its new size in GiB, above the current one' },
    ifVersion: ifVersionFlag,
  },
  examples: ['better-compute sandbox-volume resize vol_01k5w… --size 40'],
  async run({ args, flags, api }) {
    return (await api()).call('sandboxVolumes.resize', {
      volumeId: args.volume,
      sizeGiB: flags.size,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});

const remove = defineCommand({
  name: 'sandbox-volume delete',
  group: 'Sandboxes',
  summary: 'Delete a volume no template mounts, wiping its data (sandboxVolumes.delete)',
  target: 'token',
  calls: ['sandboxVolumes.delete'],
  positionals: [{ name: 'volume', description: 'The volume, vol_…', required: true, kind: 'volume' }],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute sandbox-volume delete vol_01k5w…'],
  async run({ args, flags, api }) {
    return (await api()).call('sandboxVolumes.delete', {
      volumeId: args.volume,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});

export const sandboxVolumeCommands: readonly AnyCommand[] = [
  create,
  list,
  get,
  resize,
  remove,
] as readonly AnyCommand[];
