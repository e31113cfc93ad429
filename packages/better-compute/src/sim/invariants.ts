/**
 * The simulator's invariants, checked against the database after every step (the cheap ones) and
 * every `fullCheckEvery` steps and at the end (all of them, including the event replay).
 */
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';

export interface Violation {
  step: number;
  invariant: string;
  message: string;
}

type Db = Kysely<ComputeTables>;

async function count(db: Db, query: ReturnType<typeof sql<{ n: number }>>): Promise<number> {
  return Number((await query.execute(db)).rows[0]?.n ?? 0);
}

/** After every step: the bindings made in it. */
export async function checkStep(
  db: Db,
  step: number,
  options: {
    lastBindingId: number;
    notReady: ReadonlySet<string>;
    quotas: ReadonlyMap<string, number>;
    poolId: string;
  },
): Promise<{ violations: Violation[]; lastBindingId: number }> {
  const violations: Violation[] = [];
  const fresh = (
    await sql<{ id: number; node_id: string; gpu_indices: number[]; tenant_id: string }>`
    select id::int as id, node_id, gpu_indices, tenant_id from compute.gpu_bindings where id > ${options.lastBindingId} order by id`.execute(
      db,
    )
  ).rows;
  if (fresh.length === 0) return { violations, lastBindingId: options.lastBindingId };
  for (const b of fresh) {
    if (options.notReady.has(b.node_id)) {
      violations.push({
        step,
        invariant: 'no-new-work-on-unready-nodes',
        message: `node ${b.node_id} was not ready and got GPU(s) ${b.gpu_indices.join(', ')}`,
      });
    }
  }
  // A GPU's slot in its group names one reservation; a new binding whose slots do not name its own
  // reservation shares a GPU with another (or lost it).
  const twice = await count(
    db,
    sql<{ n: number }>`
    select count(*)::int as n
    from compute.gpu_bindings b
    join compute.gpu_groups g on g.node_id = b.node_id and g.group_no = b.group_no
    cross join unnest(b.gpu_indices) as i(idx)
    where b.released_at is null and b.id > ${options.lastBindingId}
      and g.holders[array_position(g.gpu_indices, i.idx)] is distinct from b.reservation_id`,
  );
  if (twice > 0)
    violations.push({
      step,
      invariant: 'no-gpu-bound-twice',
      message: `${twice} newly bound GPU(s) held by another reservation`,
    });
  for (const tenant of new Set(fresh.map((b) => b.tenant_id))) {
    const limit = options.quotas.get(tenant);
    if (limit === undefined) continue;
    const held = await count(
      db,
      sql<{ n: number }>`
      select coalesce(sum(gpus), 0)::int as n from compute.reservations where tenant_id = ${tenant} and pool_id = ${options.poolId} and state = 'active'`,
    );
    if (held > limit)
      violations.push({
        step,
        invariant: 'quotas-hold',
        message: `tenant ${tenant} holds ${held} GPUs over its quota of ${limit}`,
      });
  }
  return { violations, lastBindingId: fresh.at(-1)!.id };
}

