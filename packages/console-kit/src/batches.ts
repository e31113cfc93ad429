/**
 * The Batches page's view model (the console guide's "Destructive batches"): the tenant's batches of
 * destructive commands, pending ones first by default, each with its window counting down and who
 * proposed it; a batch's details with its whole scope grouped by command kind, its approvals and
 * its member commands by state; Cancel. The page never approves: a browser holds no approver key,
 * so it shows the `batch approve` command, whose CLI pages the scope and recomputes the root itself.
 *
 * Every string here came from the server, so what people read passes through `safeCell`: a reason
 * an agent wrote cannot reorder the text around it with bidirectional controls or break the line.
 */
import type { CallOutput, ComputeClient } from '@better-compute/client';
import { destructiveKind, isId, safeCell } from '@better-compute/core';
import { MAX_SCOPE_PAGE } from '@better-compute/core/methods';
import { describeAction, type ActionDescription } from './actions.js';
import type { TrackedStore } from './live.js';
import { stateList } from './state-list.js';
import { DetailStore, type ListStore } from './stores.js';
import type { ValueStore } from './subscribable.js';

export type Batch = CallOutput<'commandBatches.get'>;
export type BatchState = Batch['state'];
export type BatchScopeEntry = CallOutput<'commandBatches.scope'>['items'][number];
export type BatchMember = CallOutput<'commandBatches.members'>['items'][number];
/** The list's filter: one state, or every batch. */
export type BatchFilter = BatchState | 'all';

export const BATCH_FILTERS: readonly BatchFilter[] = ['pending', 'approved', 'expired', 'cancelled', 'all'];
/** Scope entries per `commandBatches.scope` call: the most the server gives in one page. */
export const BATCH_SCOPE_PAGE = MAX_SCOPE_PAGE;
/** The most scope entries (and member commands) Details reads; past it, a warning says so. */
export const BATCH_SCOPE_CAP = 20_000;
/** Member commands per `commandBatches.members` call (the list methods' largest page). */
export const BATCH_MEMBERS_PAGE = 500;

/** One scope entry as a person reads it. */
export interface ScopeLine {
  index: number;
  /** What it acts on: a node id. */
  subject: string;
  /** The payload as `field value` pairs, or a warning for an unbound leaf. */
  payload: string;
  /** The leaf admits any payload of its kind. */
  unbound: boolean;
}

/** The scope entries of one command kind, in tree order. */
export interface ScopeGroup {
  kind: string;
  /** What the kind does ("power off, reset or cycle the machine"); null for a kind the console does not know. */
  summary: string | null;
  count: number;
  entries: ScopeLine[];
}

/** One member command as a person reads it. */
export interface MemberLine {
  commandId: string;
  kind: string;
  nodeId: string;
  /** Why it failed or was cancelled; null otherwise. */
  error: string | null;
}

/** The member commands in one state; held ones read "awaiting approval". */
export interface MemberGroup {
  state: string;
  count: number;
  commands: MemberLine[];
}

/** One approval so far: the approver key's id, who submitted it, and when. */
export interface ApprovalLine {
  kid: string;
  approver: string;
  at: string;
}

export interface BatchDetails {
  batch: Batch;
  approvals: ApprovalLine[];
  groups: ScopeGroup[];
  /** Scope entries read (at most the cap). */
  entriesRead: number;
  members: MemberGroup[];
  membersRead: number;
  /** What the panel could not show or check, in words: a cut-short scope, a scope that changed. */
  warnings: string[];
}

export interface BatchesViewOptions {
  tenantId: string;
  /** Batches per list page; default 50. */
  pageSize?: number | undefined;
  /** Scope entries per call; default BATCH_SCOPE_PAGE (5,000). */
  scopePageSize?: number | undefined;
  /** The most scope entries and member commands Details reads; default BATCH_SCOPE_CAP (20,000). */
  scopeCap?: number | undefined;
  /** The list's first filter; default pending. */
  filter?: BatchFilter | undefined;
}

export interface BatchesView {
  readonly tenantId: string;
  /** The batches of the current filter, newest first. */
  readonly list: ListStore<Batch>;
  readonly filter: ValueStore<BatchFilter>;
  /**
   * What the live stream keeps current (`live.track('batch', view.tracked)`): a batch's event re-reads
   * its row, and a batch that left the filter's state (approved while pending ones show) leaves the list.
   */
  readonly tracked: TrackedStore;
  /** Shows another state's batches (reads the list again). */
  setFilter(filter: BatchFilter): Promise<void>;
  /** A store of one batch's details; `refresh()` reads it all again. */
  details(batchId: string): DetailStore<BatchDetails>;
  /** Ends a pending batch: none of its commands run. Updates the list with the answer. */
  cancel(batchId: string): Promise<Batch>;
  /** What Cancel is decided as (compute:batches:approve on the batch), for the permission check. */
  cancelAction(batchId: string): ActionDescription;
}

