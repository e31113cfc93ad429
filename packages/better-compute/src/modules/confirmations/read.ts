/**
 * Reading confirmations: `list` (newest first: the caller's own, or with `scope: 'all'` the
 * tenant's) and `get`. A confirmation whose window closed has its expiry written before the answer.
 */
import { ComputeError } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { type ConfirmationState, confirmationsDb } from './tables.js';
import { confirmationView, expireDue, loadConfirmation } from './views.js';

export async function listConfirmations(
  ctx: CallContext<{
    scope: 'mine' | 'all';
    state?: ConfirmationState | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const now = ctx.now();
  const db = confirmationsDb(ctx.db);
  await expireDue(db, now, { tenantId: ctx.tenantId });
  let query = db
    .selectFrom('compute.confirmations')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .orderBy('seq', 'desc')
    .limit(ctx.input.limit + 1);
  if (ctx.input.scope === 'mine') {
    const identity = ctx.identity!;
    // A person's are those asked of them; an agent's, those it asked.
    query =
      identity.principalKind === 'agent'
        ? query.where('agent_id', '=', identity.principalId)
        : query.where('person_id', '=', identity.principalId);
  }
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  if (ctx.input.cursor) {
    const after = await db
      .selectFrom('compute.confirmations')
      .select('seq')
      .where('id', '=', ctx.input.cursor)
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirst();
    if (!after)
      throw new ComputeError('INVALID_ARGUMENT', 'the cursor names no confirmation', {
        details: { field: 'cursor' },
        hint: 'Pass the nextCursor of the previous page, or leave --cursor out.',
      });
    query = query.where('seq', '<', after.seq);
  }
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map((row) => confirmationView(row, now)),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
}

export async function getConfirmation(ctx: CallContext<{ confirmationId: string }>) {
  const now = ctx.now();
  const db = confirmationsDb(ctx.db);
  return confirmationView(await loadConfirmation(db, ctx.tenantId, ctx.input.confirmationId), now);
}

/** Who owns a confirmation, for `@own` decisions: the person it asks. */
export async function confirmationOwner(
  db: CallContext['db'],
  tenantId: string,
  input: { confirmationId: string },
): Promise<string | null> {
  const row = await confirmationsDb(db)
    .selectFrom('compute.confirmations')
    .select('person_id')
    .where('id', '=', input.confirmationId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row?.person_id ?? null;
}