/** Everything, over the whole state. */
export async function checkAll(
  db: Db,
  step: number,
  quotas: ReadonlyMap<string, number>,
  poolId: string,
): Promise<Violation[]> {
  const violations: Violation[] = [];
  const add = (invariant: string, n: number, message: string) =>
    n > 0 && violations.push({ step, invariant, message: `${n} ${message}` });
  // Every GPU of an active binding is held by its reservation in its group's slot, no GPU is in two
  // active bindings, and no slot is held without an active binding.
  const active = sql`(
    select b.reservation_id, b.node_id, b.group_no, i.idx
    from compute.gpu_bindings b cross join unnest(b.gpu_indices) as i(idx)
    where b.released_at is null)`;
  add(
    'no-gpu-bound-twice',
    await count(
      db,
      sql`select count(*)::int as n from (select 1 from ${active} a group by a.node_id, a.idx having count(*) > 1) x`,
    ),
    'GPU(s) bound twice',
  );
  add(
    'no-gpu-bound-twice',
    await count(
      db,
      sql`
    select count(*)::int as n from ${active} a
    join compute.gpu_groups g on g.node_id = a.node_id and g.group_no = a.group_no
    where g.holders[array_position(g.gpu_indices, a.idx)] is distinct from a.reservation_id`,
    ),
    'bound GPU(s) whose slot names another reservation',
  );
  add(
    'counters-match',
    Math.abs(
      (await count(
        db,
        sql`select count(*)::int as n from compute.gpu_groups g, unnest(g.holders) as h(id) where h.id is not null`,
      )) - (await count(db, sql`select count(*)::int as n from ${active} a`)),
    ),
    'GPU slot(s) held without an active binding, or bindings without their slot',
  );
  add(
    'counters-match',
    await count(
      db,
      sql`
    select count(*)::int as n from compute.nodes n where n.free_gpus <> (select coalesce(sum(free), 0) from compute.gpu_groups g where g.node_id = n.id)`,
    ),
    'node(s) whose free count is wrong',
  );
  add(
    'bindings-match',
    await count(
      db,
      sql`
    select count(*)::int as n from compute.reservations r
    where r.state = 'active'
      and r.gpus <> (select coalesce(sum(b.gpu_count), 0) from compute.gpu_bindings b where b.reservation_id = r.id and b.released_at is null)`,
    ),
    'active reservation(s) without exactly their GPUs',
  );
  add(
    'bindings-match',
    await count(
      db,
      sql`
    select count(distinct r.id)::int as n
    from compute.gpu_bindings b join compute.reservations r on r.id = b.reservation_id
    where b.released_at is null and r.state <> 'active'`,
    ),
    'queued or ended reservation(s) holding GPUs',
  );
  add(
    'nvlink-domains',
    await count(
      db,
      sql`
    select count(*)::int as n from compute.reservations r
    where r.state = 'active' and r.nvlink and (
      (select count(distinct b.nvlink_domain) from compute.gpu_bindings b where b.reservation_id = r.id and b.released_at is null) <> 1
      or exists (select 1 from compute.gpu_bindings b where b.reservation_id = r.id and b.released_at is null and b.nvlink_domain is null))`,
    ),
    'NVLink reservation(s) across domains',
  );
  add(
    'reservation-states',
    await count(
      db,
      sql`
    select count(*)::int as n from compute.reservations where state not in ('queued', 'active', 'ended') or ((state = 'ended') <> (end_reason is not null))`,
    ),
    'reservation(s) neither queued, active nor ended with a reason',
  );
  add(
    'drained-when-empty',
    await count(
      db,
      sql`select count(*)::int as n from compute.nodes where state = 'draining' and free_gpus = gpu_count`,
    ),
    'draining node(s) with no reservation left',
  );
  for (const [tenant, limit] of quotas) {
    const held = await count(
      db,
      sql`select coalesce(sum(gpus), 0)::int as n from compute.reservations where tenant_id = ${tenant} and pool_id = ${poolId} and state = 'active'`,
    );
    if (held > limit)
      violations.push({
        step,
        invariant: 'quotas-hold',
        message: `tenant ${tenant} holds ${held} GPUs over its quota of ${limit}`,
      });
  }
  return violations;
}

interface ReplayedReservation {
  state: string;
  endReason: string | null;
  endsAt: string | null;
  gpus: string[];
}

/**
 * Folds events into reservations and nodes as a reader of the outbox would, incrementally, and
 * compares the result with the tables. A comparison reads the reservations that are not ended on
 * either side and those events touched since the last one; ended reservations change no more, so
 * a `full` comparison (which reads every row) is needed only now and then.
 */
/** Where a reader of the event log is: the last transaction and index it read. */
export interface EventCursor {
  tx: string;
  index: number;
}

interface LoggedEvent {
  tx: string;
  tx_index: number;
  type: string;
  subject_id: string | null;
  data: Record<string, unknown>;
}

/** The events after `after` in commit order, as a reader of the outbox gets them; of `prefix` types only when given. */
export async function eventsAfter(db: Db, after: EventCursor, prefix?: string): Promise<LoggedEvent[]> {
  const only = prefix ? sql`and type like ${`${prefix}%`}` : sql``;
  return (
    await sql<LoggedEvent>`
      select tx_id::text as tx, tx_index, type, subject_id, data from compute.events
      where (tx_id, tx_index) > (${after.tx}::xid8, ${after.index}) ${only}
      order by tx_id, tx_index`.execute(db)
  ).rows;
}

export class EventReplay {
  readonly reservations = new Map<string, ReplayedReservation>();
  readonly nodes = new Map<string, string>();
  #after: EventCursor = { tx: '0', index: -1 };
  /** Reservations events touched since the last comparison. */
  #touched = new Set<string>();
  /** Reservations not ended according to the events. */
  #open = new Set<string>();
  eventCount = 0;

