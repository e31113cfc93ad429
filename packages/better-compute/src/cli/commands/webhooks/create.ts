/**
 * `webhooks create --endpoint URL --events PATTERN… [--description TEXT] [--disabled]
 * [--secret-out FILE] [--key KEY]`: webhooks.create. The signing secret is shown once: printed,
 * or with --secret-out written to a new 0600 file created before the call (an existing file is
 * ALREADY_EXISTS and no webhook is created), the answer then printed without it.
 */
import { defineCommand } from '../../define.js';
import { defined, keyFlag, withIdempotencyKey } from '../shared.js';
import { endpointFlag, eventsFlag, secretOutFlag, withSecretOut } from './shared.js';

export default defineCommand({
  name: 'webhooks create',
  group: 'Events',
  summary: 'Subscribe an endpoint to event types; the signing secret is shown once (webhooks.create)',
  target: 'token',
  calls: ['webhooks.create'],
  flags: {
    endpoint: { ...endpointFlag, required: true },
    events: { ...eventsFlag, required: true },
    description: { type: 'string', description: 'What it is for', placeholder: 'TEXT' },
    disabled: { type: 'boolean', description: 'Create it disabled: nothing is sent until it is enabled' },
    secretOut: secretOutFlag,
    key: keyFlag,
  },
  examples: [
    "better-compute webhooks create --endpoint https://hooks.example.com/compute --events 'reservation.*' --secret-out hook.secret",
    'better-compute webhooks create --endpoint http://127.0.0.1:9000/hook --events node.offline,node.online',
  ],
  async run(context) {
    const { flags, io, api } = context;
    const input = defined({
      url: flags.endpoint,
      events: flags.events,
      description: flags.description,
      enabled: flags.disabled ? false : undefined,
    });
    return withSecretOut(io.cwd, flags.secretOut, () =>
      withIdempotencyKey(context, flags.key, async (idempotencyKey) =>
        (await api()).call('webhooks.create', { ...input, idempotencyKey }),
      ),
    );
  },
});
