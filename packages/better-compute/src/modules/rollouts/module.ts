/** The rollouts module: wave rollouts of a registered bcd release, each node by a workflow (docs/rollouts.md). */
import { rolloutsGroup } from '@better-compute/core/methods';
import { enqueueJob } from '../../workers/jobs.js';
import { defineModule, implement } from '../define-module.js';
import { registerWorkflowHooks, type WorkflowHookContext } from '../workflows/hooks.js';
import { advanceRolloutJob } from './controller.js';
import { rolloutsMigrations } from './migrations.js';
import { createRollout, getRollout, listRollouts, ROLLOUT_JOB, steerRollout } from './rollouts.js';

/** A node's update workflow that ends wakes its rollout at once, rather than at the next second's check. */
const wakeRollout = async (context: WorkflowHookContext) => {
  const rolloutId = context.workflow.input.rolloutId;
  if (typeof rolloutId === 'string')
    await enqueueJob(context.db, {
      kind: ROLLOUT_JOB,
      payload: { rolloutId },
      runAt: context.now,
      wake: true,
    });
};
registerWorkflowHooks(['node.update'], { succeeded: wakeRollout, failed: wakeRollout });

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
