/**
 * `rollouts create --release VERSION --pool P | --nodes a,b | --selector S --waves 1,10%,50%,100%
 * [--failure-budget N] [--health-timeout 5m]`: rollouts.create. Each node is updated by a workflow
 * on it (`workflows list --node`); a wave whose failures pass the budget pauses the rollout.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';

export default defineCommand({
  name: 'rollouts create',
  group: 'Fleet',
  summary: 'Roll a registered bcd release out in waves, gated on health (rollouts.create)',
  description:
    'Give one of --pool, --nodes or --selector. --waves says how many nodes have the release once each wave is done (counts or shares, rising, ending at 100%); a wave with more failed nodes than --failure-budget pauses the rollout, and later waves never start.',
  target: 'token',
  calls: ['rollouts.create'],
  flags: {
    release: {
      type: 'string',
      required: true,
      placeholder: 'VERSION',
      description: 'The registered release to install',
    },
    pool: { type: 'id', kind: 'pool', description: 'Every node of this pool' },
    nodes: {
      type: 'id',
      kind: 'node',
      repeated: true,
      description: 'These nodes, in this order (comma-separated or repeated)',
    },
    selector: { type: 'string', description: 'Nodes whose labels match, such as rack=r12, zone in (eu-1)' },
    waves: {
      type: 'string',
      default: '100%',
      placeholder: 'LIST',
      description: 'Cumulative wave sizes, such as 1,10%,50%,100%',
    },
    failureBudget: {
      type: 'number',
      integer: true,
      min: 0,
      max: 5000,
      default: 0,
      description: 'Failed nodes one wave may have before the rollout pauses',
    },
    healthTimeout: {
      type: 'duration',
      default: '5m',
      min: '10s',
      max: '24h',
      description: 'How long a node has to come back with the new version and pass its health check',
    },
    reason: { type: 'string', description: 'Why, kept with the rollout' },
  },
  examples: [
    'better-compute rollouts create --release 1.4.0 --pool pool_01k… --waves 1,10%,50%,100% --tenant root',
    'better-compute rollouts create --release 1.4.0 --nodes node_01a…,node_01b… --failure-budget 1 --health-timeout 10m',
  ],
  async run({ flags, api }) {
    const given = [flags.pool, flags.nodes?.length ? flags.nodes : undefined, flags.selector].filter(
      (value) => value !== undefined,
    );
    if (given.length !== 1)
      throw new CliError(
        'INVALID_ARGUMENT',
        'rollouts create takes exactly one of --pool, --nodes or --selector',
        {
          hint: 'Name the nodes to update: --pool pool_01…, --nodes node_01…,node_02…, or --selector rack=r12.',
          details: { field: 'pool' },
        },
      );
    const waves = flags.waves.split(',').map((wave) => wave.trim());
    if (waves.some((wave) => !/^(?:[1-9][0-9]{0,5}|[1-9][0-9]?%|100%)$/.test(wave)))
      throw new CliError('INVALID_ARGUMENT', `--waves ${flags.waves} is not a list of counts and shares`, {
        hint: 'Write the cumulative sizes, such as 1,10%,50%,100%.',
        details: { field: 'waves' },
      });
    return (await api()).call(
      'rollouts.create',
      defined({
        version: flags.release,
        poolId: flags.pool,
        nodeIds: flags.nodes?.length ? flags.nodes : undefined,
        selector: flags.selector,
        waves,
        failureBudget: flags.failureBudget,
        healthTimeoutSeconds: flags.healthTimeout,
        reason: flags.reason,
      }),
    );
  },
});
