/** The rollouts module: wave rollouts of a registered bcd release, each node by a workflow (docs/rollouts.md). */
import { rolloutsGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { advanceRolloutJob } from './controller.js';
import { rolloutsMigrations } from './migrations.js';
import { createRollout, getRollout, listRollouts, ROLLOUT_JOB, steerRollout } from './rollouts.js';

export const rolloutsModule = defineModule({
  name: 'rollouts',
  migrations: rolloutsMigrations,
  methods: [
    implement(rolloutsGroup, {
      create: createRollout,
      list: listRollouts,
      get: getRollout,
      pause: (ctx) => steerRollout(ctx, 'pause'),
      resume: (ctx) => steerRollout(ctx, 'resume'),
      abort: (ctx) => steerRollout(ctx, 'abort'),
    }),
  ],
  jobs: { [ROLLOUT_JOB]: advanceRolloutJob },
});
