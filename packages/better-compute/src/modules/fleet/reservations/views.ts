/** What a reservation looks like to its caller: `reservations.get` and `reservations.list`. */
import { ownerOf } from '@better-compute/core';
import { type Kysely, type Selectable, sql } from 'kysely';
import type { ComputeTables } from '../../../db/tables.js';
import type { CallContext } from '../../define-module.js';
import { iso, isoOrNull, notFound } from '../common.js';
import { type FleetDb, fleetDb, type ReservationsTable } from '../tables.js';

export type ReservationRow = Selectable<ReservationsTable>;

/** GPUs of one group bound to a reservation (a binding row), and what a reservation's view is built from. */
export interface BoundGroup {
  node_id: string;
  group_no: number;
  gpu_indices: number[];
  model: string;
  product: string;
  nvlink_domain: string | null;
}

export type BindingView = {
  nodeId: string;
  gpuIndices: number[];
  nvlinkDomain: string | null;
  gpuModel: string;
  gpuProduct: string;
  nodeState: string;
};

async function bindingOf(db: FleetDb, ids: string[]): Promise<Map<string, BindingView[]>> {
  const map = new Map<string, BindingView[]>();
  if (ids.length === 0) return map;
  const rows = await db
    .selectFrom('compute.gpu_bindings as b')
    .leftJoin('compute.nodes as n', 'n.id', 'b.node_id')
    .select([
      'b.reservation_id',
      'b.node_id',
      'b.group_no',
      'b.gpu_indices',
      'b.nvlink_domain',
      'b.model',
      'b.product',
      'n.state',
    ])
    .where('b.reservation_id', 'in', ids)
    .orderBy('b.reservation_id')
    .orderBy('b.node_id')
    .orderBy('b.group_no')
    .execute();
  for (const r of rows) {
    const list = map.get(r.reservation_id) ?? [];
    addBinding(list, r);
    map.set(r.reservation_id, list);
  }
  return map;
}

/** Adds one group's bound GPUs to a reservation's binding view (one entry per node, its indices ascending). */
function addBinding(
  list: BindingView[],
  r: {
    node_id: string;
    gpu_indices: number[];
    nvlink_domain: string | null;
    model: string;
    product: string;
    state: string | null;
  },
): void {
  let entry = list.find((b) => b.nodeId === r.node_id);
  if (!entry) {
    entry = {
      nodeId: r.node_id,
      gpuIndices: [],
      nvlinkDomain: r.nvlink_domain,
      gpuModel: r.model,
      gpuProduct: r.product,
      nodeState: r.state ?? 'deleted',
    };
    list.push(entry);
  } else if (entry.nvlinkDomain !== r.nvlink_domain) entry.nvlinkDomain = null;
  entry.gpuIndices.push(...r.gpu_indices);
  entry.gpuIndices.sort((a, b) => a - b);
}

/** The binding view of groups a statement just bound or released, ordered as bindingOf orders them. */
export function boundViews(
  bound: readonly (BoundGroup & { state?: string | null })[],
  state: string | null,
): BindingView[] {
  const list: BindingView[] = [];
  const sorted = [...bound].sort((x, y) =>
    x.node_id < y.node_id ? -1 : x.node_id > y.node_id ? 1 : x.group_no - y.group_no,
  );
  for (const b of sorted) addBinding(list, { ...b, state: b.state === undefined ? state : b.state });
  return list;
}

async function queuePosition(db: FleetDb, row: ReservationRow): Promise<number | null> {
  if (row.state !== 'queued') return null;
  const ahead = await db
    .selectFrom('compute.reservations')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('pool_id', '=', row.pool_id)
    .where('state', '=', 'queued')
    .where('seq', '<=', row.seq)
    .executeTakeFirstOrThrow();
  return ahead.n;
}

export function reservationView(row: ReservationRow, binding: BindingView[], position: number | null) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    projectId: row.project_id,
    state: row.state,
    gpus: row.gpus,
    durationSeconds: row.duration_seconds,
    nvlink: row.nvlink,
    selector: row.selector,
    gpuModel: row.gpu_model,
    gpuProduct: row.gpu_product,
    tolerations: row.tolerations,
    health:
      row.state === 'active' && binding.some((b) => b.nodeState === 'offline')
        ? ('degraded' as const)
        : ('ok' as const),
    queuePosition: position,
    createdAt: iso(row.created_at),
    activatedAt: isoOrNull(row.activated_at),
    endsAt: isoOrNull(row.ends_at),
    endedAt: isoOrNull(row.ended_at),
    endReason: row.end_reason,
    binding,
    version: row.version,
    ownerId: row.owner_id,
    agentId: row.agent_id,
  };
}

export type ReservationView = ReturnType<typeof reservationView>;

export async function viewOf(db: FleetDb, row: ReservationRow): Promise<ReservationView> {
  return reservationView(
    row,
    (await bindingOf(db, [row.id])).get(row.id) ?? [],
    await queuePosition(db, row),
  );
}

export async function loadReservation(
  db: FleetDb,
  tenantId: string,
  id: string,
  forUpdate = false,
): Promise<ReservationRow> {
  let query = db
    .selectFrom('compute.reservations')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('reservation', id);
  return row;
}

export async function getReservation(ctx: CallContext<{ reservationId: string }>) {
  const db = fleetDb(ctx.db);
  return viewOf(db, await loadReservation(db, ctx.tenantId, ctx.input.reservationId));
}

export async function listReservations(
  ctx: CallContext<{
    state?: 'queued' | 'active' | 'ended' | undefined;
    poolId?: string | undefined;
    mine?: boolean | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  let query = db.selectFrom('compute.reservations').selectAll().where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.mine) query = query.where('owner_id', '=', ctx.identity ? ownerOf(ctx.identity) : '');
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  if (ctx.input.poolId) query = query.where('pool_id', '=', ctx.input.poolId);
  if (ctx.input.cursor) query = query.where('id', '<', ctx.input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  const bindings = await bindingOf(
    db,
    page.map((r) => r.id),
  );
  const items: ReservationView[] = [];
  for (const row of page)
    items.push(reservationView(row, bindings.get(row.id) ?? [], await queuePosition(db, row)));
  return { items, nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null };
}

/**
 * The owner of a reservation, for IAM's `@own` patterns on extend and release: read before the
 * call is decided; null for one that does not exist (the method then answers NOT_FOUND) or has none.
 */
export async function reservationOwner(
  db: Kysely<ComputeTables>,
  tenantId: string,
  input: { reservationId: string },
): Promise<string | null> {
  const row = await fleetDb(db)
    .selectFrom('compute.reservations')
    .select('owner_id')
    .where('id', '=', input.reservationId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row?.owner_id ?? null;
}
