/**
 * A confirmation as the API answers it, and the helpers every part of the module shares: the state
 * it has at a time (a pending or approved one past its window reads expired at once, before the
 * write catches up), loading one of a tenant, and writing the expiry of those whose window closed.
 */
import { ComputeError } from '@better-compute/core';
import type { CatalogEventDraft } from '@better-compute/events';
import type { ConfirmationRow, ConfirmationsDb, ConfirmationState } from './tables.js';

export function stateAt(row: ConfirmationRow, now: Date): ConfirmationState {
  if ((row.state === 'pending' || row.state === 'approved') && new Date(row.expires_at) <= now)
    return 'expired';
  return row.state;
}

const iso = (value: Date | string) => new Date(value).toISOString();
const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

export function confirmationView(row: ConfirmationRow, now: Date) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    delegationId: row.delegation_id,
    agentId: row.agent_id,
    personId: row.person_id,
    method: row.method,
    action: row.action,
    resource: row.resource,
    summary: row.summary,
    reason: row.reason,
    inputDigest: row.input_digest,
    state: stateAt(row, now),
    createdAt: iso(row.created_at),
    expiresAt: iso(row.expires_at),
    decidedAt: isoOrNull(row.decided_at),
    decidedBy: row.decided_by,
    consumedAt: isoOrNull(row.consumed_at),
  };
}

/** The event of a confirmation's step, with who asked, for whom and what. */
export function confirmationEvent(
  type:
    'confirmation.requested' | 'confirmation.approved' | 'confirmation.declined' | 'confirmation.consumed',
  row: ConfirmationRow,
): CatalogEventDraft {
  return {
    type,
    subject: { type: 'confirmation', id: row.id },
    tenantId: row.tenant_id,
    data: {
      agentId: row.agent_id,
      personId: row.person_id,
      delegationId: row.delegation_id,
      method: row.method,
      action: row.action,
    },
  };
}

/** A confirmation of the tenant (locked for update when asked), or NOT_FOUND. */
export async function loadConfirmation(
  db: ConfirmationsDb,
  tenantId: string,
  id: string,
  forUpdate = false,
): Promise<ConfirmationRow> {
  let query = db
    .selectFrom('compute.confirmations')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row)
    throw new ComputeError('NOT_FOUND', `confirmation ${id} was not found in tenant ${tenantId}`, {
      details: { id },
      hint: 'List the confirmations you are asked for with better-compute confirmations list.',
    });
  return row;
}

/** Writes `expired` on the open confirmations whose window closed by `now` (of a tenant, or one call). */
export async function expireDue(
  db: ConfirmationsDb,
  now: Date,
  where: { tenantId: string } | { delegationId: string; method: string; inputDigest: string },
): Promise<void> {
  let query = db
    .updateTable('compute.confirmations')
    .set({ state: 'expired' })
    .where('state', 'in', ['pending', 'approved'])
    .where('expires_at', '<=', now);
  query =
    'tenantId' in where
      ? query.where('tenant_id', '=', where.tenantId)
      : query
          .where('delegation_id', '=', where.delegationId)
          .where('method', '=', where.method)
          .where('input_digest', '=', where.inputDigest);
  await query.execute();
}
