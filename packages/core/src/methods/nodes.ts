/**
 * The `nodes` group: machines in a pool with their GPUs, labels, taints and state
 * (joining → ready ⇄ cordoned; draining → drained; offline; retired). `nodes.join` and
 * `nodes.heartbeat` are the public routes a node daemon calls with a join token or its own node
 * credential (never an IAM credential).
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageInput, pageInputById, pageOf, tenantId } from './common.js';
import { eventSchema } from './events.js';
import { inventorySchema } from './inventory.js';
import { ifVersion, labelKey, labels, labelValue } from './sites.js';

export const nodeState = z.enum([
  'joining',
  'ready',
  'cordoned',
  'draining',
  'drained',
  'offline',
  'retired',
]);

export const taintSchema = z
  .object({
    key: labelKey,
    /** As a label value is: a value with spaces, `=`, `:` or controls would not read back as it was written. */
    value: labelValue.default(''),
    /** NoSchedule: no new reservation unless it tolerates the key. */
    effect: z.enum(['NoSchedule']).default('NoSchedule'),
  })
  .strict();

const nodeGpuSchema = z.object({
  index: z.number().int(),
  model: z.string(),
  product: z.string(),
  vramGiB: z.number().int(),
  nvlinkDomain: z.string().nullable(),
  reservationId: z.string().nullable(),
});

export const nodeSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  name: z.string(),
  state: nodeState,
  /** `site-agent`: joined with a site token, its site's agent (BMCs, PXE); it never takes work. */
  role: z.enum(['worker', 'site-agent']),
  /** While offline: the state its next heartbeat returns it to (cordon, drain and uncordon change it). */
  stateWhenBack: nodeState.nullable(),
  labels: z.record(z.string(), z.string()),
  taints: z.array(z.object({ key: z.string(), value: z.string(), effect: z.enum(['NoSchedule']) })),
  cpuCores: z.number().int(),
  memoryGiB: z.number().int(),
  gpus: z.array(nodeGpuSchema),
  gpuCount: z.number().int(),
  freeGpus: z.number().int(),
  lastHeartbeatAt: isoTime.nullable(),
  stateChangedAt: isoTime,
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

const nodeRef = { tenantId, nodeId: idOf('node') };
const nodeResource = (input: { nodeId: string }) => ({ type: 'compute-node', id: input.nodeId });

const nodesList = method({
  kind: 'query',
  summary: 'List the nodes of the tenant’s pools',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      poolId: idOf('pool').optional(),
      state: nodeState.optional().describe('Only nodes in this state'),
      ...pageInputById('node'),
    })
    .strict(),
  output: pageOf(nodeSchema),
});

const nodesGet = method({
  kind: 'query',
  summary: 'Show a node with its GPUs',
  tenantScoped: true,
  resource: nodeResource,
  input: z.object(nodeRef).strict(),
  output: nodeSchema,
});

const nodesEvents = method({
  kind: 'query',
  summary: 'A node’s events, oldest first',
  tenantScoped: true,
  resource: nodeResource,
  input: z.object({ ...nodeRef, ...pageInput }).strict(),
  output: pageOf(eventSchema),
});

/** Cordon, uncordon and drain: the same input and answer; each one's action is its name (`compute:nodes:cordon`). */
function stateChange(summary: string) {
  return method({
    kind: 'mutation',
    summary,
    tenantScoped: true,
    resource: nodeResource,
    input: z
      .object({
        ...nodeRef,
        reason: z.string().max(500).optional().describe('Why, for the node’s events and the audit log'),
        ifVersion,
      })
      .strict(),
    output: nodeSchema,
  });
}

const nodesCordon = stateChange('Cordon a node: it keeps its reservations and takes no new ones');
const nodesUncordon = stateChange(
  'Uncordon a cordoned, draining or drained node: it takes new reservations again',
);
const nodesDrain = stateChange(
  'Drain a node: no new work; it becomes drained when its last reservation ends',
);

const nodesLabel = method({
  kind: 'mutation',
  summary: 'Set or remove a node’s labels',
  tenantScoped: true,
  resource: nodeResource,
  input: z
    .object({
      ...nodeRef,
      set: labels.default({}).describe('Labels to set, key to value'),
      remove: z.array(labelKey).max(64).default([]).describe('Label keys to remove'),
      ifVersion,
    })
    .strict(),
  output: nodeSchema,
});

