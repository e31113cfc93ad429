/**
 * The `audit` methods (`audit.checkpoint`, `audit.consistency`): the public face of the audit log's
 * seal. The seal's tables are foundation tables (docs/decisions/audit-seal.md), so this module has
 * no migrations; it only serves what `published.ts` reads.
 */
import { auditGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../modules/define-module.js';
import { consistencyFrom, latestCheckpoint } from './published.js';

export const auditModule = defineModule({
  name: 'audit',
  methods: [
    implement(auditGroup, {
      checkpoint: ({ db, input }) => latestCheckpoint(db, input.tenantId),
      consistency: ({ db, input }) => consistencyFrom(db, input),
    }),
  ],
});
