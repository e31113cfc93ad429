/**
 * `confirmations.approve` and `decline`. Only the person the agent acts for approves, from a
 * session opened with their second factor; the person, or a tenant administrator (a holder of
 * compute:confirmations:decline on others' confirmations), declines, also with a second factor.
 * An agent does neither, whatever its bindings say. Approval opens the 15-minute window in which
 * the agent's retry runs once.
 */
import { ComputeError, type Identity } from '@better-compute/core';
import { CONFIRMATION_APPROVED_SECONDS } from '@better-compute/core/methods';
import type { CallContext } from '../define-module.js';
import { confirmationsDb } from './tables.js';
import { confirmationEvent, confirmationView, loadConfirmation, stateAt } from './views.js';

type ConfirmationInput = { confirmationId: string };

function refuse(message: string, reason: string, hint: string): ComputeError {
  return new ComputeError('ACCESS_DENIED', message, { details: { reason }, hint });
}

/** The caller, who must be a person (or service account) signed in with a second factor. */
function deciding(identity: Identity | null, verb: 'approve' | 'decline'): Identity {
  if (!identity) throw new ComputeError('UNAUTHENTICATED', `confirmations.${verb} needs a credential`);
  if (identity.principalKind === 'agent')
    throw refuse(
      `an agent cannot ${verb} a confirmation, its own least of all`,
      'agent-cannot-confirm',
      'The person the agent acts for decides: better-compute confirmations approve or decline.',
    );
  if (!identity.mfa)
    throw refuse(
      `to ${verb} a confirmation, sign in with your second factor`,
      'second-factor-required',
      'Sign in again with your TOTP code (better-iam login --totp-stdin) and use that session (better-compute auth login), not an API key.',
    );
  return identity;
}

export async function approveConfirmation(ctx: CallContext<ConfirmationInput>) {
  const identity = deciding(ctx.identity, 'approve');
  const db = confirmationsDb(ctx.db);
  const row = await loadConfirmation(db, ctx.tenantId, ctx.input.confirmationId, true);
  if (row.person_id !== identity.principalId)
    throw refuse(
      `only ${row.person_id}, whom agent ${row.agent_id} acts for, approves confirmation ${row.id}`,
      'not-the-person',
      'An administrator may decline it (better-compute confirmations decline); approving is the person’s alone.',
    );
  const now = ctx.now();
  const state = stateAt(row, now);
  if (state !== 'pending')
    throw new ComputeError(
      'INVALID_STATE',
      `confirmation ${row.id} is ${state}; only a pending one is approved`,
      {
        details: { id: row.id, state },
        hint: 'The agent’s retry asks for a new confirmation if it still needs one.',
      },
    );
  const approved = await db
    .updateTable('compute.confirmations')
    .set({
      state: 'approved',
      decided_at: now,
      decided_by: identity.principalId,
      expires_at: new Date(now.getTime() + CONFIRMATION_APPROVED_SECONDS * 1000),
    })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit(confirmationEvent('confirmation.approved', approved));
  return confirmationView(approved, now);
}

export async function declineConfirmation(ctx: CallContext<ConfirmationInput>) {
  // IAM allowed the call: on the caller's own confirmation, or (without @own) on anyone's.
  const identity = deciding(ctx.identity, 'decline');
  const db = confirmationsDb(ctx.db);
  const row = await loadConfirmation(db, ctx.tenantId, ctx.input.confirmationId, true);
  const now = ctx.now();
  const state = stateAt(row, now);
  if (state !== 'pending' && state !== 'approved')
    throw new ComputeError('INVALID_STATE', `confirmation ${row.id} is ${state}; it can no longer run`, {
      details: { id: row.id, state },
    });
  const declined = await db
    .updateTable('compute.confirmations')
    .set({ state: 'declined', decided_at: now, decided_by: identity.principalId })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit(confirmationEvent('confirmation.declined', declined));
  return confirmationView(declined, now);
}
