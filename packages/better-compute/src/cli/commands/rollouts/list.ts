/** `rollouts list [--state S]`: rollouts.list, newest first, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';

export default defineCommand({
  name: 'rollouts list',
  group: 'Fleet',
  summary: 'List the rollouts, newest first (rollouts.list)',
  target: 'token',
  calls: ['rollouts.list'],
  flags: {
    state: {
      type: 'string',
      choices: ['running', 'paused', 'aborted', 'completed'],
      description: 'Only the rollouts in this state',
    },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute rollouts list --tenant root', 'better-compute rollouts list --state paused'],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call('rollouts.list', defined({ state: flags.state, ...pageOf(flags) }));
    return listResult(context, page, (rollout) => {
      const nodes = rollout.waves.flatMap((wave) => wave.nodes);
      return {
        id: rollout.id,
        version: rollout.version,
        state: rollout.state,
        wave: `${Math.min(rollout.currentWave + 1, rollout.waves.length)}/${rollout.waves.length}`,
        nodes: `${nodes.filter((n) => n.state === 'succeeded').length}/${nodes.length} updated, ${nodes.filter((n) => n.state === 'failed').length} failed`,
        created: rollout.createdAt,
      };
    });
  },
});
