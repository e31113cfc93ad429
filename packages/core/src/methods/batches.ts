/**
 * The `commandBatches` group: the destructive-batch quorum's server side (docs/quorum.md). A batch
 * is the Merkle tree of `{ subject, kind, payload }` leaves, one held command per leaf; approvers
 * sign its id, root, size, window end and the deployment's trust domain with their own keys,
 * offline or through `batch approve`, and the held commands are sent only once a threshold of the
 * approver set has signed. The server never signs: approvals come from people's keys.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { commandState } from './commands.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';

export const batchState = z.enum(['pending', 'approved', 'expired', 'cancelled']);

/** The most leaves one `commandBatches.create` call takes (the body limit allows about this many). */
export const MAX_CREATE_LEAVES = 500;
/** The longest a batch stays open for approval, and the default. */
export const MAX_BATCH_HOURS = 72;
export const DEFAULT_BATCH_HOURS = 24;
/** The most scope entries one `commandBatches.scope` page holds. */
export const MAX_SCOPE_PAGE = 5_000;

const leafPayload = z
  .record(z.string().max(64), z.string().max(256))
  .describe('The operation’s payload as its kind declares it (docs/quorum.md); the leaf binds exactly it');

const scopeLeafInput = z
  .object({
    subject: z.string().min(1).max(128).describe('What the command acts on: a node id'),
    kind: z.string().min(1).max(64).describe('A destructive command kind, such as metal.power'),
    payload: leafPayload
      .nullable()
      .describe('The payload the leaf binds; null admits any payload of its kind (an unbound leaf)'),
    runWith: leafPayload.optional().describe('For an unbound leaf only: the payload its command runs with'),
  })
  .strict();

const batchApprovalSchema = z.object({
  kid: z.string().describe('The approver key’s id (batch keygen prints it)'),
  /** Who submitted it: the principal that called commandBatches.approve. */
  approver: z.string(),
  at: isoTime,
});

export const batchSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  state: batchState,
  reason: z.string(),
  /** The principal that created it. */
  createdBy: z.string(),
  /** The agent that proposed it for a person (MCP's propose_command_batch), or null. */
  createdByAgent: z.string().nullable(),
  delegationId: z.string().nullable(),
  /**
   * Who proposed it, as approvers read it: a person's identity, or "Proposed by agent X for Y
   * (delegation D): the reason is the agent's own text."
   */
  proposedBy: z.string(),
  trustDomain: z.string(),
  /** The RFC 6962 root of its leaves, 64 lowercase hex digits. */
  root: z.string(),
  size: z.number().int(),
  /** The approver set's epoch when it was created. */
  epoch: z.number().int(),
  kinds: z.array(z.object({ kind: z.string(), count: z.number().int() })),
  approvals: z.array(batchApprovalSchema),
  approvalsNeeded: z.number().int(),
  createdAt: isoTime,
  /** The end of the approval window: approvals and its commands are valid before it only. */
  notAfter: isoTime,
  approvedAt: isoTime.nullable(),
  endedAt: isoTime.nullable(),
});

export const scopeEntrySchema = z.object({
  index: z.number().int(),
  subject: z.string(),
  kind: z.string(),
  payload: z.record(z.string(), z.string()).nullable(),
});

export const batchMemberSchema = z.object({
  commandId: z.string(),
  index: z.number().int(),
  nodeId: z.string(),
  kind: z.string(),
  payload: z.record(z.string(), z.unknown()),
  state: commandState,
  /** Held until the batch is approved. */
  awaitingApproval: z.boolean(),
  error: z.string().nullable(),
  finishedAt: isoTime.nullable(),
});

const batchResource = (input: { batchId: string }) => ({ type: 'compute-batch', id: input.batchId });
const READ = { action: 'compute:batches:read' } as const;
const APPROVE = { action: 'compute:batches:approve' } as const;

const create = method({
  kind: 'mutation',
  summary: 'Create a batch of destructive commands, held until a threshold of approvers signs its scope',
  access: { action: 'compute:batches:create' },
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      reason: z.string().min(1).max(500).describe('What the approvers read first: why these commands'),
      leaves: z
        .array(scopeLeafInput)
        .min(1)
        .max(MAX_CREATE_LEAVES)
        .describe('The batch’s commands, in tree order: one held command per leaf'),
      hours: z
        .number()
        .int()
        .min(1)
        .max(MAX_BATCH_HOURS)
        .default(DEFAULT_BATCH_HOURS)
        .describe('How long the batch stays open for approval'),
    })
    .strict(),
  output: batchSchema,
});

const list = method({
  kind: 'query',
  summary: 'The tenant’s batches, newest first: reason, state, size, approvals had and needed',
  access: READ,
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      state: batchState.optional().describe('Only batches in this state; every state when absent'),
      ...pageInputById('batch'),
    })
    .strict(),
  output: pageOf(batchSchema),
});

const get = method({
  kind: 'query',
  summary: 'One batch with its root, window and approvals',
  access: READ,
  tenantScoped: true,
  resource: batchResource,
  input: z.object({ tenantId, batchId: idOf('batch') }).strict(),
  output: batchSchema,
});

const scope = method({
  kind: 'query',
  summary: 'A page of a batch’s scope leaves, in tree order, so a reviewer recomputes its root',
  access: READ,
  tenantScoped: true,
  resource: batchResource,
  input: z
    .object({
      tenantId,
      batchId: idOf('batch'),
      limit: z
        .number()
        .int()
        .min(1)
        .max(MAX_SCOPE_PAGE)
        .default(MAX_SCOPE_PAGE)
        .describe('The most leaves a page holds'),
      cursor: z
        .string()
        .regex(/^[1-9][0-9]{0,5}$/, 'must be a cursor from a previous page')
        .optional()
        .describe('The previous page’s nextCursor: the index of the next leaf'),
    })
    .strict(),
  output: z.object({
    batchId: z.string(),
    root: z.string(),
    size: z.number().int(),
    items: z.array(scopeEntrySchema),
    nextCursor: z.string().nullable(),
  }),
});

const approve = method({
  kind: 'mutation',
  summary: 'Submit an approver’s signature over the batch’s id, root, size, window and trust domain',
  access: APPROVE,
  tenantScoped: true,
  resource: batchResource,
  input: z
    .object({
      tenantId,
      batchId: idOf('batch'),
      kid: z.string().min(1).max(64).describe('The approver key’s id'),
      signature: z.string().min(1).max(128).describe('The P1363 signature, unpadded base64url'),
    })
    .strict(),
  output: batchSchema,
});

const cancel = method({
  kind: 'mutation',
  summary: 'End a pending batch: its held commands are cancelled and never run',
  access: APPROVE,
  tenantScoped: true,
  resource: batchResource,
  input: z.object({ tenantId, batchId: idOf('batch') }).strict(),
  output: batchSchema,
});

const members = method({
  kind: 'query',
  summary: 'A batch’s commands, in leaf order, with awaitingApproval while held',
  access: READ,
  tenantScoped: true,
  resource: batchResource,
  input: z
    .object({
      tenantId,
      batchId: idOf('batch'),
      state: commandState.optional().describe('Only members in this state'),
      ...pageInputById('command'),
    })
    .strict(),
  output: pageOf(batchMemberSchema),
});

/** The `commandBatches` group: the destructive-batch quorum (IAM actions compute:batches:*). */
export const commandBatchesGroup = defineGroup(
  'commandBatches',
  { module: 'fleet' },
  { create, list, get, scope, approve, cancel, members },
);
