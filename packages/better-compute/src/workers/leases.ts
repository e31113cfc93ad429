/**
 * Leader leases: where one runner must act alone (a sweep, a checkpoint), replicas compete for a
 * named lease; the holder renews it before it expires, and another takes over once it lapses.
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';

/**
 * How long a job's claim or a lease lasts without renewal. Holders renew at a third of it, so a
 * replica that dies (SIGKILL, a lost host) holds nothing for longer than this: other replicas take
 * over its jobs and leases within these 8 seconds and the time of their next poll.
 */
export const LEASE_TTL_MS = 8_000;

/** Takes or renews `name` for `holder`; true when `holder` holds it until `now + ttlMs`. */
export async function acquireLease(
  db: Kysely<ComputeTables>,
  options: { name: string; holder: string; ttlMs: number; now: Date },
): Promise<boolean> {
  const expiresAt = new Date(options.now.getTime() + options.ttlMs);
  const row = await db
    .insertInto('compute.leases')
    .values({ name: options.name, holder: options.holder, expires_at: expiresAt })
    .onConflict((oc) =>
      oc
        .column('name')
        .doUpdateSet({ holder: options.holder, expires_at: expiresAt })
        .where((eb) =>
          eb.or([
            eb('compute.leases.expires_at', '<', options.now),
            eb('compute.leases.holder', '=', options.holder),
          ]),
        ),
    )
    .returning('holder')
    .executeTakeFirst();
  return row?.holder === options.holder;
}

export async function releaseLease(db: Kysely<ComputeTables>, name: string, holder: string): Promise<void> {
  await db.deleteFrom('compute.leases').where('name', '=', name).where('holder', '=', holder).execute();
}

/** When `name`'s current holder loses it unless renewed; null when nobody holds it. */
export async function leaseExpiresAt(db: Kysely<ComputeTables>, name: string): Promise<Date | null> {
  const row = await db
    .selectFrom('compute.leases')
    .select('expires_at')
    .where('name', '=', name)
    .executeTakeFirst();
  return row ? new Date(row.expires_at) : null;
}
