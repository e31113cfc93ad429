/**
 * The worker loop of a replica: claims due jobs of the kinds its modules handle and runs them, and,
 * while it holds the maintenance lease, runs the periodic sweeps: expired idempotency keys, events
 * past the outbox retention (never audit entries), and on a database without autovacuum (PGlite) a
 * VACUUM ANALYZE. `stop()` stops claiming, waits for the jobs
 * in flight, and releases the lease.
 */
import { newId } from '@better-compute/core';
import { type Kysely, sql } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { purgeExpiredIdempotencyKeys } from '../http/idempotency.js';
import type { HandlerLog } from '../http/handler.js';
import type { JobContext } from '../modules/define-module.js';
import { type ClaimedJob, claimJobs, completeJob, failJob, renewJobClaims } from './jobs.js';
import { acquireLease, LEASE_TTL_MS, releaseLease } from './leases.js';
import { purgeOldEvents } from './retention.js';

export interface WorkerOptions {
  db: Kysely<ComputeTables>;
  jobs: Record<string, (context: JobContext) => Promise<void>>;
  /** Whether this replica competes for the maintenance lease. */
  maintenance: boolean;
  /**
   * Whether maintenance vacuums (the database runs no autovacuum, as PGlite does): without it, every
   * rewritten row stays behind as a dead version, tables grow and statistics go stale.
   */
  vacuum?: boolean;
  now: () => Date;
  log: HandlerLog;
  pollMs?: number;
  /**
   * Subscribes to wake-ups (JOBS_CHANNEL); the loop then polls at once instead of sleeping out
   * `pollMs`. Without it, the loop only polls.
   */
  listen?: (wake: () => void) => Promise<{ close(): Promise<void> }>;
  /** How long a claim lasts unrenewed (LEASE_TTL_MS); tests shorten it. */
  leaseMs?: number;
  /** How long events stay in the outbox (`events.retention`); forever when absent. */
  eventRetentionMs?: number | undefined;
}

const MAINTENANCE_LEASE = 'maintenance';
const MAINTENANCE_EVERY_MS = 60_000;
const VACUUM_EVERY_MS = 10 * 60_000;

export function startWorkerLoop(options: WorkerOptions): { stop(): Promise<void> } {
  const runner = newId('job').replace('job_', 'runner_');
  const pollMs = options.pollMs ?? 500;
  const leaseMs = options.leaseMs ?? LEASE_TTL_MS;
  const kinds = Object.keys(options.jobs);
  let stopped = false;
  let lastMaintenance = 0;
  let lastVacuum = 0;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  // A wake-up that arrives while a tick runs is kept, so the loop polls again instead of sleeping.
  let woken = false;
  const listening = options
    .listen?.(() => {
      woken = true;
      wake?.();
    })
    .catch((error: unknown) => {
      options.log({ level: 'warn', message: 'listening for queued jobs failed; polling only', error });
      return null;
    });

  async function tick(): Promise<void> {
    const now = options.now();
    const claimed = await claimJobs(options.db, { kinds, runner, limit: 10, leaseMs, now });
    if (claimed.length > 0) await runClaimed(claimed);
    if (options.maintenance && now.getTime() - lastMaintenance >= MAINTENANCE_EVERY_MS) {
      if (
        await acquireLease(options.db, {
          name: MAINTENANCE_LEASE,
          holder: runner,
          ttlMs: leaseMs,
          now,
        })
      ) {
        lastMaintenance = now.getTime();
        await purgeExpiredIdempotencyKeys(options.db, now);
        if (options.eventRetentionMs !== undefined) {
          await purgeOldEvents(options.db, new Date(now.getTime() - options.eventRetentionMs));
        }
        if (options.vacuum && now.getTime() - lastVacuum >= VACUUM_EVERY_MS) {
          lastVacuum = now.getTime();
          await sql`vacuum analyze`.execute(options.db);
        }
      }
    }
  }

  /**
   * Runs claimed jobs one after another while renewing the claims of those not yet finished, so a
   * live runner keeps its jobs however long they take and a dead one loses them within the TTL.
   */
  async function runClaimed(claimed: ClaimedJob[]): Promise<void> {
    const pending = new Set(claimed.map((job) => job.id));
    const renewal = setInterval(() => {
      renewJobClaims(options.db, {
        ids: [...pending],
        runner,
        leaseMs,
        now: options.now(),
      }).catch((error: unknown) =>
        options.log({ level: 'warn', message: 'renewing job claims failed', error }),
      );
    }, leaseMs / 3);
    try {
      for (const job of claimed) {
        await runOne(job);
        pending.delete(job.id);
      }
    } finally {
      clearInterval(renewal);
    }
  }

  const runOne = (job: ClaimedJob) => runJob(options, job, runner);

  const done = (async () => {
    while (!stopped) {
      try {
        await tick();
      } catch (error) {
        options.log({ level: 'warn', message: 'worker tick failed', error });
      }
      if (stopped) break;
      if (woken) {
        woken = false;
        continue;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, pollMs);
      });
      wake = undefined;
      woken = false;
    }
  })();

  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      wake?.();
      await done;
      await (await listening)?.close();
      await releaseLease(options.db, MAINTENANCE_LEASE, runner).catch(() => {});
    },
  };
}

/** Runs one claimed job and records how it ended: done, or failed (retried while attempts remain). */
async function runJob(
  options: Pick<WorkerOptions, 'db' | 'jobs' | 'now' | 'log'>,
  job: ClaimedJob,
  runner: string,
): Promise<void> {
  try {
    await options.jobs[job.kind]!({ db: options.db, payload: job.payload, now: options.now });
    await completeJob(options.db, job.id, runner, options.now());
  } catch (error) {
    options.log({ level: 'warn', message: `job ${job.kind} ${job.id} failed`, error });
    await failJob(
      options.db,
      job,
      runner,
      error instanceof Error ? error.message : String(error),
      options.now(),
    );
  }
}

/**
 * Runs every job of `kinds` due at `now()`, one at a time, including those the jobs queue for now,
 * and answers how many ran: a process that moves its own clock (the simulator) runs its jobs with it
 * rather than on a loop's timer. At most `limit` jobs, so a job that keeps queueing itself for now
 * cannot hold it.
 */
export async function runDueJobs(
  options: Pick<WorkerOptions, 'db' | 'jobs' | 'now' | 'log'>,
  kinds: readonly string[] = Object.keys(options.jobs),
  limit = 1_000,
): Promise<number> {
  const runner = newId('job').replace('job_', 'runner_');
  let ran = 0;
  while (ran < limit) {
    const [job] = await claimJobs(options.db, {
      kinds,
      runner,
      limit: 1,
      leaseMs: LEASE_TTL_MS,
      now: options.now(),
    });
    if (!job) break;
    await runJob(options, job, runner);
    ran++;
  }
  return ran;
}