/** Whether a state is one the list filters by. */
export const isBatchFilter = (value: unknown): value is BatchFilter =>
  typeof value === 'string' && (BATCH_FILTERS as readonly string[]).includes(value);

/**
 * What a row says of a batch: its reason, and who proposed it. A person's batch names its creator;
 * one an agent proposed for a person carries the guide's warning instead, since the reason is the
 * agent's own text (the same words `batch approve` prints after the reason).
 */
export function describeBatch(batch: Batch): {
  reason: string;
  proposedBy: string;
  agentWarning: boolean;
  /** Its commands by kind: `metal.power ×12, node.delete ×1`. */
  kinds: string;
} {
  const reason = safeCell(batch.reason);
  const kinds = safeCell(batch.kinds.map((kind) => `${kind.kind} ×${kind.count}`).join(', '));
  if (batch.createdByAgent)
    return {
      reason,
      kinds,
      agentWarning: true,
      proposedBy: safeCell(
        `Proposed by agent ${batch.createdByAgent} for ${batch.createdBy}${
          batch.delegationId ? ` (delegation ${batch.delegationId})` : ''
        }: the reason is the agent's own text.`,
      ),
    };
  return {
    reason,
    kinds,
    agentWarning: false,
    proposedBy: safeCell(`Created by ${batch.proposedBy || batch.createdBy}`),
  };
}

/** Whole seconds until `notAfter` at `now` (ms), 0 once it has passed; null for a batch that is not pending. */
export function secondsLeft(batch: Pick<Batch, 'state' | 'notAfter'>, now: number): number | null {
  if (batch.state !== 'pending') return null;
  const end = Date.parse(batch.notAfter);
  if (Number.isNaN(end)) return 0;
  return Math.max(0, Math.floor((end - now) / 1000));
}

/** A countdown in words: "23 h 59 min 58 s left", "4 min 07 s left", or "window closed" at zero. */
export function countdownText(seconds: number): string {
  if (seconds <= 0) return 'window closed';
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return `${h > 0 ? `${h} h ` : ''}${m} min ${String(s).padStart(2, '0')} s left`;
}

/**
 * The command an approver runs in their own terminal, for a pending batch: the CLI lists the scope,
 * recomputes the root and only then signs. Null for any other state, and for an id that is not a
 * batch id (a server's answer is never pasted into a shell unchecked).
 */
export function approveCommand(batch: Pick<Batch, 'id' | 'state'>): string | null {
  if (batch.state !== 'pending' || !isId('batch', batch.id)) return null;
  return `better-compute batch approve --batch ${batch.id} --key <approver key>`;
}

/** A payload as a person reads it: `action off`, `image debian-12, profile default`. */
function payloadText(kind: string, payload: Record<string, string> | null): string {
  if (payload === null) return 'any payload of its kind (unbound)';
  const entry = destructiveKind(kind);
  // The kind's own field order, as the leaf encodes it; fields the console does not know follow.
  const known = entry ? entry.fields.map((field) => field.name).filter((name) => name in payload) : [];
  const names = [...known, ...Object.keys(payload).filter((name) => !known.includes(name))];
  if (names.length === 0) return 'no payload';
  return safeCell(names.map((name) => `${name} ${payload[name]}`).join(', '));
}

/** The scope grouped by command kind, in the order the kinds first appear in the tree. */
export function groupScope(entries: readonly BatchScopeEntry[]): ScopeGroup[] {
  const groups = new Map<string, ScopeGroup>();
  for (const entry of entries) {
    let group = groups.get(entry.kind);
    if (!group) {
      const known = destructiveKind(entry.kind);
      group = { kind: safeCell(entry.kind), summary: known?.summary ?? null, count: 0, entries: [] };
      groups.set(entry.kind, group);
    }
    group.count++;
    group.entries.push({
      index: entry.index,
      subject: safeCell(entry.subject),
      payload: payloadText(entry.kind, entry.payload),
      unbound: entry.payload === null,
    });
  }
  return [...groups.values()];
}

/** The member commands by state, held ones as "awaiting approval", in the order states first appear. */
export function groupMembers(members: readonly BatchMember[]): MemberGroup[] {
  const groups = new Map<string, MemberGroup>();
  for (const member of members) {
    const state = member.awaitingApproval ? 'awaiting approval' : member.state;
    let group = groups.get(state);
    if (!group) groups.set(state, (group = { state, count: 0, commands: [] }));
    group.count++;
    group.commands.push({
      commandId: safeCell(member.commandId),
      kind: safeCell(member.kind),
      nodeId: safeCell(member.nodeId),
      error: member.error === null ? null : safeCell(member.error),
    });
  }
  return [...groups.values()];
}

