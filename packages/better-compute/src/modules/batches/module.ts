/**
 * The batches module: `commandBatches.*`, the destructive-batch quorum's server side
 * (docs/quorum.md). Built per deployment: it reads the approver set from the deployment's PKI bundle.
 */
import { commandBatchesGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { type ApproverSettings, createApproverLoader } from './approvers.js';
import { createBatch } from './create.js';
import { approveBatch, cancelBatch } from './decide.js';
import { BATCH_EXPIRY_JOB, expireBatchJob } from './expiry.js';
import { batchesMigrations } from './migrations.js';
import { batchMembers, batchScope, getBatch, listBatches } from './read.js';

export function createBatchesModule(settings: ApproverSettings = {}) {
  const approvers = createApproverLoader(settings);
  return defineModule({
    name: 'batches',
    migrations: batchesMigrations,
    methods: [
      implement(commandBatchesGroup, {
        create: (ctx) => createBatch(approvers, ctx),
        list: listBatches,
        get: getBatch,
        scope: batchScope,
        approve: (ctx) => approveBatch(approvers, ctx),
        cancel: cancelBatch,
        members: batchMembers,
      }),
    ],
    jobs: { [BATCH_EXPIRY_JOB]: expireBatchJob },
  });
}

/** The module with the default settings: what the method table's coverage is checked against. */
export const batchesModule = createBatchesModule();
