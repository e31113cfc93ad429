/**
 * `sandbox create --template T [--ttl D] [--from-snapshot S] [--wait 0..30] [--key K]`:
 * sandboxes.create, retry-safe with --key. A warm sandbox answers at once (`warm: true`); a cold
 * one is waited for up to --wait seconds by the server.
 */
import { defineCommand } from '../../define.js';
import { defined, keyFlag, withIdempotencyKey } from '../shared.js';

export default defineCommand({
  name: 'sandbox create',
  group: 'Sandboxes',
  summary: 'Start a sandbox from a template, warm when one waits, or from a snapshot (sandboxes.create)',
  target: 'token',
  calls: ['sandboxes.create'],
  flags: {
    template: { type: 'id', kind: 'sandboxTemplate', required: true, description: 'The template' },
    ttl: {
      type: 'duration',
      min: '1m',
      max: '7d',
      description: 'Its lifetime, such as 30m (default: the template’s; at most its maximum)',
      placeholder: 'DURATION',
    },
    fromSnapshot: { type: 'id', kind: 'snapshot', description: 'Restore this snapshot of the template' },
    wait: {
      type: 'number',
      integer: true,
      min: 0,
      max: 30,
      description: 'Seconds to wait for a cold sandbox to be ready (0 answers at once; server default 10)',
      placeholder: 'SECONDS',
    },
    key: keyFlag,
  },
  examples: [
    'better-compute sandbox create --template sbxt_01k5w… --ttl 30m',
    'better-compute sandbox create --template sbxt_01k5w… --from-snapshot snap_01k5w… --wait 30',
  ],
  async run(context) {
    const { flags, api } = context;
    const client = await api();
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('sandboxes.create', {
        templateId: flags.template,
        idempotencyKey,
        ...defined({ ttlSeconds: flags.ttl, fromSnapshotId: flags.fromSnapshot, waitSeconds: flags.wait }),
      }),
    );
  },
});
