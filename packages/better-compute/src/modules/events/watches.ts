/**
 * compute.live_watches (migration 0002): the tenants some live stream watches, for whom the outbox
 * trigger notifies. A process with a stream of a tenant keeps the tenant's row current; a row
 * nobody renews lapses, and the trigger then stays quiet for that tenant.
 */
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

/** Marks the tenant as watched for `seconds` more from the database's clock (never shortens it). */
export async function markWatched(
  db: Kysely<ComputeTables>,
  tenantId: string,
  seconds: number,
): Promise<void> {
  // Raw: the module declares no Kysely types for its one table, and this upsert is its one write.
  await sql`insert into compute.live_watches (tenant_id, watched_until)
    values (${tenantId}, now() + make_interval(secs => ${seconds}))
    on conflict (tenant_id) do update
    set watched_until = greatest(compute.live_watches.watched_until, excluded.watched_until)`.execute(db);
}
