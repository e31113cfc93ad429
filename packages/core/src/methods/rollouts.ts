/**
 * The `rollouts` group: wave rollouts of a registered bcd release (docs/rollouts.md). A rollout
 * names its nodes (a pool, a list or a selector), splits them into waves (`1`, `10%`, `50%`,
 * `100%`: how many nodes have had it once each wave is done), and updates each node through a
 * workflow on that node; a wave whose failures pass the failure budget pauses the rollout, and the
 * nodes of later waves never receive the update. Rollouts are the platform's: only the root tenant
 * calls these methods (`platformOnly`), with `compute:rollouts:*`.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { releaseVersion } from '../release/manifest.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';

/** The most nodes one rollout updates, and the most waves it has. */
export const MAX_ROLLOUT_NODES = 5_000;
export const MAX_ROLLOUT_WAVES = 20;
/** How long a node has to come back with the new version and pass its health check, by default. */
export const DEFAULT_HEALTH_TIMEOUT_SECONDS = 300;

export const rolloutState = z.enum(['running', 'paused', 'aborted', 'completed']);
const rolloutWaveState = z.enum(['pending', 'running', 'passed', 'failed']);
const rolloutNodeState = z.enum(['pending', 'updating', 'succeeded', 'failed', 'skipped', 'cancelled']);

/** A wave's size: a count of nodes (`1`, `25`) or a share of the rollout's nodes (`10%`), cumulative. */
const waveSpec = z
  .string()
  .regex(
    /^(?:[1-9][0-9]{0,5}|[1-9][0-9]?%|100%)$/,
    'must be a count of nodes such as 5, or a share such as 10% (1% to 100%)',
  );

const rolloutNodeSchema = z.object({
  nodeId: z.string(),
  state: rolloutNodeState,
  /** The node's update workflow (`workflows get`), once its wave started. */
  workflowId: z.string().nullable(),
  error: z.string().nullable(),
  startedAt: isoTime.nullable(),
  finishedAt: isoTime.nullable(),
});

const rolloutWaveSchema = z.object({
  index: z.number().int(),
  /** What the wave was asked as (`10%`). */
  size: z.string(),
  state: rolloutWaveState,
  nodes: z.array(rolloutNodeSchema),
  startedAt: isoTime.nullable(),
  finishedAt: isoTime.nullable(),
});

export const rolloutSchema = z.object({
  id: z.string(),
  releaseId: z.string(),
  version: z.string(),
  state: rolloutState,
  /** How the nodes were chosen: `{ pool }`, `{ nodes }` or `{ selector }`. */
  target: z.object({
    poolId: z.string().nullable(),
    nodeIds: z.array(z.string()).nullable(),
    selector: z.string().nullable(),
  }),
  waves: z.array(rolloutWaveSchema),
  /** The wave running, or the one that paused it; the number of waves once completed. */
  currentWave: z.number().int(),
  failureBudget: z.number().int(),
  healthTimeoutSeconds: z.number().int(),
  /** Why it paused or was aborted; null while it runs. */
  reason: z.string().nullable(),
  createdBy: z.string(),
  createdAt: isoTime,
  updatedAt: isoTime,
  finishedAt: isoTime.nullable(),
});

const rolloutResource = (input: { rolloutId: string }) => ({ type: 'compute-rollout', id: input.rolloutId });
const ref = z.object({ tenantId, rolloutId: idOf('rollout') }).strict();

const create = method({
  kind: 'mutation',
  summary:
    'Roll a registered bcd release out to nodes in waves, each node by a workflow, gated on health and a failure budget',
  tenantScoped: true,
  platformOnly: true,
  input: z
    .object({
      tenantId,
      version: releaseVersion.describe('The registered release to install, such as 1.4.0'),
      poolId: idOf('pool').optional().describe('Every node of this pool; or give nodeIds or selector'),
      nodeIds: z
        .array(idOf('node'))
        .min(1)
        .max(MAX_ROLLOUT_NODES)
        .optional()
        .describe('These nodes, in this order; or give poolId or selector'),
      selector: z
        .string()
        .min(1)
        .max(1000)
        .optional()
        .describe(
          'Nodes whose labels match this selector (as reserve --selector); or give poolId or nodeIds',
        ),
      waves: z
        .array(waveSpec)
        .min(1)
        .max(MAX_ROLLOUT_WAVES)
        .default(['100%'])
        .describe(
          'How many nodes have the release once each wave is done: counts or shares, rising, the last 100% (default one wave of all)',
        ),
      failureBudget: z
        .number()
        .int()
        .min(0)
        .max(MAX_ROLLOUT_NODES)
        .default(0)
        .describe('How many nodes of one wave may fail before the rollout pauses (default 0)'),
      healthTimeoutSeconds: z
        .number()
        .int()
        .min(10)
        .max(86_400)
        .default(DEFAULT_HEALTH_TIMEOUT_SECONDS)
        .describe('How long a node has to come back with the new version and pass its health check'),
      reason: z.string().min(1).max(500).optional().describe('Why, kept with the rollout'),
    })
    .strict()
    .refine(
      (input) => [input.poolId, input.nodeIds, input.selector].filter((v) => v !== undefined).length === 1,
      {
        message: 'give exactly one of poolId, nodeIds or selector',
      },
    ),
  output: rolloutSchema,
});

const list = method({
  kind: 'query',
  summary: 'The rollouts, newest first',
  tenantScoped: true,
  platformOnly: true,
  input: z
    .object({
      tenantId,
      state: rolloutState.optional().describe('Only rollouts in this state; all when omitted'),
      ...pageInputById('rollout'),
    })
    .strict(),
  output: pageOf(rolloutSchema),
});

const get = method({
  kind: 'query',
  summary: 'One rollout: its waves, nodes, states and timings',
  tenantScoped: true,
  platformOnly: true,
  resource: rolloutResource,
  input: ref,
  output: rolloutSchema,
});

const pause = method({
  kind: 'mutation',
  summary: 'Pause a running rollout: nodes updating finish, no further wave starts',
  tenantScoped: true,
  platformOnly: true,
  resource: rolloutResource,
  input: ref,
  output: rolloutSchema,
});

const resume = method({
  kind: 'mutation',
  summary: 'Resume a paused rollout: a wave that failed its gate is accepted, and the next one starts',
  tenantScoped: true,
  platformOnly: true,
  resource: rolloutResource,
  input: ref,
  output: rolloutSchema,
});

const abort = method({
  kind: 'mutation',
  summary: 'Abort a rollout: nodes not yet started never receive the release',
  tenantScoped: true,
  platformOnly: true,
  resource: rolloutResource,
  input: ref,
  output: rolloutSchema,
});

/** The `rollouts` group (IAM actions compute:rollouts:*). */
export const rolloutsGroup = defineGroup(
  'rollouts',
  { module: 'rollout' },
  { create, list, get, pause, resume, abort },
);
