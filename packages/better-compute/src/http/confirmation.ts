/**
 * Delegated confirmation in the request pipeline (docs/confirmations.md), called by `run` after
 * authorization. An agent's mutation whose action one of its delegation's `confirm` patterns names,
 * or a reservation above its spend limit, runs only with its person's approved confirmation of
 * exactly that call (its method and input digest); otherwise it is answered CONFIRMATION_REQUIRED
 * with the confirmation to approve. The store (the confirmations module, given by compute.ts) keeps
 * them; this file decides which calls wait and hands the pipeline a ticket it spends in the call's
 * own transaction.
 */
import {
  actionPatternMatches,
  type AnyMethod,
  ComputeError,
  DEFAULT_CONFIRM_PATTERNS,
  type IamBridge,
  type Identity,
  methodKey,
} from '@better-compute/core';
import type { ConfirmationCall, ConfirmationTicket } from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { EventDraft } from '../modules/define-module.js';

export type { ConfirmationTicket };

type DelegationState = 'active' | 'expired' | 'revoked' | null;

/** Where confirmations are kept: the confirmations module's index (`confirmationStore`). */
export interface ConfirmationStore {
  /** The ticket a held call runs with; throws CONFIRMATION_REQUIRED (or a refusal) otherwise. */
  admit(db: Kysely<ComputeTables>, call: ConfirmationCall, now: Date): Promise<ConfirmationTicket>;
  /** In the call's transaction: spends a `run` ticket; the event it writes. */
  consume(trx: Kysely<ComputeTables>, ticket: ConfirmationTicket, now: Date): Promise<EventDraft>;
  /** Ends the open confirmations (of a tenant, or of one) whose delegation no longer counts. */
  endRevoked(
    db: Kysely<ComputeTables>,
    tenantId: string,
    confirmationId: string | undefined,
    delegationState: (delegationId: string) => Promise<DelegationState>,
    now: Date,
  ): Promise<void>;
  /** The refusal of a `replay-only` call whose key kept no answer. */
  spent(ticket: ConfirmationTicket): ComputeError;
}

export interface ConfirmationOptions {
  store: ConfirmationStore | undefined;
  iam: IamBridge;
  db: () => Kysely<ComputeTables>;
  now: () => Date;
}

/** Why the delegation holds this call for its person, or null when it may run. */
function holdReason(
  delegation: NonNullable<Identity['delegation']>,
  key: string,
  action: string,
  input: Record<string, unknown>,
): string | null {
  const pattern = delegation.confirm.find((p) => actionPatternMatches(p, action));
  if (pattern !== undefined) return `${action} matches the delegation’s confirm pattern ${pattern}`;
  const limit = delegation.spendLimitGpuHours;
  if (key === 'reservations.create' && limit !== null) {
    const gpuHours = (Number(input.gpus) * Number(input.durationSeconds)) / 3600;
    if (!(gpuHours <= limit))
      return `the reservation takes ${Math.round(gpuHours * 100) / 100} GPU-hours, above the delegation’s limit of ${limit}`;
  }
  return null;
}

/**
 * Before a mutation's transaction: null when the call needs no confirmation, else the ticket it
 * runs with. A call on confirmations themselves first ends those of delegations IAM no longer
 * counts (their agents' credentials stopped with them), so none is shown or approved as open.
 */
/**
 * Whether `confirmationFor` has anything to do for a call: the confirmations' own methods, and an
 * agent's mutations that name an action. Asked first, so every other call skips an await.
 */
export function confirmationApplies(call: {
  identity: Identity | null;
  method: AnyMethod;
  action: string | undefined;
}): boolean {
  const { identity, method, action } = call;
  if (method.group === 'confirmations') return true;
  return identity?.principalKind === 'agent' && method.kind === 'mutation' && Boolean(action);
}

export async function confirmationFor(
  options: ConfirmationOptions,
  call: {
    identity: Identity | null;
    method: AnyMethod;
    action: string | undefined;
    tenantId: string;
    resource: { type: string; id?: string | undefined };
    input: Record<string, unknown>;
    requestId: string;
  },
): Promise<ConfirmationTicket | null> {
  const { identity, method, action, input } = call;
  const key = methodKey(method);
  const { store, iam } = options;
  if (method.group === 'confirmations') {
    if (store && iam.delegationState) {
      const named = typeof input.confirmationId === 'string' ? input.confirmationId : undefined;
      await store.endRevoked(
        options.db(),
        call.tenantId,
        named,
        (id) => iam.delegationState!(id),
        options.now(),
      );
    }
    return null;
  }
  if (identity?.principalKind !== 'agent' || method.kind !== 'mutation' || !action) return null;
  const delegation = identity.delegation;
  if (!delegation || !identity.actingFor) {
    // An IAM without delegations: what the default would hold back, the agent does not do at all.
    const held = DEFAULT_CONFIRM_PATTERNS.find((p) => actionPatternMatches(p, action));
    if (held === undefined) return null;
    throw new ComputeError(
      'ACCESS_DENIED',
      `${action} needs its person’s confirmation, and agent ${identity.principalId} has no delegation to ask under`,
      {
        details: { reason: 'no-delegation', action },
        hint: 'Its person makes this call: this deployment’s IAM gives agents no delegation.',
      },
    );
  }
  const reason = holdReason(delegation, key, action, input);
  if (reason === null) return null;
  if (!store) {
    throw new ComputeError(
      'ACCESS_DENIED',
      `${key} needs its person’s confirmation, which this server does not keep`,
      {
        details: { reason: 'confirmations-off', action },
        hint: 'Its person makes this call.',
      },
    );
  }
  return store.admit(
    options.db(),
    {
      tenantId: call.tenantId,
      agentId: identity.principalId,
      personId: identity.actingFor,
      delegationId: delegation.id,
      method: key,
      action,
      resource: { type: call.resource.type, ...(call.resource.id ? { id: call.resource.id } : {}) },
      input,
      idempotent: Boolean(method.idempotent),
      ...(method.secretInput?.length ? { secretInput: method.secretInput } : {}),
      reason,
      requestId: call.requestId,
    },
    options.now(),
  );
}

/** The audit entry's actor kind: an agent's carries its delegation (`agent/dlg_…`). */
export function auditActorKind(identity: Identity): string {
  return identity.principalKind === 'agent' && identity.delegation
    ? `agent/${identity.delegation.id}`
    : identity.principalKind;
}
