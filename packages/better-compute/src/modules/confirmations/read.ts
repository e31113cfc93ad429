/**
 * Reading confirmations: `list` (newest first: the caller's own, or with `scope: 'all'` the
 * tenant's) and `get`. A confirmation whose window closed has its expiry written before the answer.
 */
import { cursorRow, pageOf } from '../../db/pages.js';
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
  const after = await cursorRow(ctx.input.cursor, 'confirmation', (id) =>
    db
      .selectFrom('compute.confirmations')
      .select('seq')
      .where('id', '=', id)
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirst(),
  );
  if (after) query = query.where('seq', '<', after.seq);
  return pageOf(await query.execute(), ctx.input.limit, (row) => confirmationView(row, now));
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
