/**
 * `fleet apply FILE --plan-hash H [--prune]`: fleet.apply of the plan reviewed. Without --plan-hash
 * or --yes it only plans, prints the plan, and stops (exit 1, as batch approve does): nothing
 * chained after it takes the fleet for applied. With --yes it applies the plan it just made. The
 * server recomputes the plan: CONFIG_DRIFT when the fleet changed since, PLAN_BLOCKED for a
 * blocked change, and any refusal applies nothing.
 */
import type { FleetPlan } from '@better-compute/core/methods';
import { CliError, markReported } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { planFlags } from './plan.js';
import { blockedFailure, planLines, printsWords, readFleetDocument } from './plan-view.js';

export default defineCommand({
  name: 'fleet apply',
  group: 'Fleet',
  summary:
    'Apply a reviewed plan in one transaction (--plan-hash H); without --plan-hash or --yes it only plans (fleet.apply)',
  target: 'token',
  calls: ['fleet.plan', 'fleet.apply'],
  positionals: [{ name: 'file', description: 'The FleetConfig document', required: true }],
  flags: {
    ...planFlags,
    planHash: {
      type: 'string',
      description: 'The planHash of the plan you reviewed (fleet plan prints it)',
      placeholder: 'H',
    },
    yes: { type: 'boolean', description: 'Apply the plan made now, without reviewing it first' },
  },
  examples: [
    'better-compute fleet apply fleet.json --plan-hash 3f1c…',
    'better-compute fleet apply fleet.json --prune --plan-hash 3f1c…',
  ],
  async run({ args, flags, io, api, global, log, print }) {
    const document = await readFleetDocument(io, args.file);
    const client = await api();
    const words = printsWords(global);
    let planHash = flags.planHash;
    if (planHash === undefined) {
      const plan = (await client.call('fleet.plan', {
        document: document as never,
        prune: flags.prune,
      })) as FleetPlan;
      if (words) for (const line of planLines(plan, { calls: flags.calls })) io.out(line);
      else if (!flags.yes) print(plan);
      const blocked = blockedFailure(plan);
      if (blocked) throw blocked;
      if (!flags.yes) {
        const stop = `Not applied. Review the plan, then run better-compute fleet apply ${args.file}${flags.prune ? ' --prune' : ''} --plan-hash ${plan.planHash}`;
        log(stop);
        throw markReported(new CliError('CONFIRMATION_REQUIRED', stop), 1);
      }
      planHash = plan.planHash;
    }
    if (!/^[0-9a-f]{64}$/.test(planHash))
      throw new CliError('INVALID_ARGUMENT', '--plan-hash must be the 64 hex digits fleet plan printed', {
        details: { field: 'plan-hash' },
      });
    const applied = await client.call('fleet.apply', {
      document: document as never,
      prune: flags.prune,
      planHash,
    });
    if (!words) return applied;
    const { counts } = applied;
    io.out(
      `Applied ${applied.applyId}: ${counts.create} created, ${counts.update} updated, ${counts.delete} deleted (${applied.calls} call(s)); planHash ${applied.planHash}`,
    );
    return undefined;
  },
});