const count = (n: number) => n.toLocaleString('en-US');

/**
 * The batches view over a client.
 *
 * @example
 * const batches = createBatchesView(client, { tenantId });
 * batches.list.subscribe(() => render(batches.list.get()));
 * const details = batches.details('batch_…');
 * await details.refresh();
 */
export function createBatchesView(client: ComputeClient, options: BatchesViewOptions): BatchesView {
  const { tenantId } = options;
  const pageSize = options.pageSize ?? 50;
  const scopePageSize = Math.min(options.scopePageSize ?? BATCH_SCOPE_PAGE, BATCH_SCOPE_PAGE);
  const cap = options.scopeCap ?? BATCH_SCOPE_CAP;
  const { list, filter, tracked, setFilter, place } = stateList<Batch, BatchFilter>({
    filter: options.filter ?? 'pending',
    load: (state, cursor) =>
      client.call('commandBatches.list', {
        tenantId,
        limit: pageSize,
        ...(state ? { state } : {}),
        ...(cursor ? { cursor } : {}),
      }),
    readOne: (batchId) => client.call('commandBatches.get', { tenantId, batchId }),
  });

  // Pages the scope until it ends or the cap is reached; the cap bounds what a browser tab holds.
  async function readScope(batch: Batch, warnings: string[]): Promise<BatchScopeEntry[]> {
    const entries: BatchScopeEntry[] = [];
    let cursor: string | undefined;
    let more = true;
    let changed = false;
    while (more && entries.length < cap) {
      const page = await client.call('commandBatches.scope', {
        tenantId,
        batchId: batch.id,
        limit: Math.min(scopePageSize, cap - entries.length),
        ...(cursor ? { cursor } : {}),
      });
      if ((page.root !== batch.root || page.size !== batch.size) && !changed) {
        changed = true;
        warnings.push(
          `The scope changed while it was read (root ${safeCell(page.root)}, ${count(page.size)} entries, not ${batch.root}, ${count(batch.size)}): do not approve it; read it again.`,
        );
      }
      entries.push(...page.items);
      cursor = page.nextCursor ?? undefined;
      // An empty page that says there is more would loop forever: it ends the reading instead.
      more = page.nextCursor !== null && page.items.length > 0;
    }
    if (more)
      warnings.push(
        `Showing the first ${count(entries.length)} of ${count(batch.size)} scope entries: the console reads at most ${count(cap)}. Review the whole scope with better-compute batch show --scope-out.`,
      );
    else if (entries.length !== batch.size)
      warnings.push(
        `The server listed ${count(entries.length)} scope entries for a batch of ${count(batch.size)}: do not approve it; the CLI will refuse it too.`,
      );
    return entries;
  }

  async function readMembers(batch: Batch, warnings: string[]): Promise<BatchMember[]> {
    const members: BatchMember[] = [];
    let cursor: string | undefined;
    let more = true;
    while (more && members.length < cap) {
      const page = await client.call('commandBatches.members', {
        tenantId,
        batchId: batch.id,
        limit: Math.min(BATCH_MEMBERS_PAGE, cap - members.length),
        ...(cursor ? { cursor } : {}),
      });
      members.push(...page.items);
      cursor = page.nextCursor ?? undefined;
      // An empty page that says there is more would loop forever: it ends the reading instead.
      more = page.nextCursor !== null && page.items.length > 0;
    }
    if (more)
      warnings.push(
        `Showing the first ${count(members.length)} member commands: the console reads at most ${count(cap)}. See them all with better-compute batch members.`,
      );
    return members;
  }

  return {
    tenantId,
    list,
    filter,
    tracked,
    setFilter,
    details(batchId) {
      return new DetailStore<BatchDetails>(async () => {
        const batch = await client.call('commandBatches.get', { tenantId, batchId });
        const warnings: string[] = [];
        const [entries, members] = await Promise.all([
          readScope(batch, warnings),
          readMembers(batch, warnings),
        ]);
        return {
          batch,
          approvals: batch.approvals.map((approval) => ({
            kid: safeCell(approval.kid),
            approver: safeCell(approval.approver),
            at: approval.at,
          })),
          groups: groupScope(entries),
          entriesRead: entries.length,
          members: groupMembers(members),
          membersRead: members.length,
          warnings,
        };
      });
    },
    async cancel(batchId) {
      return place(await client.call('commandBatches.cancel', { tenantId, batchId }));
    },
    cancelAction: (batchId) => describeAction('commandBatches', 'cancel', batchId),
  };
}
