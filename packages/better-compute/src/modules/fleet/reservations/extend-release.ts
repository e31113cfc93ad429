/** `reservations.extend`, `reservations.release`, and the expiry of reservations past their end. */
import { ComputeError } from '@better-compute/core';
import { sql } from 'kysely';
import type { CallContext } from '../../define-module.js';
import { checkVersion, iso, isoOrNull } from '../common.js';
import { lockNodesOf, lockPool } from '../locks.js';
import type { Emit } from '../node-states.js';
import { visiblePool } from '../pools.js';
import { type FleetDb, fleetDb } from '../tables.js';
import { endReservation, endWhere } from './ending.js';
import { activateQueue } from './queue.js';
import { loadReservation, reservationView, viewOf } from './views.js';

export async function extendReservation(
  ctx: CallContext<{ reservationId: string; bySeconds: number; ifVersion?: number | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const row = await loadReservation(db, ctx.tenantId, ctx.input.reservationId, true);
  checkVersion('reservation', row.id, row.version, ctx.input.ifVersion);
  refuseInstanceHold(row);
  if (row.state === 'ended') {
    throw new ComputeError('INVALID_STATE', `reservation ${row.id} has ended (${row.end_reason})`, {
      details: { state: row.state, endReason: row.end_reason },
    });
  }
  // A pool no longer offered to the tenant lets its running reservations run to their end, and
  // no further; an owner always sees its pool.
  await visiblePool(db, ctx.tenantId, row.pool_id).catch((error: unknown) => {
    if (!(error instanceof ComputeError) || error.code !== 'NOT_FOUND') throw error;
    throw new ComputeError('INVALID_STATE', `pool ${row.pool_id} is no longer offered to ${ctx.tenantId}`, {
      details: { poolId: row.pool_id },
      hint: 'Its running reservations run to their end; ask the pool’s owner to offer it again for more time.',
    });
  });
  // Expiry is at the end time, whenever the controller gets to it: past it, nothing extends.
  if (row.state === 'active' && row.ends_at && new Date(row.ends_at) <= ctx.now()) {
    throw new ComputeError('INVALID_STATE', `reservation ${row.id} reached its end at ${iso(row.ends_at)}`, {
      details: { state: row.state, endsAt: iso(row.ends_at) },
      hint: 'A reservation is extended before its end time; reserve again for more time.',
    });
  }
  const duration = row.duration_seconds + ctx.input.bySeconds;
  if (duration > 30 * 86_400) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `a reservation lasts at most 30 days; this one would last ${duration} s`,
      { details: { field: 'bySeconds' } },
    );
  }
  const endsAt = row.ends_at ? new Date(new Date(row.ends_at).getTime() + ctx.input.bySeconds * 1000) : null;
  const updated = await db
    .updateTable('compute.reservations')
    .set({ duration_seconds: duration, ends_at: endsAt, version: row.version + 1 })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'reservation.extended',
    subject: { type: 'reservation', id: row.id },
    data: {
      state: row.state,
      bySeconds: ctx.input.bySeconds,
      durationSeconds: duration,
      endsAt: isoOrNull(endsAt),
      version: updated.version,
    },
  });
  return viewOf(db, updated);
}

/**
 * Releases a reservation. With nothing queued in the pool, an active reservation is released
 * without the pool's lock (its row, then its nodes in id order), since no queued work needs the
 * GPUs; otherwise under the lock, and the queue is tried at once. A reserve that queued in the
 * meantime is started by the next controller pass.
 */
