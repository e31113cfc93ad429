/**
 * What other modules read of the sandboxes module's tables: a tenant's templates, for fleet
 * configuration. Nobody else queries compute.sandbox_templates (docs/architecture.md).
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { sandboxDb, type TemplateRow } from './tables.js';

/** A tenant's sandbox templates that are not deleted, by id. */
export async function tenantTemplates(db: Kysely<ComputeTables>, tenantId: string): Promise<TemplateRow[]> {
  return sandboxDb(db)
    .selectFrom('compute.sandbox_templates')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('deleted_at', 'is', null)
    .orderBy('id')
    .execute();
}
