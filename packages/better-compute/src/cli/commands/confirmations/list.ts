/** `confirmations list [--all] [--state STATE]`: confirmations.list, newest first. */
import type { confirmationState } from '@better-compute/core/methods';
import type { z } from 'zod';
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';

// Written out, not read from core's schema: the CLI starts without loading zod (cli-binary.test.ts);
// the type below fails to compile if core's states and these ever differ.
const CONFIRMATION_STATES = ['pending', 'approved', 'declined', 'expired', 'consumed', 'revoked'] as const;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _sameStates: Same<(typeof CONFIRMATION_STATES)[number], z.infer<typeof confirmationState>> = true;
void _sameStates;

export default defineCommand({
  name: 'confirmations list',
  group: 'Batches',
  summary:
    'What agents asked you to confirm (an agent: what it asked), newest first; --all for the tenant’s (confirmations.list)',
  target: 'token',
  calls: ['confirmations.list'],
  flags: {
    all: { type: 'boolean', description: 'Every confirmation of the tenant (tenant administrators)' },
    state: {
      type: 'string',
      choices: CONFIRMATION_STATES,
      description: 'Only the confirmations in this state',
      placeholder: 'STATE',
    },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute confirmations list --state pending',
    'better-compute confirmations list --all --format json',
  ],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call(
      'confirmations.list',
      defined({ scope: flags.all ? ('all' as const) : undefined, state: flags.state, ...pageOf(flags) }),
    );
    return listResult(context, page, (confirmation) => ({
      id: confirmation.id,
      state: confirmation.state,
      agent: confirmation.agentId,
      method: confirmation.method,
      expires: confirmation.expiresAt,
      summary:
        confirmation.summary.length > 120 ? `${confirmation.summary.slice(0, 119)}…` : confirmation.summary,
    }));
  },
});
