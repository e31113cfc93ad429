/**
 * `sandbox create --template T [--ttl D] [--from-snapshot S] [--wait 0..30] [--key K]`:
 * sandboxes.create, retry-safe with --key. A warm sandbox answers at once (`warm: true`); a cold
 * one is waited for up to --wait seconds (default 30) while it is starting. The CLI asks the
 * server not to wait and follows it with sandboxes.get itself (wait.ts), so the wait prints its
 * progress on stderr, and a sandbox that fails to start fails the command with its reason.
 */
import { defineCommand } from '../../define.js';
import { waitFor } from '../../wait.js';
import { defined, keyFlag, withIdempotencyKey } from '../shared.js';

export default defineCommand({
  name: 'sandbox create',
  group: 'Sandboxes',
  summary: 'Start a sandbox from a template, warm when one waits, or from a snapshot (sandboxes.create)',
  target: 'token',
  calls: ['sandboxes.create', 'sandboxes.get'],
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
      default: 30,
      description:
        'Seconds to wait while a cold sandbox starts, with progress on stderr; one that fails exits 1 with its reason (0 answers at once)',
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
    const created = await withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('sandboxes.create', {
        templateId: flags.template,
        idempotencyKey,
        waitSeconds: 0,
        ...defined({ ttlSeconds: flags.ttl, fromSnapshotId: flags.fromSnapshot }),
      }),
    );
    return waitFor(context, created, flags.wait, {
      noun: 'sandbox',
      show: `better-compute sandbox get ${created.id}`,
      read: () => client.call('sandboxes.get', { sandboxId: created.id }),
      busy: (current) => current.state === 'starting',
      failure: (current) =>
        current.state === 'failed'
          ? `failed: ${current.reason ?? 'its node gave no reason'}`
          : current.state === 'deleting' || current.state === 'deleted'
            ? `was ${current.state === 'deleted' ? 'deleted' : 'being deleted'} before it was ready${current.reason ? `: ${current.reason}` : ''}`
            : null,
      hint: `"better-compute sandbox get ${created.id}" shows it; delete it (better-compute sandbox delete ${created.id}) and create another once the cause is fixed.`,
    });
  },
});
