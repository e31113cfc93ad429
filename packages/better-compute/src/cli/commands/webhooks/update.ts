/**
 * `webhooks update WEBHOOK [--endpoint URL] [--events PATTERN…] [--description TEXT]
 * [--enable | --disable] [--if-version N]`: webhooks.update.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { defined, ifVersionFlag } from '../shared.js';
import { endpointFlag, eventsFlag } from './shared.js';

export default defineCommand({
  name: 'webhooks update',
  group: 'Events',
  summary:
    'Change a webhook’s endpoint, event types or description, or enable or disable it (webhooks.update)',
  target: 'token',
  calls: ['webhooks.update'],
  positionals: [{ name: 'webhook', description: 'The webhook id', required: true, kind: 'webhook' }],
  flags: {
    endpoint: endpointFlag,
    events: { ...eventsFlag, description: `${eventsFlag.description}; they replace its event types` },
    description: { type: 'string', description: 'A new description', placeholder: 'TEXT' },
    enable: { type: 'boolean', description: 'Enable it (a disabled endpoint starts a new failure window)' },
    disable: { type: 'boolean', description: 'Disable it: nothing is sent until it is enabled' },
    ifVersion: ifVersionFlag,
  },
  examples: [
    "better-compute webhooks update wh_01k… --events 'reservation.*' --events 'node.*'",
    'better-compute webhooks update wh_01k… --enable --if-version 3',
  ],
  async run({ args, flags, api, commandName }) {
    if (flags.enable && flags.disable)
      throw new CliError('INVALID_ARGUMENT', 'give --enable or --disable, not both; nothing was sent', {
        hint: `Run "better-compute help ${commandName}" for its flags.`,
        details: { field: 'enable' },
      });
    const input = defined({
      url: flags.endpoint,
      events: flags.events.length ? flags.events : undefined,
      description: flags.description,
      enabled: flags.enable ? true : flags.disable ? false : undefined,
    });
    if (Object.keys(input).length === 0)
      throw new CliError(
        'INVALID_ARGUMENT',
        'webhooks update needs something to change: --endpoint, --events, --description, --enable or --disable',
        { hint: `Run "better-compute help ${commandName}" for its flags and examples.` },
      );
    return (await api()).call('webhooks.update', {
      webhookId: args.webhook,
      ...input,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});
