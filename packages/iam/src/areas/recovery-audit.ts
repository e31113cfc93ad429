/**
 * The audit of recovery actions administrators take on a person (resetting their second factor or
 * their password): written in the action's own transaction, listed per tenant, newest first.
 */
import type { Iam, RecoveryAudit, RecoveryAuditEntry } from '../api.js';
import type { Db, IamContext } from '../context.js';
import { iso } from '../rows.js';

export async function recordRecovery(
  ctx: IamContext,
  trx: Db,
  entry: {
    tenantId: string;
    action: RecoveryAuditEntry['action'];
    principalId: string;
    audit: RecoveryAudit;
  },
): Promise<void> {
  await trx
    .insertInto('iam.recovery_audit')
    .values({
      tenant_id: entry.tenantId,
      actor: entry.audit.actor,
      action: entry.action,
      principal_id: entry.principalId,
      request_id: entry.audit.requestId,
      occurred_at: ctx.clock(),
    })
    .execute();
}

export function recoveryAuditService(ctx: IamContext): Pick<Iam, 'listRecoveryAudit'> {
  return {
    async listRecoveryAudit(tenantId) {
      const rows = await ctx.db
        .selectFrom('iam.recovery_audit')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .orderBy('occurred_at', 'desc')
        .limit(500)
        .execute();
      return rows.map((row) => ({
        tenantId: row.tenant_id,
        actor: row.actor,
        action: row.action,
        principalId: row.principal_id,
        requestId: row.request_id,
        occurredAt: iso(row.occurred_at),
      }));
    },
  };
}
