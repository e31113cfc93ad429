/**
 * `tunnels.open`: IAM has decided the call (the method's `actionFor`: compute:nodes:console on a
 * node, compute:instances:exec on an instance); this checks the target can serve the tunnel, writes
 * the tunnel's row and answers its ticket. Nothing opens yet: the WebSocket that presents the ticket
 * does (src/tunnels/route.ts).
 */
import { ComputeError, newId } from '@better-compute/core';
import {
  INSTANCE_EXEC_ACTION,
  NODE_CONSOLE_ACTION,
  TUNNEL_TICKET_SECONDS,
} from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { TARGET_CAPABILITY } from '../../gateway/node-streams.js';
import type { CallContext } from '../define-module.js';
import { nodeSession } from '../commands/sessions.js';
import { loadNode } from '../fleet/nodes.js';
import { fleetDb } from '../fleet/tables.js';
import type { KeyLoader } from '../ssh-certs/keys.js';
import { instanceForTunnel } from '../vps/queries.js';
import { signTicket, type TicketClaims } from './ticket.js';
import { tunnelsDb } from './tables.js';

export interface OpenInput {
  nodeId?: string | undefined;
  instanceId?: string | undefined;
  op: 'console' | 'exec' | 'tcp';
  port?: number | undefined;
  cols: number;
  rows: number;
}

/** The target kind the daemon attaches for a ticket (node-streams.ts). */
export function targetKind(claims: Pick<TicketClaims, 'instanceId' | 'op' | 'sandboxId'>) {
  if (claims.sandboxId) return 'sandbox-ssh' as const;
  if (claims.instanceId === null) return 'node-console' as const;
  return claims.op === 'console'
    ? ('instance-console' as const)
    : claims.op === 'exec'
      ? ('instance-exec' as const)
      : ('instance-port' as const);
}

/** The instance a tunnel names, and the node it runs on (the VPS module reads its row). */
async function findInstance(db: Kysely<ComputeTables>, tenantId: string, instanceId: string) {
  const row = await instanceForTunnel(db, tenantId, instanceId);
  if (!row)
    throw new ComputeError('NOT_FOUND', `instance ${instanceId} does not exist`, {
      details: { id: instanceId },
      hint: 'List your instances (better-compute instances list) and pass one of their ids.',
    });
  if (row.sandbox_id)
    throw new ComputeError('INVALID_STATE', `instance ${instanceId} belongs to sandbox ${row.sandbox_id}`, {
      details: { reason: 'sandbox-managed', sandboxId: row.sandbox_id },
      hint: `Use better-compute sandbox exec ${row.sandbox_id}.`,
    });
  if (row.state !== 'running' || !row.node_id)
    throw new ComputeError(
      'INVALID_STATE',
      `instance ${instanceId} is ${row.state}; tunnels open to running instances`,
      {
        details: { state: row.state },
        hint: 'Start it first (better-compute instances start), then open the tunnel.',
      },
    );
  return { nodeId: row.node_id };
}

/** The capabilities the node's daemon said it has in its Hello; null when it never connected. */
async function capabilitiesOf(db: Kysely<ComputeTables>, nodeId: string): Promise<string[] | null> {
  const session = await nodeSession(db, nodeId);
  if (!session) return null;
  return session.capabilities.filter((item): item is string => typeof item === 'string');
}

/** UNAVAILABLE when the node's daemon never connected, UNSUPPORTED when it does not serve `kind`. */
async function requireCapability(
  db: Kysely<ComputeTables>,
  nodeId: string,
  kind: keyof typeof TARGET_CAPABILITY,
): Promise<void> {
  const capabilities = await capabilitiesOf(db, nodeId);
  if (capabilities === null)
    throw new ComputeError('UNAVAILABLE', `node ${nodeId}'s daemon has never connected`, {
      details: { nodeId },
      hint: 'Check the node runs bcd (bcd status on the machine), then try again.',
    });
  const needed = TARGET_CAPABILITY[kind];
  if (!capabilities.includes(needed))
    throw new ComputeError('UNSUPPORTED', `node ${nodeId}'s daemon does not offer ${needed}`, {
      details: { reason: 'daemon-capability', capability: needed, nodeId },
      hint: 'Upgrade bcd on that node to a release that advertises it.',
    });
}

/**
 * A single-use ticket for a byte stream to a sandbox's SSH server (`sandboxes.exec`, which decided
 * the call and checked the sandbox runs on `nodeId`). The ticket is decided again as
 * compute:sandboxes:exec on the sandbox when it is presented.
 */