const nodesTaint = method({
  kind: 'mutation',
  summary: 'Add or remove a node’s taints (keys under better-compute.io/ are compute’s own)',
  tenantScoped: true,
  resource: nodeResource,
  input: z
    .object({
      ...nodeRef,
      add: z.array(taintSchema).max(32).default([]).describe('Taints to add (or replace, by key)'),
      remove: z.array(labelKey).max(32).default([]).describe('Taint keys to remove'),
      ifVersion,
    })
    .strict(),
  output: nodeSchema,
});

const nodesRetire = method({
  kind: 'mutation',
  summary: 'Retire a node for good; with force, its running reservations end (reason node-retired)',
  tenantScoped: true,
  resource: nodeResource,
  input: z
    .object({
      ...nodeRef,
      force: z.boolean().default(false).describe('End the node’s running reservations (reason node-retired)'),
      reason: z.string().max(500).optional().describe('Why, for the node’s events and the audit log'),
      ifVersion,
    })
    .strict(),
  output: nodeSchema,
});

const nodesDelete = method({
  kind: 'mutation',
  summary:
    'Remove a retired or cordoned node that holds no reservation (retire with force ends what it holds)',
  tenantScoped: true,
  resource: nodeResource,
  input: z.object({ ...nodeRef, ifVersion }).strict(),
  output: z.object({ id: z.string(), deleted: z.literal(true) }),
});

const nodesJoin = method({
  kind: 'mutation',
  summary: 'A node daemon asks to join with a join token and its inventory (public; the token decides)',
  access: { public: true },
  tenantScoped: false,
  input: z
    .object({
      joinToken: z
        .string()
        .min(20)
        .max(300)
        .describe('The join token the operator minted (joinTokens.create)'),
      hostname: z
        .string()
        .regex(/^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/, 'must be a host name')
        .describe('The machine’s host name'),
      inventory: inventorySchema.describe('The machine’s hardware, as bcd reads it'),
      labels: labels.optional(),
    })
    .strict(),
  output: z.object({
    joinRequestId: z.string(),
    state: z.enum(['pending', 'approved']),
    nodeId: z.string().nullable(),
    /** The node's own credential, once: with a pre-approved token at once, else from `nodes.claim` after approval. */
    nodeCredential: z.string().nullable(),
    /** The secret `nodes.claim` takes while the request waits for approval. */
    claimSecret: z.string().nullable(),
    pollAfterSeconds: z.number().int(),
  }),
});

const nodesClaim = method({
  kind: 'mutation',
  summary: 'A node daemon collects its node credential once its join request is approved (public)',
  access: { public: true },
  tenantScoped: false,
  input: z
    .object({
      joinRequestId: idOf('joinRequest'),
      claimSecret: z.string().min(20).max(200).describe('The claim secret nodes.join answered'),
    })
    .strict(),
  output: z.object({
    state: z.enum(['pending', 'approved', 'rejected']),
    nodeId: z.string().nullable(),
    nodeCredential: z.string().nullable(),
    reason: z.string().nullable(),
    pollAfterSeconds: z.number().int(),
  }),
});

const nodesHeartbeat = method({
  kind: 'mutation',
  summary:
    'A node daemon reports it is alive, with its inventory when it changed (public; the node credential decides)',
  access: { public: true },
  tenantScoped: false,
  input: z
    .object({
      nodeCredential: z.string().min(20).max(300).describe('The node credential nodes.claim answered'),
      inventory: inventorySchema.optional().describe('The machine’s hardware, when it changed'),
    })
    .strict(),
  output: z.object({
    nodeId: z.string(),
    state: nodeState,
    heartbeatIntervalSeconds: z.number().int(),
    offlineAfterSeconds: z.number().int(),
    /** The reservations bound to this node's GPUs now, for the daemon to reconcile. */
    bindings: z.array(
      z.object({ reservationId: z.string(), gpuIndices: z.array(z.number().int()), endsAt: isoTime }),
    ),
  }),
});

/** The `nodes` group: each method's name, route (`/nodes/…`) and default IAM action come from here. */
export const nodesGroup = defineGroup(
  'nodes',
  { module: 'fleet' },
  {
    list: nodesList,
    get: nodesGet,
    events: nodesEvents,
    cordon: nodesCordon,
    uncordon: nodesUncordon,
    drain: nodesDrain,
    label: nodesLabel,
    taint: nodesTaint,
    retire: nodesRetire,
    delete: nodesDelete,
    join: nodesJoin,
    claim: nodesClaim,
    heartbeat: nodesHeartbeat,
  },
);
