/**
 * The `audit.checkpoint` job: seals every tenant's new audit entries, one replica at a time under
 * a leader lease, then queues its next run (hourly by default; `audit.checkpointEverySeconds`).
 * A deployment without an audit key logs why and tries again at the next run; it never fails the
 * worker loop.
 */
import { newId } from '@better-compute/core';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { HandlerLog } from '../http/handler.js';
import type { JobContext } from '../modules/define-module.js';
import { acquireLease, LEASE_TTL_MS } from '../workers/leases.js';
import { sealAuditLog, type AuditSigningKey } from './seal.js';

export const AUDIT_CHECKPOINT_JOB = 'audit.checkpoint';
export const DEFAULT_CHECKPOINT_EVERY_SECONDS = 3600;
const HOLDER = `audit_${newId('job').slice(4)}`;

export interface CheckpointJobOptions {
  /** The key and the deployment name, loaded at each run (the bundle may be added later). */
  signer: () => Promise<{ key: AuditSigningKey; deployment: string }>;
  everyMs: number;
  log: HandlerLog;
}

/** Queues a run at `runAt` unless one is already waiting, in one statement. */
export async function queueCheckpoint(db: Kysely<ComputeTables>, runAt: Date): Promise<void> {
  // Raw SQL: the insert happens only when no run is waiting, without a race between two replicas
  // that would matter (a second queued run seals nothing new and requeues nothing).
  await sql`
    insert into compute.jobs (id, kind, payload, run_at)
    select ${newId('job')}, ${AUDIT_CHECKPOINT_JOB}, '{}'::jsonb, ${runAt}
    where not exists (select 1 from compute.jobs where kind = ${AUDIT_CHECKPOINT_JOB} and state = 'queued')`.execute(
    db,
  );
}

export function checkpointJob(options: CheckpointJobOptions): (context: JobContext) => Promise<void> {
  let lastFailure: string | undefined;
  return async (context) => {
    const now = context.now();
    try {
      const leased = await acquireLease(context.db, {
        name: AUDIT_CHECKPOINT_JOB,
        holder: HOLDER,
        // Short, as every lease (workers/leases.ts): a replica that dies mid-seal holds up no one
        // for long, and a seal is safe beside another (each tenant's seal takes an advisory lock).
        ttlMs: LEASE_TTL_MS,
        now,
      });
      if (leased) {
        const { key, deployment } = await options.signer();
        const { checkpoints } = await sealAuditLog(context.db, { key, deployment });
        lastFailure = undefined;
        if (checkpoints.length > 0) {
          const entries = checkpoints.reduce((sum, c) => sum + c.added, 0);
          options.log({
            level: 'info',
            message: `audit: sealed ${entries} entries in ${checkpoints.length} checkpoint(s)`,
          });
        }
      }
    } catch (error) {
      // Once per distinct reason: a deployment without a bundle is told, not flooded.
      const reason = error instanceof Error ? error.message : String(error);
      if (reason !== lastFailure)
        options.log({ level: 'warn', message: 'audit checkpoint did not run', error });
      lastFailure = reason;
    } finally {
      await queueCheckpoint(context.db, new Date(now.getTime() + options.everyMs));
    }
  };
}
