/**
 * `fleet plan FILE [--prune] [--calls] [--fail-on-drift]`: fleet.plan. Prints the changes (`+ ~ -`,
 * BLOCKED) and the planHash in words, or the whole plan with --format; exits PLAN_BLOCKED when a
 * change is blocked, and FLEET_DRIFTED with --fail-on-drift when the plan is not empty (for CI).
 */
import type { FleetPlan } from '@better-compute/core/methods';
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { blockedFailure, planLines, printsWords, readFleetDocument } from './plan-view.js';

export const planFlags = {
  prune: {
    type: 'boolean',
    description: 'Also delete the live objects the document leaves out (pools are archived)',
  },
  calls: { type: 'boolean', description: 'Also list the API calls apply would make' },
} as const;

export default defineCommand({
  name: 'fleet plan',
  group: 'Fleet',
  summary:
    'Compare a FleetConfig document with the live fleet: + create, ~ update, - delete (--prune), BLOCKED, and the planHash (fleet.plan)',
  target: 'token',
  calls: ['fleet.plan'],
  positionals: [{ name: 'file', description: 'The FleetConfig document', required: true }],
  flags: {
    ...planFlags,
    failOnDrift: {
      type: 'boolean',
      description:
        'Exit FLEET_DRIFTED when the plan is not empty: the live fleet is not what the document says',
    },
  },
  examples: [
    'better-compute fleet plan fleet.json',
    'better-compute fleet plan fleet.json --calls',
    'better-compute fleet plan fleet.json --fail-on-drift',
  ],
  async run({ args, flags, io, api, global }) {
    const document = await readFleetDocument(io, args.file);
    const plan = (await (
      await api()
    ).call('fleet.plan', {
      document: document as never,
      prune: flags.prune,
    })) as FleetPlan;
    const words = printsWords(global);
    if (words) for (const line of planLines(plan, { calls: flags.calls })) io.out(line);
    const blocked = blockedFailure(plan);
    if (blocked) throw blocked;
    if (flags.failOnDrift && !plan.empty)
      throw new CliError(
        'FLEET_DRIFTED',
        `the live fleet is not what ${args.file} says: ${plan.changes.length} change(s) planned`,
        { details: { changes: plan.changes.length, planHash: plan.planHash } },
      );
    return words ? undefined : plan;
  },
});
