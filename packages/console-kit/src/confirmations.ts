/**
 * The Approvals page's view model (the console guide: "A delegated call held back for approval
 * shows 'awaiting approval' with the confirmation id"): the confirmations the signed-in person's
 * agents asked for, pending ones first by default, each with the agent, the method, exactly what
 * would run, why it was held and its window counting down; Approve and Decline.
 *
 * The console never decides who may approve: the server takes an approval only from the person the
 * agent acts for, in a session opened with their second factor, and a refusal comes back as the
 * API's error for the page to show in place. The summary and reason carry an agent's own input, so
 * everything people read passes through `safeCell`: no bidirectional control or line break in an
 * agent's text can reorder or hide what is shown around it.
 */
import type { CallOutput, ComputeClient } from '@better-compute/client';
import { isId, safeCell } from '@better-compute/core';
import { confirmationState } from '@better-compute/core/methods';
import type { TrackedStore } from './live.js';
import type { ListStore } from './stores.js';
import { stateList } from './state-list.js';
import type { ValueStore } from './subscribable.js';

export type Confirmation = CallOutput<'confirmations.get'>;
export type ConfirmationState = Confirmation['state'];
/** The list's filter: one state, or every confirmation. */
export type ConfirmationFilter = ConfirmationState | 'all';

export const CONFIRMATION_FILTERS: readonly ConfirmationFilter[] = [...confirmationState.options, 'all'];

export interface ConfirmationsViewOptions {
  tenantId: string;
  /** Confirmations per list page; default 50. */
  pageSize?: number | undefined;
  /** The list's first filter; default pending. */
  filter?: ConfirmationFilter | undefined;
}

export interface ConfirmationsView {
  readonly tenantId: string;
  /** The person's confirmations of the current filter, newest first. */
  readonly list: ListStore<Confirmation>;
  readonly filter: ValueStore<ConfirmationFilter>;
  /**
   * What the live stream keeps current (`live.track('confirmation', view.tracked)`): a confirmation's
   * event re-reads its row, and one that left the filter's state (approved while pending ones show)
   * leaves the list.
   */
  readonly tracked: TrackedStore;
  /** Shows another state's confirmations (reads the list again). */
  setFilter(filter: ConfirmationFilter): Promise<void>;
  /** Approves a pending confirmation (the server wants a second-factor session). Updates the list. */
  approve(confirmationId: string): Promise<Confirmation>;
  /** Declines a pending (or approved, not yet run) confirmation: the agent's call never runs. */
  decline(confirmationId: string): Promise<Confirmation>;
}

/** Whether a value is one the list filters by. */
export const isConfirmationFilter = (value: unknown): value is ConfirmationFilter =>
  typeof value === 'string' && (CONFIRMATION_FILTERS as readonly string[]).includes(value);

/** What a row says of a confirmation, every string made safe to show. */
export interface ConfirmationText {
  /** The confirmation id, or a placeholder when the server's answer is not one. */
  id: string;
  /** "Agent agt_… acting for usr_… (delegation dlg_…) asks to run:" */
  asks: string;
  /** The method that would run, `group.name`. */
  method: string;
  /** Exactly what would run: the method and its input (secrets and the idempotency key left out). */
  summary: string;
  /** Why it was held: the delegation's pattern it matched, or the spend limit. */
  reason: string;
  /** The state as a person reads it: "awaiting approval" while pending. */
  state: string;
}

const STATE_WORDS: Record<ConfirmationState, string> = {
  pending: 'awaiting approval',
  approved: 'approved: the retry may run once',
  declined: 'declined',
  expired: 'expired',
  consumed: 'approved and run',
  revoked: 'revoked with its delegation',
};

/** A confirmation's row in words (the same lines `confirmations approve` prints before it asks). */
export function describeConfirmation(confirmation: Confirmation): ConfirmationText {
  return {
    id: isId('confirmation', confirmation.id) ? confirmation.id : safeCell(confirmation.id),
    asks: safeCell(
      `Agent ${confirmation.agentId} acting for ${confirmation.personId} (delegation ${confirmation.delegationId}) asks to run:`,
    ),
    method: safeCell(confirmation.method),
    summary: safeCell(confirmation.summary),
    reason: safeCell(confirmation.reason),
    state: STATE_WORDS[confirmation.state] ?? safeCell(String(confirmation.state)),
  };
}

/**
 * Whole seconds until `expiresAt` at `now` (ms), 0 once it has passed: for a pending confirmation
 * the time left to decide, for an approved one the agent's window to retry. Null in any other state.
 */
export function confirmationSecondsLeft(
  confirmation: Pick<Confirmation, 'state' | 'expiresAt'>,
  now: number,
): number | null {
  if (confirmation.state !== 'pending' && confirmation.state !== 'approved') return null;
  const end = Date.parse(confirmation.expiresAt);
  if (Number.isNaN(end)) return 0;
  return Math.max(0, Math.floor((end - now) / 1000));
}

/** Whether Approve applies at `now`: pending, and its hour not yet over. */
export function isApprovable(confirmation: Pick<Confirmation, 'state' | 'expiresAt'>, now: number): boolean {
  return confirmation.state === 'pending' && (confirmationSecondsLeft(confirmation, now) ?? 0) > 0;
}

/**
 * Whether Decline applies at `now`: pending, or approved and the agent has not retried yet (a
 * person may take an approval back until the call runs), with time left either way.
 */
export function isDeclinable(confirmation: Pick<Confirmation, 'state' | 'expiresAt'>, now: number): boolean {
  return (confirmationSecondsLeft(confirmation, now) ?? 0) > 0;
}

/**
 * The confirmations view over a client: the signed-in person's own (`scope: 'mine'`).
 *
 * @example
 * const approvals = createConfirmationsView(client, { tenantId });
 * approvals.list.subscribe(() => render(approvals.list.get()));
 * await approvals.list.ensure();
 * const [first] = approvals.list.get().items;
 * if (first) await approvals.approve(first.id); // ACCESS_DENIED without a second-factor session
 */
export function createConfirmationsView(
  client: ComputeClient,
  options: ConfirmationsViewOptions,
): ConfirmationsView {
  const { tenantId } = options;
  const pageSize = options.pageSize ?? 50;
  const { list, filter, tracked, setFilter, place } = stateList<Confirmation, ConfirmationFilter>({
    filter: options.filter ?? 'pending',
    load: (state, cursor) =>
      client.call('confirmations.list', {
        tenantId,
        scope: 'mine',
        limit: pageSize,
        ...(state ? { state } : {}),
        ...(cursor ? { cursor } : {}),
      }),
    readOne: (confirmationId) => client.call('confirmations.get', { tenantId, confirmationId }),
  });

  return {
    tenantId,
    list,
    filter,
    tracked,
    setFilter,
    async approve(confirmationId) {
      return place(await client.call('confirmations.approve', { tenantId, confirmationId }));
    },
    async decline(confirmationId) {
      return place(await client.call('confirmations.decline', { tenantId, confirmationId }));
    },
  };
}
