/**
 * The `confirmations` group: delegated confirmation (docs/confirmations.md). An agent's call whose
 * action its delegation holds back (or a reservation above its spend limit) is answered
 * CONFIRMATION_REQUIRED with a confirmation: what would run, exactly, for the person the agent acts
 * for to approve or decline from a session opened with their second factor. Once approved, the
 * agent's retry of the same call runs once, within a window.
 *
 * Actions: a person reads, approves and declines their own (`compute:confirmations:*@own`, which
 * the built-in member and operator roles hold); `list` with `scope: 'all'` and a decline of someone
 * else's take the action without `@own` (tenant administrators). Nobody approves another person's.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';

export const confirmationState = z.enum([
  'pending',
  'approved',
  'declined',
  'expired',
  'consumed',
  'revoked',
]);

/** An agent's call that its delegation holds for its person (the pipeline asks the store about it). */
export interface ConfirmationCall {
  tenantId: string;
  agentId: string;
  personId: string;
  delegationId: string;
  /** `group.name`. */
  method: string;
  action: string;
  resource: { type: string; id?: string | undefined };
  /** The validated input, exactly as the method would run with it. */
  input: Record<string, unknown>;
  /** Whether the method keeps answers by idempotency key. */
  idempotent: boolean;
  /** Input fields that are secrets (the method's `secretInput`): never in a summary. */
  secretInput?: readonly string[] | undefined;
  /** Why it is held: the pattern it matched, or the spend limit. */
  reason: string;
  requestId: string;
}

/**
 * What the call may do: `run` spends the approved confirmation with the call; `replay-only` lets
 * an idempotent call through only to the answer its key kept (its confirmation was spent already).
 */
export type ConfirmationTicket = { kind: 'run' | 'replay-only'; id: string };

/** How long a confirmation waits for the person: one hour. */
export const CONFIRMATION_PENDING_SECONDS = 3600;
/** How long an approved confirmation waits for the agent's retry: 15 minutes. */
export const CONFIRMATION_APPROVED_SECONDS = 15 * 60;

export const confirmationSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  delegationId: z.string(),
  /** The agent that asked. */
  agentId: z.string(),
  /** The person it acts for: the only one who may approve. */
  personId: z.string(),
  /** The method that would run, `group.name`. */
  method: z.string(),
  action: z.string(),
  resource: z.object({ type: z.string(), id: z.string().optional() }),
  /** The method and exactly the input that would run (secrets and the idempotency key left out). */
  summary: z.string(),
  /** Why it needs confirmation: the delegation's pattern it matched, or the spend limit. */
  reason: z.string(),
  /** SHA-256 of the canonical validated input, hex: the retry must send exactly it. */
  inputDigest: z.string(),
  state: confirmationState,
  createdAt: isoTime,
  /** Pending: when it expires unanswered. Approved: the end of the window for the retry. */
  expiresAt: isoTime,
  decidedAt: isoTime.nullable(),
  decidedBy: z.string().nullable(),
  consumedAt: isoTime.nullable(),
});

const confirmationId = idOf('confirmation').describe('The confirmation, like cfm_01…');
const own = (input: { confirmationId: string }) => ({
  type: 'compute-confirmation',
  id: input.confirmationId,
});

const list = method({
  kind: 'query',
  summary: 'Confirmations agents asked for: your own (the person’s, or an agent’s requests), or every one',
  tenantScoped: true,
  access: { action: 'compute:confirmations:read' },
  actionFor: (input) =>
    input.scope === 'all' ? 'compute:confirmations:list-all' : 'compute:confirmations:read',
  alsoActions: ['compute:confirmations:list-all'],
  input: z
    .object({
      tenantId,
      scope: z
        .enum(['mine', 'all'])
        .default('mine')
        .describe('mine: those you are asked to confirm (an agent: those it asked for); all: the tenant’s'),
      state: confirmationState.optional().describe('Only confirmations in this state'),
      ...pageInputById('confirmation'),
    })
    .strict(),
  output: pageOf(confirmationSchema),
});

const get = method({
  kind: 'query',
  summary: 'One confirmation: what would run, its state and its window',
  tenantScoped: true,
  access: { action: 'compute:confirmations:view' },
  resource: own,
  input: z.object({ tenantId, confirmationId }).strict(),
  output: confirmationSchema,
});

const approve = method({
  kind: 'mutation',
  summary:
    'Approve what your agent asked to run (a session with your second factor): its retry then runs once within 15 minutes',
  tenantScoped: true,
  resource: own,
  input: z.object({ tenantId, confirmationId }).strict(),
  output: confirmationSchema,
});

const decline = method({
  kind: 'mutation',
  summary: 'Decline what an agent asked to run (the person, or a tenant administrator): it never runs',
  tenantScoped: true,
  resource: own,
  input: z.object({ tenantId, confirmationId }).strict(),
  output: confirmationSchema,
});

export const confirmationsGroup = defineGroup(
  'confirmations',
  { module: 'core' },
  { list, get, approve, decline },
);
