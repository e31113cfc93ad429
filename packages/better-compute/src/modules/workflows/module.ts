/** The workflows module: node maintenance as steps a controller job advances. */
import { workflowsGroup } from '@better-compute/core/methods';
import { workflowGauges } from './gauges.js';
import { defineModule, implement } from '../define-module.js';
import { advanceWorkflowJob } from './controller.js';
import { workflowsMigrations } from './migrations.js';
import { createWorkflow, getWorkflow, listWorkflows, steerWorkflow, WORKFLOW_JOB } from './service.js';

export const workflowsModule = defineModule({
  name: 'workflows',
  migrations: workflowsMigrations,
  gauges: workflowGauges,
  methods: [
    implement(workflowsGroup, {
      list: listWorkflows,
      get: getWorkflow,
      create: createWorkflow,
      abort: (ctx) => steerWorkflow(ctx, 'abort'),
      pause: (ctx) => steerWorkflow(ctx, 'pause'),
      resume: (ctx) => steerWorkflow(ctx, 'resume'),
      retry: (ctx) => steerWorkflow(ctx, 'retry'),
    }),
  ],
  jobs: { [WORKFLOW_JOB]: advanceWorkflowJob },
});