export async function openSandboxTunnel(
  keys: KeyLoader,
  ctx: Pick<CallContext, 'db' | 'emit' | 'now' | 'tenantId' | 'identity'>,
  target: { sandboxId: string; nodeId: string; action: string; simulated?: boolean },
) {
  const identity = ctx.identity!;
  // A simulated node runs no daemon: its grant is issued so `dev --sim` shows the whole flow, and
  // the stream itself finds no session when the ticket is presented.
  if (!target.simulated) await requireCapability(ctx.db, target.nodeId, 'sandbox-ssh');
  const key = await keys.get('execTicket');
  const now = ctx.now();
  const id = newId('tunnel');
  const expiresAt = new Date(now.getTime() + TUNNEL_TICKET_SECONDS * 1000);
  const claims: TicketClaims = {
    id,
    tenantId: ctx.tenantId,
    principal: identity.principalId,
    credential: identity.credentialId,
    nodeId: target.nodeId,
    instanceId: null,
    sandboxId: target.sandboxId,
    op: 'tcp',
    port: 22,
    cols: 80,
    rows: 24,
    action: target.action,
    expiresAt: expiresAt.getTime(),
    audience: key.trustDomain,
  };
  await tunnelsDb(ctx.db)
    .insertInto('compute.tunnels')
    .values({
      id,
      tenant_id: ctx.tenantId,
      principal: identity.principalId,
      credential_id: identity.credentialId,
      node_id: target.nodeId,
      instance_id: null,
      sandbox_id: target.sandboxId,
      op: 'tcp',
      port: 22,
      action: target.action,
      issued_at: now,
      expires_at: expiresAt,
    })
    .execute();
  ctx.emit({
    type: 'tunnel.opened',
    subject: { type: 'tunnel', id },
    data: {
      nodeId: target.nodeId,
      instanceId: null,
      sandboxId: target.sandboxId,
      op: 'tcp',
      port: 22,
      principal: identity.principalId,
    },
  });
  return { tunnelId: id, ticket: signTicket(claims, key.privateKey), expiresAt: expiresAt.toISOString() };
}

export async function openTunnel(keys: KeyLoader, ctx: CallContext<OpenInput>) {
  const identity = ctx.identity!;
  const { input } = ctx;
  let nodeId: string;
  if (input.nodeId !== undefined) {
    const node = await loadNode(fleetDb(ctx.db), ctx.tenantId, input.nodeId);
    if (node.state === 'retired')
      throw new ComputeError('INVALID_STATE', `node ${node.id} is retired; it has no console`, {
        details: { state: node.state },
      });
    nodeId = node.id;
  } else {
    nodeId = (await findInstance(ctx.db, ctx.tenantId, input.instanceId!)).nodeId;
  }
  const kind = targetKind({ instanceId: input.instanceId ?? null, op: input.op });
  await requireCapability(ctx.db, nodeId, kind);
  const key = await keys.get('execTicket');
  const now = ctx.now();
  const id = newId('tunnel');
  const expiresAt = new Date(now.getTime() + TUNNEL_TICKET_SECONDS * 1000);
  const action = input.nodeId !== undefined ? NODE_CONSOLE_ACTION : INSTANCE_EXEC_ACTION;
  const claims: TicketClaims = {
    id,
    tenantId: ctx.tenantId,
    principal: identity.principalId,
    credential: identity.credentialId,
    nodeId,
    instanceId: input.instanceId ?? null,
    op: input.op,
    port: input.port ?? null,
    cols: input.cols,
    rows: input.rows,
    action,
    expiresAt: expiresAt.getTime(),
    audience: key.trustDomain,
  };
  await tunnelsDb(ctx.db)
    .insertInto('compute.tunnels')
    .values({
      id,
      tenant_id: ctx.tenantId,
      principal: identity.principalId,
      credential_id: identity.credentialId,
      node_id: nodeId,
      instance_id: claims.instanceId,
      op: input.op,
      port: claims.port,
      action,
      issued_at: now,
      expires_at: expiresAt,
    })
    .execute();
  ctx.emit({
    type: 'tunnel.opened',
    subject: { type: 'tunnel', id },
    data: {
      nodeId,
      instanceId: claims.instanceId,
      op: input.op,
      port: claims.port,
      principal: identity.principalId,
    },
  });
  return {
    tunnelId: id,
    ticket: signTicket(claims, key.privateKey),
    expiresAt: expiresAt.toISOString(),
    op: input.op,
    nodeId,
    instanceId: claims.instanceId,
    port: claims.port,
  };
}

/**
 * Spends a ticket's row: the first caller gets it, every later one (on any replica) null. An
 * expired row is never spent, whatever the clock of the replica that checked the signature said.
 */
export async function spendTicket(db: Kysely<ComputeTables>, claims: TicketClaims, now: Date) {
  return tunnelsDb(db)
    .updateTable('compute.tunnels')
    .set({ spent_at: now })
    .where('id', '=', claims.id)
    .where('tenant_id', '=', claims.tenantId)
    .where('principal', '=', claims.principal)
    .where('spent_at', 'is', null)
    .where('expires_at', '>', now)
    .returning(['id'])
    .executeTakeFirst();
}

/** Records how a tunnel ended. */
export async function endTunnel(
  db: Kysely<ComputeTables>,
  id: string,
  end: { at: Date; exitStatus: number | null; reason: string | null },
) {
  await tunnelsDb(db)
    .updateTable('compute.tunnels')
    .set({ ended_at: end.at, exit_status: end.exitStatus, end_reason: end.reason?.slice(0, 500) ?? null })
    .where('id', '=', id)
    .where('ended_at', 'is', null)
    .execute();
}
