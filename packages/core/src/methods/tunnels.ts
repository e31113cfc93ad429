/**
 * The `tunnels` group: `tunnels.open` decides a console, exec or port tunnel and answers a
 * single-use ticket, short-lived and signed with the PKI bundle's exec ticket key, bound to the
 * caller, the target and the operation. The client then opens `{base}/tunnels/{ticket}` as a
 * WebSocket on the same server.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, tenantId } from './common.js';

const tunnelOp = z.enum(['console', 'exec', 'tcp']);
/** How long a ticket may wait before its WebSocket opens. */
export const TUNNEL_TICKET_SECONDS = 60;
export const NODE_CONSOLE_ACTION = 'compute:nodes:console';
export const INSTANCE_EXEC_ACTION = 'compute:instances:exec';

const open = method({
  kind: 'mutation',
  summary: 'Open a console, exec or port tunnel to a node or instance: a single-use ticket',
  access: { action: NODE_CONSOLE_ACTION },
  alsoActions: [INSTANCE_EXEC_ACTION],
  actionFor: (input) => (input.nodeId !== undefined ? NODE_CONSOLE_ACTION : INSTANCE_EXEC_ACTION),
  tenantScoped: true,
  resource: (input) =>
    input.nodeId !== undefined
      ? { type: 'compute-node', id: input.nodeId }
      : { type: 'compute-instance', id: input.instanceId ?? '' },
  input: z
    .object({
      tenantId,
      nodeId: idOf('node').optional(),
      instanceId: idOf('instance').optional(),
      op: tunnelOp.describe(
        'The tunnel: console (a node’s or instance’s console), exec (a command or shell in an instance) or tcp (a port)',
      ),
      /** The instance's port, for op tcp. */
      port: z
        .number()
        .int()
        .min(1)
        .max(65_535)
        .optional()
        .describe('The instance’s port to reach (1 to 65,535), for op tcp only'),
      /** The terminal's size when it opens, for console and exec. */
      cols: z
        .number()
        .int()
        .min(1)
        .max(1000)
        .default(80)
        .describe('The terminal’s width in columns when it opens (1 to 1,000), for console and exec'),
      rows: z
        .number()
        .int()
        .min(1)
        .max(1000)
        .default(24)
        .describe('The terminal’s height in rows when it opens (1 to 1,000), for console and exec'),
    })
    .strict()
    .superRefine((input, issues) => {
      if ((input.nodeId === undefined) === (input.instanceId === undefined))
        issues.addIssue({
          code: 'custom',
          path: ['nodeId'],
          message: 'name exactly one of nodeId and instanceId',
        });
      if (input.nodeId !== undefined && input.op !== 'console')
        issues.addIssue({ code: 'custom', path: ['op'], message: 'a node offers only op console' });
      if ((input.op === 'tcp') !== (input.port !== undefined))
        issues.addIssue({
          code: 'custom',
          path: ['port'],
          message: 'op tcp needs a port, and only op tcp takes one',
        });
    }),
  output: z.object({
    tunnelId: z.string(),
    /** Single use: the path segment of `{base}/tunnels/{ticket}`. */
    ticket: z.string(),
    expiresAt: isoTime,
    op: tunnelOp,
    nodeId: z.string(),
    instanceId: z.string().nullable(),
    port: z.number().int().nullable(),
  }),
});

export const tunnelsGroup = defineGroup('tunnels', { module: 'fleet' }, { open });
