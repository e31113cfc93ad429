/**
 * `fleet status [--fail-on-drift]`: fleet.status, the last apply and whether the live fleet drifted
 * from it as the fleet.drift job last saw; FLEET_DRIFTED with --fail-on-drift while it sees drift.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { changeLines, printsWords } from './plan-view.js';

export default defineCommand({
  name: 'fleet status',
  group: 'Fleet',
  summary:
    'The last fleet apply, and whether the live fleet drifted from it as the drift job last saw (fleet.status)',
  target: 'token',
  calls: ['fleet.status'],
  flags: {
    failOnDrift: { type: 'boolean', description: 'Exit FLEET_DRIFTED while the drift job sees drift' },
  },
  examples: ['better-compute fleet status', 'better-compute fleet status --fail-on-drift'],
  async run({ flags, io, api, global }) {
    const status = await (await api()).call('fleet.status', {});
    const words = printsWords(global);
    if (words) {
      const { applied, drift } = status;
      io.out(
        applied
          ? `Last apply: ${applied.id} at ${applied.appliedAt}${applied.actor ? ` by ${applied.actor}` : ''} (planHash ${applied.planHash})`
          : 'No fleet document has been applied.',
      );
      io.out(
        drift.state === 'unknown'
          ? 'Drift: unknown (nothing applied yet, or the drift job has not looked).'
          : `Drift: ${drift.state}${drift.since ? ` since ${drift.since}` : ''} (checked ${drift.checkedAt})`,
      );
      for (const change of drift.changes) for (const line of changeLines(change, 'drift')) io.out(line);
    }
    if (flags.failOnDrift && status.drift.state === 'drifted')
      throw new CliError(
        'FLEET_DRIFTED',
        `the fleet drifted from apply ${status.applied?.id}: ${status.drift.changes.length} difference(s) since ${status.drift.since}`,
        { details: { changes: status.drift.changes.length } },
      );
    return words ? undefined : status;
  },
});
