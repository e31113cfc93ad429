/**
 * The sandboxes controller, a job that queues its own next pass: sandboxes past their lifetime are
 * deleted (`sandbox.expired`), and each template's warm pool is kept between its minimum and
 * maximum: warm sandboxes of an older template version or image, of a deleted template, or whose
 * host certificate ends within a day, are retired, and the pool is refilled to its minimum after
 * claims. One pass at a time under a lease;
 * each template in its own transaction, so one that cannot be placed holds up no other.
 */
import { newId } from '@better-compute/core';
import { retryTransient } from '@better-compute/db';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { acquireLease } from '../../workers/leases.js';
import type { EventDraft, JobContext } from '../define-module.js';
import { secretsChangedAt } from '../secrets/index.js';
import { type Env, launchSandbox, removeSandbox } from './launch.js';
import type { SandboxDeps } from './settings.js';
import { sandboxDb, type TemplateRow } from './tables.js';

export const SANDBOX_CONTROLLER_JOB = 'sandboxes.controller';
export const SANDBOX_CONTROLLER_EVERY_MS = 1_000;
const HOLDER = `sbxctl_${newId('job').slice(4)}`;
/** How many failed warm starts of one template, within the window, pause its refills. */
export const FAILURES_PER_WINDOW = 3;
export const FAILURE_WINDOW_MS = 5 * 60_000;

async function inTransaction(db: Kysely<ComputeTables>, now: Date, work: (env: Env) => Promise<void>) {
  await retryTransient(() =>
    db.transaction().execute(async (trx) => {
      const events: EventDraft[] = [];
      await work({ db: trx, now, emit: (event) => void events.push(event) });
      await writeEvents(trx, events, {
        tenantId: 'root',
        actor: null,
        requestId: `sbxctl_${newId('request').slice(4)}`,
      });
    }),
  );
}

export interface SandboxControllerReport {
  expired: number;
  retired: number;
  started: number;
  errors: string[];
}

