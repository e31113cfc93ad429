/**
 * The `nodes` group: machines in a pool with their GPUs, labels, taints and state
 * (joining → ready ⇄ cordoned; draining → drained; offline; retired). `nodes.join` and
 * `nodes.heartbeat` are the public routes a node daemon calls with a join token or its own node
 * credential (never an IAM credential).
 */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
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

export const nodeGpuSchema = z.object({
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

export const nodesList = defineMethod({
  group: 'nodes',
  name: 'list',
  kind: 'query',
  summary: 'List the nodes of the tenant’s pools',
  module: 'fleet',
  access: { action: 'compute:nodes:read' },
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      poolId: idOf('pool').optional(),
      state: nodeState.optional(),
      ...pageInputById('node'),
    })
    .strict(),
  output: pageOf(nodeSchema),
});

export const nodesGet = defineMethod({
  group: 'nodes',
  name: 'get',
  kind: 'query',
  summary: 'Show a node with its GPUs',
  module: 'fleet',
  access: { action: 'compute:nodes:read' },
  tenantScoped: true,
  resource: nodeResource,
  input: z.object(nodeRef).strict(),
  output: nodeSchema,
});

export const nodesEvents = defineMethod({
  group: 'nodes',
  name: 'events',
  kind: 'query',
  summary: 'A node’s events, oldest first',
  module: 'fleet',
  access: { action: 'compute:nodes:read' },
  tenantScoped: true,
  resource: nodeResource,
  input: z.object({ ...nodeRef, ...pageInput }).strict(),
  output: pageOf(eventSchema),
});

function stateChange(name: 'cordon' | 'uncordon' | 'drain', summary: string) {
  return defineMethod({
    group: 'nodes',
    name,
    kind: 'mutation',
    summary,
    module: 'fleet',
    access: { action: `compute:nodes:${name}` },
    tenantScoped: true,
    resource: nodeResource,
    input: z.object({ ...nodeRef, reason: z.string().max(500).optional(), ifVersion }).strict(),
    output: nodeSchema,
  });
}

export const nodesCordon = stateChange(
  'cordon',
  'Cordon a node: it keeps its reservations and takes no new ones',
);
export const nodesUncordon = stateChange(
  'uncordon',
  'Uncordon a cordoned, draining or drained node: it takes new reservations again',
);
export const nodesDrain = stateChange(
  'drain',
  'Drain a node: no new work; it becomes drained when its last reservation ends',
);

export const nodesLabel = defineMethod({
  group: 'nodes',
  name: 'label',
  kind: 'mutation',
  summary: 'Set or remove a node’s labels',
  module: 'fleet',
  access: { action: 'compute:nodes:label' },
  tenantScoped: true,
  resource: nodeResource,
  input: z
    .object({ ...nodeRef, set: labels.default({}), remove: z.array(labelKey).max(64).default([]), ifVersion })
    .strict(),
  output: nodeSchema,
});

export const nodesTaint = defineMethod({
  group: 'nodes',
  name: 'taint',
  kind: 'mutation',
  summary: 'Add or remove a node’s taints (keys under better-compute.io/ are compute’s own)',
  module: 'fleet',
  access: { action: 'compute:nodes:taint' },
  tenantScoped: true,
  resource: nodeResource,
  input: z
    .object({
      ...nodeRef,
      add: z.array(taintSchema).max(32).default([]),
      remove: z.array(labelKey).max(32).default([]),
      ifVersion,
    })
    .strict(),
  output: nodeSchema,
});

export const nodesRetire = defineMethod({
  group: 'nodes',
  name: 'retire',
  kind: 'mutation',
  summary: 'Retire a node for good; with force, its running reservations end (reason node-retired)',
  module: 'fleet',
  access: { action: 'compute:nodes:retire' },
  tenantScoped: true,
  resource: nodeResource,
  input: z
    .object({
      ...nodeRef,
      force: z.boolean().default(false),
      reason: z.string().max(500).optional(),
      ifVersion,
    })
    .strict(),
  output: nodeSchema,
});

export const nodesDelete = defineMethod({
  group: 'nodes',
  name: 'delete',
  kind: 'mutation',
  summary:
    'Remove a retired or cordoned node that holds no reservation (retire with force ends what it holds)',
  module: 'fleet',
  access: { action: 'compute:nodes:delete' },
  tenantScoped: true,
  resource: nodeResource,
  input: z.object({ ...nodeRef, ifVersion }).strict(),
  output: z.object({ id: z.string(), deleted: z.literal(true) }),
});

export const nodesJoin = defineMethod({
  group: 'nodes',
  name: 'join',
  kind: 'mutation',
  summary: 'A node daemon asks to join with a join token and its inventory (public; the token decides)',
  module: 'fleet',
  access: { public: true },
  tenantScoped: false,
  input: z
    .object({
      joinToken: z.string().min(20).max(300),
      hostname: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/, 'must be a host name'),
      inventory: inventorySchema,
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

export const nodesClaim = defineMethod({
  group: 'nodes',
  name: 'claim',
  kind: 'mutation',
  summary: 'A node daemon collects its node credential once its join request is approved (public)',
  module: 'fleet',
  access: { public: true },
  tenantScoped: false,
  input: z.object({ joinRequestId: idOf('joinRequest'), claimSecret: z.string().min(20).max(200) }).strict(),
  output: z.object({
    state: z.enum(['pending', 'approved', 'rejected']),
    nodeId: z.string().nullable(),
    nodeCredential: z.string().nullable(),
    reason: z.string().nullable(),
    pollAfterSeconds: z.number().int(),
  }),
});

export const nodesHeartbeat = defineMethod({
  group: 'nodes',
  name: 'heartbeat',
  kind: 'mutation',
  summary:
    'A node daemon reports it is alive, with its inventory when it changed (public; the node credential decides)',
  module: 'fleet',
  access: { public: true },
  tenantScoped: false,
  input: z
    .object({ nodeCredential: z.string().min(20).max(300), inventory: inventorySchema.optional() })
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