  async catchUp(db: Db): Promise<void> {
    for (const row of await eventsAfter(db, this.#after)) {
      this.eventCount++;
      this.apply(row.type, row.subject_id ?? '', row.data);
      this.#after = { tx: row.tx, index: row.tx_index };
    }
  }

  apply(type: string, id: string, data: Record<string, unknown>): void {
    if (type.startsWith('node.')) {
      if (type === 'node.deleted') this.nodes.delete(id);
      else if (typeof data.state === 'string') this.nodes.set(id, data.state);
      return;
    }
    if (!type.startsWith('reservation.')) return;
    const current = this.reservations.get(id) ?? { state: 'queued', endReason: null, endsAt: null, gpus: [] };
    if (type === 'reservation.activated') {
      current.state = 'active';
      current.endsAt = (data.endsAt as string | null) ?? null;
      current.gpus = (data.binding as { nodeId: string; gpuIndices: number[] }[])
        .flatMap((b) => b.gpuIndices.map((i) => `${b.nodeId}/${i}`))
        .sort();
    } else if (type === 'reservation.extended') {
      current.endsAt = (data.endsAt as string | null) ?? null;
    } else if (data.state === 'ended') {
      current.state = 'ended';
      current.endReason = String(data.endReason);
      current.gpus = [];
    }
    this.reservations.set(id, current);
    this.#touched.add(id);
    if (current.state === 'ended') this.#open.delete(id);
    else this.#open.add(id);
  }

  async compare(db: Db, step: number, full = false): Promise<Violation[]> {
    const violations: Violation[] = [];
    const wanted = [...new Set([...this.#touched, ...this.#open])];
    this.#touched = new Set();
    const rows = (
      full
        ? await sql<ReservationState>`select id, state, end_reason, ends_at from compute.reservations`.execute(
            db,
          )
        : await sql<ReservationState>`
            select id, state, end_reason, ends_at from compute.reservations
            where state in ('queued', 'active') or id = any(${wanted}::text[])`.execute(db)
    ).rows;
    const total = Number(
      (await sql<{ n: number }>`select count(*)::int as n from compute.reservations`.execute(db)).rows[0]?.n,
    );
    const bound = (
      await sql<{ reservation_id: string; node_id: string; gpu_index: number }>`
      select b.reservation_id, b.node_id, i.gpu_index
      from compute.gpu_bindings b cross join unnest(b.gpu_indices) as i(gpu_index)
      where b.released_at is null`.execute(db)
    ).rows;
    const gpusOf = new Map<string, string[]>();
    for (const b of bound)
      gpusOf.set(b.reservation_id, [...(gpusOf.get(b.reservation_id) ?? []), `${b.node_id}/${b.gpu_index}`]);
    if (total !== this.reservations.size) {
      violations.push({
        step,
        invariant: 'events-replay',
        message: `${total} reservations in the table, ${this.reservations.size} from events`,
      });
    }
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.id);
      const replayed = this.reservations.get(row.id);
      const endsAt = row.ends_at ? new Date(row.ends_at).toISOString() : null;
      const gpus = (gpusOf.get(row.id) ?? []).sort();
      if (
        !replayed ||
        replayed.state !== row.state ||
        replayed.endReason !== row.end_reason ||
        (row.state !== 'queued' && replayed.endsAt !== endsAt) ||
        replayed.gpus.join() !== gpus.join()
      ) {
        violations.push({
          step,
          invariant: 'events-replay',
          message: `reservation ${row.id} is ${row.state} in the table, ${JSON.stringify(replayed)} from events`,
        });
        if (violations.length > 10) break;
      }
    }
    for (const id of wanted) {
      if (!seen.has(id) && violations.length <= 10)
        violations.push({
          step,
          invariant: 'events-replay',
          message: `reservation ${id} is missing from the table, ${JSON.stringify(this.reservations.get(id))} from events`,
        });
    }
    const nodes = (await sql<{ id: string; state: string }>`select id, state from compute.nodes`.execute(db))
      .rows;
    for (const node of nodes) {
      if (this.nodes.get(node.id) !== node.state) {
        violations.push({
          step,
          invariant: 'events-replay',
          message: `node ${node.id} is ${node.state} in the table, ${this.nodes.get(node.id)} from events`,
        });
      }
    }
    return violations;
  }
}

interface ReservationState {
  id: string;
  state: string;
  end_reason: string | null;
  ends_at: Date | null;
}
