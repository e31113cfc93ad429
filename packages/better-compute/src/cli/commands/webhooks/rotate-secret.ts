/**
 * `webhooks rotate-secret WEBHOOK [--secret-out FILE] [--if-version N]`: webhooks.rotateSecret.
 * The new secret is shown once, like create's; the old one still signs for 24 hours.
 */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { secretOutFlag, withSecretOut } from './shared.js';

export default defineCommand({
  name: 'webhooks rotate-secret',
  group: 'Events',
  summary:
    'Give a webhook a new signing secret, shown once; the old one signs too for 24 hours (webhooks.rotateSecret)',
  target: 'token',
  calls: ['webhooks.rotateSecret'],
  positionals: [{ name: 'webhook', description: 'The webhook id', required: true, kind: 'webhook' }],
  flags: { secretOut: secretOutFlag, ifVersion: ifVersionFlag },
  examples: ['better-compute webhooks rotate-secret wh_01k… --secret-out hook.secret.new'],
  async run({ args, flags, api, io }) {
    return withSecretOut(io.cwd, flags.secretOut, async () =>
      (await api()).call(
        'webhooks.rotateSecret',
        defined({ webhookId: args.webhook, ifVersion: flags.ifVersion }),
      ),
    );
  },
});
