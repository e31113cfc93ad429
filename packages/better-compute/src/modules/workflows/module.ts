/** The workflows module: node maintenance as steps a controller job advances. */
import { methods } from '@better-compute/core/methods';
import { bindMethod, defineModule } from '../define-module.js';
import { advanceWorkflowJob } from './controller.js';
import { workflowsMigrations } from './migrations.js';
import { createWorkflow, getWorkflow, listWorkflows, steerWorkflow, WORKFLOW_JOB } from './service.js';

export const workflowsModule = defineModule({
  name: 'workflows',
  migrations: workflowsMigrations,
  methods: [
    bindMethod(methods['workflows.list'], listWorkflows),
    bindMethod(methods['workflows.get'], getWorkflow),
    bindMethod(methods['workflows.create'], createWorkflow),
    bindMethod(methods['workflows.abort'], (ctx) => steerWorkflow(ctx, 'abort')),
    bindMethod(methods['workflows.pause'], (ctx) => steerWorkflow(ctx, 'pause')),
    bindMethod(methods['workflows.resume'], (ctx) => steerWorkflow(ctx, 'resume')),
    bindMethod(methods['workflows.retry'], (ctx) => steerWorkflow(ctx, 'retry')),
  ],
  jobs: { [WORKFLOW_JOB]: advanceWorkflowJob },
});