export async function runSandboxController(
  database: Kysely<ComputeTables>,
  now: Date,
  deps: SandboxDeps,
): Promise<SandboxControllerReport> {
  const report: SandboxControllerReport = { expired: 0, retired: 0, started: 0, errors: [] };
  const db = sandboxDb(database);
  const expired = await db
    .selectFrom('compute.sandboxes')
    .select('id')
    .where('state', 'in', ['starting', 'running'])
    .where('owner_id', 'is not', null)
    .where('expires_at', '<=', now)
    .limit(100)
    .execute();
  for (const { id } of expired) {
    await inTransaction(database, now, async (env) => {
      const row = await sandboxDb(env.db)
        .selectFrom('compute.sandboxes')
        .selectAll()
        .where('id', '=', id)
        .where('state', 'in', ['starting', 'running'])
        .forUpdate()
        .skipLocked()
        .executeTakeFirst();
      if (!row || !row.expires_at || row.expires_at > now) return;
      await removeSandbox(env, row, 'sandbox.expired');
      report.expired += 1;
    });
  }
  // Warm sandboxes no template wants any more: retired.
  const stale = await sql<{ id: string }>`
    select s.id from compute.sandboxes s join compute.sandbox_templates t on t.id = s.template_id
    where s.state = 'warm' and s.owner_id is null
      and (t.deleted_at is not null or s.template_version <> t.version or s.image_id <> t.image_id
        -- A warm sandbox whose host certificate ends within a day would be claimed uncertified.
        or s.host_certificate_expires_at < ${new Date(now.getTime() + 24 * 3600_000)})
    limit 100`.execute(database);
  for (const { id } of stale.rows) {
    await inTransaction(database, now, async (env) => {
      const row = await sandboxDb(env.db)
        .selectFrom('compute.sandboxes')
        .selectAll()
        .where('id', '=', id)
        .where('state', '=', 'warm')
        .where('owner_id', 'is', null)
        .forUpdate()
        .skipLocked()
        .executeTakeFirst();
      if (!row) return;
      await removeSandbox(env, row);
      report.retired += 1;
    });
  }
  const templates = await db
    .selectFrom('compute.sandbox_templates')
    .selectAll()
    .where('deleted_at', 'is', null)
    .where('warm_max', '>', 0)
    .execute();
  for (const template of templates) {
    try {
      await inTransaction(database, now, (env) => fillPool(env, template, deps, report));
    } catch (error) {
      // A pool that cannot be filled now (no room, no CA) is tried again on the next pass.
      report.errors.push(`${template.id}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return report;
}

async function fillPool(env: Env, stale: TemplateRow, deps: SandboxDeps, report: SandboxControllerReport) {
  const db = sandboxDb(env.db);
  // Read again under the template's lock: an update or delete in between is seen, and two passes
  // never fill one pool at once.
  const template = await db
    .selectFrom('compute.sandbox_templates')
    .selectAll()
    .where('id', '=', stale.id)
    .where('deleted_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!template) return;
  const pool = await db
    .selectFrom('compute.sandboxes')
    .select(['id', 'state', 'template_version', 'created_at'])
    .where('template_id', '=', template.id)
    .where('owner_id', 'is', null)
    .where('for_pool', '=', true)
    .where('state', 'in', ['starting', 'warm'])
    .orderBy('created_at', 'desc')
    .execute();
  // Started before a secret of its environment changed: it holds the old value, and is replaced.
  const secretsChanged = await secretsChangedAt(env.db, template.tenant_id, template.env);
  const outdated = (s: (typeof pool)[number]) =>
    secretsChanged !== null && new Date(s.created_at).getTime() <= secretsChanged.getTime();
  for (const old of pool.filter((s) => s.state === 'warm' && outdated(s))) {
    const row = await db
      .selectFrom('compute.sandboxes')
      .selectAll()
      .where('id', '=', old.id)
      .forUpdate()
      .executeTakeFirstOrThrow();
    await removeSandbox(env, row);
    report.retired += 1;
  }
  const current = pool.filter((s) => s.template_version === template.version && !outdated(s));
  // Over the maximum (it was lowered): the newest warm ones go first.
  for (const extra of current
    .filter((s) => s.state === 'warm')
    .slice(0, Math.max(0, current.length - template.warm_max))) {
    const row = await db
      .selectFrom('compute.sandboxes')
      .selectAll()
      .where('id', '=', extra.id)
      .forUpdate()
      .executeTakeFirstOrThrow();
    await removeSandbox(env, row);
    report.retired += 1;
  }
  const missing = Math.min(template.warm_min, template.warm_max) - current.length;
  if (missing <= 0) return;
  // A pool whose starts keep failing (a broken image, a node refusing) is not restarted every
  // second: after FAILURES_PER_WINDOW failures in the window it waits for the window to pass.
  const failures = await db
    .selectFrom('compute.sandboxes')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('template_id', '=', template.id)
    .where('for_pool', '=', true)
    .where('state', '=', 'failed')
    .where('updated_at', '>', new Date(env.now.getTime() - FAILURE_WINDOW_MS))
    .executeTakeFirstOrThrow();
  if (Number(failures.n) >= FAILURES_PER_WINDOW) return;
  const ca = await deps.ca.get();
  for (let i = 0; i < missing; i += 1) {
    await launchSandbox(env, template, ca, {
      ownerId: null,
      agentId: null,
      ttlSeconds: template.default_ttl_seconds,
      fromSnapshot: null,
    });
    report.started += 1;
  }
}

/** The `sandboxes.controller` job: one pass under a lease, then the next pass is queued. */
export function sandboxControllerJob(deps: SandboxDeps) {
  return async (context: JobContext): Promise<void> => {
    const now = context.now();
    try {
      if (
        await acquireLease(context.db, { name: SANDBOX_CONTROLLER_JOB, holder: HOLDER, ttlMs: 30_000, now })
      )
        await runSandboxController(context.db, now, deps);
    } finally {
      // Raw SQL: queue the next pass unless one is already waiting, in one statement.
      await sql`
        insert into compute.jobs (id, kind, payload, run_at)
        select ${newId('job')}, ${SANDBOX_CONTROLLER_JOB}, '{}'::jsonb, ${new Date(now.getTime() + SANDBOX_CONTROLLER_EVERY_MS)}
        where not exists (select 1 from compute.jobs where kind = ${SANDBOX_CONTROLLER_JOB} and state = 'queued')`.execute(
        context.db,
      );
    }
  };
}
