/**
 * Background jobs in `compute.jobs`. Any number of runners claim with FOR UPDATE SKIP LOCKED, so a
 * job runs on one of them; a runner that dies leaves its claim to expire (`locked_until`) and the
 * job is claimed again.
 */
import { backoffDelay, newId } from '@better-compute/core';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';

export interface ClaimedJob {
  id: string;
  kind: string;
  payload: Record<string, unknown>;
  attempts: number;
  maxAttempts: number;
}

/** The channel worker loops listen on: a NOTIFY here wakes them before their next poll. */
export const JOBS_CHANNEL = 'compute_jobs';

/**
 * Queues a job. With `wake`, worker loops hear of it when the enqueuing transaction commits (a
 * NOTIFY is delivered at commit, never before), so a job due now runs within milliseconds rather
 * than at the next poll: for chains of steps that wait on each other, such as a workflow's.
 */
export async function enqueueJob(
  db: Kysely<ComputeTables>,
  job: {
    kind: string;
    payload?: Record<string, unknown>;
    runAt?: Date;
    maxAttempts?: number;
    wake?: boolean;
  },
): Promise<string> {
  const id = newId('job');
  await db
    .insertInto('compute.jobs')
    .values({
      id,
      kind: job.kind,
      payload: JSON.stringify(job.payload ?? {}),
      run_at: job.runAt ?? new Date(),
      ...(job.maxAttempts ? { max_attempts: job.maxAttempts } : {}),
      locked_by: null,
      locked_until: null,
      last_error: null,
      finished_at: null,
    })
    .execute();
  if (job.wake) await sql`select pg_notify(${JOBS_CHANNEL}, '')`.execute(db);
  return id;
}

/** Claims up to `limit` due jobs of the given kinds for `runner`, for `leaseMs`. */
export async function claimJobs(
  db: Kysely<ComputeTables>,
  options: { kinds: readonly string[]; runner: string; limit: number; leaseMs: number; now: Date },
): Promise<ClaimedJob[]> {
  if (options.kinds.length === 0) return [];
  const lockedUntil = new Date(options.now.getTime() + options.leaseMs);
  // Raw SQL: the claim is one statement so two runners never take the same row; SKIP LOCKED lets
  // them pass over rows another runner is claiming right now instead of waiting.
  const result = await sql<{
    id: string;
    kind: string;
    payload: Record<string, unknown>;
    attempts: number;
    max_attempts: number;
  }>`
    update compute.jobs set state = 'running', locked_by = ${options.runner}, locked_until = ${lockedUntil},
      attempts = attempts + 1
    where id in (
      select id from compute.jobs
      where kind = any(${sql.val([...options.kinds])}::text[])
        and ((state = 'queued' and run_at <= ${options.now}) or (state = 'running' and locked_until < ${options.now}))
      order by run_at, id
      limit ${options.limit}
      for update skip locked
    )
    returning id, kind, payload, attempts, max_attempts`.execute(db);
  return result.rows.map((row) => ({
    id: row.id,
    kind: row.kind,
    payload: row.payload,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
  }));
}

/** Extends `runner`'s claims on jobs still running, so a slow job is never taken by a second runner. */
export async function renewJobClaims(
  db: Kysely<ComputeTables>,
  options: { ids: readonly string[]; runner: string; leaseMs: number; now: Date },
): Promise<void> {
  if (options.ids.length === 0) return;
  await db
    .updateTable('compute.jobs')
    .set({ locked_until: new Date(options.now.getTime() + options.leaseMs) })
    .where('id', 'in', [...options.ids])
    .where('locked_by', '=', options.runner)
    .where('state', '=', 'running')
    .execute();
}

export async function completeJob(
  db: Kysely<ComputeTables>,
  id: string,
  runner: string,
  now: Date,
): Promise<void> {
  await db
    .updateTable('compute.jobs')
    .set({ state: 'done', finished_at: now, locked_by: null, locked_until: null })
    .where('id', '=', id)
    .where('locked_by', '=', runner)
    .execute();
}

/** Records a failure: the job is retried with backoff until it runs out of attempts. */
export async function failJob(
  db: Kysely<ComputeTables>,
  job: ClaimedJob,
  runner: string,
  error: string,
  now: Date,
): Promise<void> {
  const exhausted = job.attempts >= job.maxAttempts;
  const backoffMs = backoffDelay(job.attempts, 1000, 60_000);
  await db
    .updateTable('compute.jobs')
    .set({
      state: exhausted ? 'failed' : 'queued',
      run_at: new Date(now.getTime() + backoffMs),
      last_error: error.slice(0, 2000),
      locked_by: null,
      locked_until: null,
      finished_at: exhausted ? now : null,
    })
    .where('id', '=', job.id)
    .where('locked_by', '=', runner)
    .execute();
}
