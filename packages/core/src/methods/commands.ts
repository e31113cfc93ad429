/**
 * The `commands` group: what the control plane asks one node's daemon to do. Commands are created
 * by the control plane (`commands.run` is an operator's method with no CLI command of its own),
 * delivered in order over the node's session, signed by the command root and run at most once.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { BMC_POWER_KIND, DESTRUCTIVE_KINDS } from '../quorum/kinds.js';
import { RUNTIME_COMMAND_KINDS, SANDBOX_COMMAND_KINDS } from '../runtime-commands.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';

/** `ssh.trust` is queued by the control plane alone (break-glass SSH), never through commands.run. */
export const COMMAND_KINDS = ['inventory.refresh', 'exec.script', 'ssh.trust'] as const;
/**
 * What a rollout's node workflow queues, never through commands.run: `bcd.update` (the daemon
 * installs a signed release, restarts and reports once the new version is healthy) and
 * `health.check` (the daemon's own check of itself, docs/rollouts.md).
 */
export const ROLLOUT_COMMAND_KINDS = ['bcd.update', 'health.check'] as const;
/**
 * What the metal module's workflows queue on a site's agent, never through commands.run:
 * `metal.bmc` asks a machine's BMC for a power change or its power state. The stored payload names
 * the BMC without its password; the gateway adds it to the signed message only.
 * `metal.boot-entries` gives a site agent's provisioning network the site's bound MACs (boot-entries.ts).
 */
export const METAL_COMMAND_KINDS = ['metal.bmc', 'metal.boot-entries'] as const;
/**
 * Every kind a command row may have: an operator's, the runtime commands workflows queue, and the
 * destructive kinds a batch's members have (a metal.bmc-power leaf's member is a metal.bmc, so that
 * kind is never a row's).
 */
const anyCommandKind = z.enum([
  ...COMMAND_KINDS,
  ...ROLLOUT_COMMAND_KINDS,
  ...METAL_COMMAND_KINDS,
  ...DESTRUCTIVE_KINDS.flatMap((entry) => (entry.kind === BMC_POWER_KIND ? [] : [entry.kind])),
  ...RUNTIME_COMMAND_KINDS,
  ...SANDBOX_COMMAND_KINDS,
] as [string, ...string[]]);
export const commandState = z.enum(['queued', 'sent', 'running', 'succeeded', 'failed', 'cancelled']);
/** The most output a command keeps, per stream. */
export const COMMAND_OUTPUT_LIMIT = 65_536;

/** A maintenance script shipped with the daemon, by name (no path, no arguments). */
export const scriptName = z
  .string()
  .regex(/^[a-z][a-z0-9-]{0,62}$/, 'must be the name of a maintenance script shipped with the daemon')
  .refine(
    (name) => !name.startsWith('power-'),
    'power scripts run only as metal.power, through an approved batch (better-compute batch create)',
  );

const commandPayload = z.union([z.object({}).strict(), z.object({ script: scriptName }).strict()]);

export const commandSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  nodeId: z.string(),
  workflowId: z.string().nullable(),
  kind: anyCommandKind,
  payload: z.record(z.string(), z.unknown()),
  state: commandState,
  attempt: z.number().int(),
  cancelRequested: z.boolean(),
  exitCode: z.number().int().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  result: z.record(z.string(), z.unknown()).nullable(),
  error: z.string().nullable(),
  createdAt: isoTime,
  expiresAt: isoTime,
  sentAt: isoTime.nullable(),
  startedAt: isoTime.nullable(),
  finishedAt: isoTime.nullable(),
});

const commandResource = (input: { commandId: string }) => ({ type: 'compute-command', id: input.commandId });

const commandsList = method({
  kind: 'query',
  summary: 'A node’s commands, oldest first',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z
    .object({
      tenantId,
      nodeId: idOf('node'),
      state: commandState.optional().describe('Only commands in this state; all when omitted'),
      ...pageInputById('command'),
    })
    .strict(),
  output: pageOf(commandSchema),
});

const commandsGet = method({
  kind: 'query',
  summary: 'One command with its state, exit code and output',
  tenantScoped: true,
  resource: commandResource,
  input: z.object({ tenantId, commandId: idOf('command') }).strict(),
  output: commandSchema,
});

const commandsCancel = method({
  kind: 'mutation',
  summary: 'Cancel a command: a queued one never runs, a running one is told to stop',
  tenantScoped: true,
  resource: commandResource,
  input: z.object({ tenantId, commandId: idOf('command') }).strict(),
  output: commandSchema,
});

const commandsRun = method({
  kind: 'mutation',
  summary: 'Queue a command for a node’s daemon (operators; a maintenance script or an inventory refresh)',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z
    .object({
      tenantId,
      nodeId: idOf('node'),
      kind: z
        .enum(['inventory.refresh', 'exec.script'])
        .describe('What the node daemon does: inventory.refresh, or exec.script to run a maintenance script'),
      payload: commandPayload
        .optional()
        .describe(
          'For exec.script, { script }: a maintenance script shipped with the daemon, by name; else {}',
        ),
      /** How long the command may wait for delivery before the daemon refuses it. */
      ttlSeconds: z
        .number()
        .int()
        .min(10)
        .max(86_400)
        .optional()
        .describe(
          'How long it may wait for delivery before the daemon refuses it, in seconds (10 to 86,400; 900 when omitted)',
        ),
    })
    .strict(),
  output: commandSchema,
});

/** The `commands` group: each method's name, route (`/commands/…`) and IAM action come from here. */
export const commandsGroup = defineGroup(
  'commands',
  { module: 'fleet' },
  {
    list: commandsList,
    get: commandsGet,
    cancel: commandsCancel,
    run: commandsRun,
  },
);