export async function releaseReservation(
  ctx: CallContext<{ reservationId: string; ifVersion?: number | undefined }>,
  /** The instance whose GPUs it holds, when its deletion ends it; every other caller is refused. */
  forInstance: string | null = null,
) {
  const db = fleetDb(ctx.db);
  const { reservationId, ifVersion } = ctx.input;
  const now = ctx.now();
  // The common case in one statement: an active reservation of the caller's tenant at the version
  // asked for, on one node, in a pool where nothing is queued (so neither the pool's lock nor the
  // queue is needed); the statement locks its row and ends it. Anything else takes the path below,
  // which says why or does the rest.
  const released = await endWhere(
    db,
    reservationId,
    sql<boolean>`r.tenant_id = ${ctx.tenantId} and r.state = 'active' and r.ends_at > ${now}::timestamptz
      and r.instance_id is null
      and ${ifVersion === undefined ? sql`true` : sql`r.version = ${ifVersion}`}
      and not exists (select 1 from compute.reservations q where q.pool_id = r.pool_id and q.state = 'queued')
      and (select count(distinct b.node_id) from compute.gpu_bindings b
           where b.reservation_id = r.id and b.released_at is null) <= 1`,
    'released',
    now,
    ctx.emit,
    'active',
  );
  if (released) return reservationView(released.row, released.binding, null);
  const peek = await loadReservation(db, ctx.tenantId, ctx.input.reservationId);
  const queued =
    peek.state === 'queued' ||
    (await db
      .selectFrom('compute.reservations')
      .select('id')
      .where('pool_id', '=', peek.pool_id)
      .where('state', '=', 'queued')
      .limit(1)
      .executeTakeFirst()) !== undefined;
  if (queued) await lockPool(db, peek.pool_id);
  const row = await loadReservation(db, ctx.tenantId, ctx.input.reservationId, true);
  checkVersion('reservation', row.id, row.version, ctx.input.ifVersion);
  if (row.instance_id !== forInstance) refuseInstanceHold(row);
  if (row.state === 'ended') return viewOf(db, row);
  if (row.state === 'queued' && !queued) await lockPool(db, row.pool_id); // activated or queued since the peek: cannot happen to a queued one, kept for safety
  if (row.state === 'active') await lockNodesOf(db, [row.id]);
  // Past its end time it has expired, whether or not the controller has got to it yet: it ends so,
  // at that time, as the controller would have ended it.
  const endsAt = row.ends_at ? new Date(row.ends_at) : null;
  const expired = row.state === 'active' && endsAt !== null && endsAt <= now;
  const ended = await endReservation(
    db,
    row,
    row.state === 'queued' ? 'cancelled' : expired ? 'expired' : 'released',
    expired ? endsAt : now,
    ctx.emit,
  );
  if (queued) await activateQueue(db, row.pool_id, now, ctx.emit);
  return reservationView(ended.row, ended.binding, null);
}

/** Ends active reservations of the pool whose time is up, then starts what now fits. */
/** A reservation holding an instance's GPUs ends with the instance, not on its own. */
function refuseInstanceHold(row: { id: string; instance_id: string | null }): void {
  if (row.instance_id === null) return;
  throw new ComputeError(
    'INVALID_STATE',
    `reservation ${row.id} holds the GPUs of instance ${row.instance_id}; it ends when the instance is deleted`,
    {
      details: { instanceId: row.instance_id },
      hint: `Delete the instance to free its GPUs: better-compute instances delete ${row.instance_id}.`,
    },
  );
}

export async function expirePool(db: FleetDb, poolId: string, now: Date, emit: Emit): Promise<number> {
  await lockPool(db, poolId);
  const due = await db
    .selectFrom('compute.reservations')
    .selectAll()
    .where('pool_id', '=', poolId)
    .where('state', '=', 'active')
    .where('ends_at', '<=', now)
    .orderBy('ends_at')
    .orderBy('seq')
    .limit(500)
    .forUpdate()
    .execute();
  await lockNodesOf(
    db,
    due.map((r) => r.id),
  );
  // Each ends at its end time, not when this pass ran: what it held and used stops there.
  for (const row of due) await endReservation(db, row, 'expired', new Date(row.ends_at!), emit);
  await activateQueue(db, poolId, now, emit);
  return due.length;
}
