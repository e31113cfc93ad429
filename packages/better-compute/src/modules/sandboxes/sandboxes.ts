/**
 * `sandboxes.*` but exec: create (a warm one of the template when there is one, claimed with one
 * row lock and no node work; else a cold start), list, get, extend, delete, snapshot.
 */
import { ComputeError, formatDuration, newId, ownerOf } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { type Env, launchSandbox, removeSandbox } from './launch.js';
import {
  loadSandbox,
  loadSnapshot,
  loadTemplate,
  sandboxEvent,
  sandboxView,
  snapshotView,
  startWorkflow,
} from './rows.js';
import type { SandboxDeps } from './settings.js';
import { commandStep } from '../workflows/service.js';
import { checkSecretReferences, secretsChangedAt } from '../secrets/index.js';
import { sandboxDb, type SandboxRow } from './tables.js';

const envOf = (ctx: CallContext<unknown>): Env => ({ db: ctx.db, now: ctx.now(), emit: ctx.emit });

export function noSnapshotStore() {
  return new ComputeError('INVALID_CONFIG', 'this deployment keeps no sandbox snapshots', {
    details: { reason: 'no-snapshot-store' },
    hint: "An operator sets sandboxes: { snapshots: 'node' } in the configuration (docs/decisions/sandboxes-snapshots.md).",
  });
}

/** Who owns a sandbox, for `@own` decisions. */
export async function sandboxOwner(
  db: Kysely<ComputeTables>,
  tenantId: string,
  input: { sandboxId: string },
) {
  const row = await sandboxDb(db)
    .selectFrom('compute.sandboxes')
    .select('owner_id')
    .where('id', '=', input.sandboxId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row?.owner_id ?? null;
}

export interface CreateSandboxInput {
  templateId: string;
  ttlSeconds?: number | undefined;
  fromSnapshotId?: string | undefined;
  waitSeconds: number;
}

export function createSandbox(deps: SandboxDeps) {
  return async (ctx: CallContext<CreateSandboxInput>) => {
    const { input } = ctx;
    const db = sandboxDb(ctx.db);
    const template = await loadTemplate(db, ctx.tenantId, input.templateId);
    // The secrets its environment names must still exist, for a warm sandbox too (it started with
    // their values; a deleted secret's is not handed to anyone new).
    await checkSecretReferences(ctx.db, ctx.tenantId, template.env, 'INVALID_STATE');
    const ttlSeconds = input.ttlSeconds ?? template.default_ttl_seconds;
    if (ttlSeconds > template.max_ttl_seconds)
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `ttl ${formatDuration(ttlSeconds)} is longer than template ${template.id} allows (${formatDuration(template.max_ttl_seconds)})`,
        {
          details: { field: 'ttlSeconds', maxTtlSeconds: template.max_ttl_seconds },
          hint: `Ask for at most ${formatDuration(template.max_ttl_seconds)}, or raise the template's --max-ttl.`,
        },
      );
    const ca = await deps.ca.get();
    const identity = ctx.identity;
    const ownerId = identity ? ownerOf(identity) : null;
    if (ownerId === null)
      throw new ComputeError(
        'UNAUTHENTICATED',
        'a sandbox belongs to whoever creates it: call with a credential',
      );
    const agentId = identity?.principalKind === 'agent' ? identity.principalId : null;
    const now = ctx.now();
    let fromSnapshot = null;
    if (input.fromSnapshotId !== undefined) {
      if (deps.snapshots === false) throw noSnapshotStore();
      fromSnapshot = await loadSnapshot(db, ctx.tenantId, input.fromSnapshotId);
      if (fromSnapshot.state !== 'ready')
        throw new ComputeError(
          'INVALID_STATE',
          `snapshot ${fromSnapshot.id} is ${fromSnapshot.state}; a restore needs a ready one`,
          {
            details: { state: fromSnapshot.state, field: 'fromSnapshotId' },
          },
        );
      if (fromSnapshot.template_id !== template.id)
        throw new ComputeError(
          'INVALID_ARGUMENT',
          `snapshot ${fromSnapshot.id} is of template ${fromSnapshot.template_id}, not ${template.id}`,
          {
            details: { field: 'fromSnapshotId' },
            hint: `Restore it with --template ${fromSnapshot.template_id}.`,
          },
        );
    } else if (template.warm_max > 0) {
      // The fast path: one warm sandbox of this template's current version, locked without waiting
      // for a create that is claiming another one; no node is asked anything. One started before a
      // secret of its environment changed holds the old value: it is left for the pool to replace.
      const secretsChanged = await secretsChangedAt(ctx.db, ctx.tenantId, template.env);
      let warmQuery = db
        .selectFrom('compute.sandboxes')
        .selectAll()
        .where('template_id', '=', template.id)
        .where('state', '=', 'warm')
        .where('template_version', '=', template.version)
        .where('owner_id', 'is', null);
      if (secretsChanged) warmQuery = warmQuery.where('created_at', '>', secretsChanged);
      const warm = await warmQuery.orderBy('ready_at').limit(1).forUpdate().skipLocked().executeTakeFirst();
      if (warm) {
        const claimed = await db
          .updateTable('compute.sandboxes')
          .set({
            state: 'running',
            warm: true,
            owner_id: ownerId,
            agent_id: agentId,
            ttl_seconds: ttlSeconds,
            claimed_at: now,
            expires_at: new Date(now.getTime() + ttlSeconds * 1000),
            version: warm.version + 1,
            updated_at: now,
          })
          .where('id', '=', warm.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        ctx.emit(sandboxEvent('sandbox.claimed', claimed, warm.state));
        return sandboxView(claimed, now);
      }
    }
    const row = await launchSandbox(envOf(ctx), template, ca, { ownerId, agentId, ttlSeconds, fromSnapshot });
    return sandboxView(row, now);
  };
}

/** After the create committed: wait up to waitSeconds for a cold sandbox to be ready. */
export async function settleCreate(
  db: Kysely<ComputeTables>,
  output: { id: string; tenantId: string; state: string },
  waitSeconds: number,
  now: () => Date,
) {
  const until = Date.now() + waitSeconds * 1000;
  let row: SandboxRow | undefined;
  while (Date.now() < until) {
    row = await sandboxDb(db)
      .selectFrom('compute.sandboxes')
      .selectAll()
      .where('id', '=', output.id)
      .executeTakeFirst();
    if (!row || row.state !== 'starting') break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return row ? sandboxView(row, now()) : undefined;
}

export async function listSandboxes(
  ctx: CallContext<{
    all: boolean;
    deleted: boolean;
    templateId?: string | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const { input } = ctx;
  let query = sandboxDb(ctx.db)
    .selectFrom('compute.sandboxes')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .where('owner_id', 'is not', null);
  if (!input.all) query = query.where('owner_id', '=', ctx.identity ? ownerOf(ctx.identity) : '');
  if (!input.deleted) query = query.where('state', '<>', 'deleted');
  if (input.templateId) query = query.where('template_id', '=', input.templateId);
  if (input.cursor) query = query.where('id', '<', input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(input.limit + 1)
    .execute();
  const page = rows.slice(0, input.limit);
  const now = ctx.now();
  return {
    items: page.map((row) => sandboxView(row, now)),
    nextCursor: rows.length > input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export async function getSandbox(ctx: CallContext<{ sandboxId: string }>) {
  const db = sandboxDb(ctx.db);
  const row = await loadSandbox(db, ctx.tenantId, ctx.input.sandboxId);
  const snapshots = await db
    .selectFrom('compute.sandbox_snapshots')
    .selectAll()
    .where('sandbox_id', '=', row.id)
    .where('state', '<>', 'deleted')
    .orderBy('id', 'desc')
    .limit(100)
    .execute();
  return { ...sandboxView(row, ctx.now()), snapshots: snapshots.map(snapshotView) };
}

/**
 * The latest a sandbox may live until: its template's maximum from when its lifetime began, when
 * it was claimed from the warm pool, else when it was first ready, else when it was created.
 */
export function latestExpiry(row: SandboxRow): Date {
  const start = row.claimed_at ?? row.ready_at ?? row.created_at;
  return new Date(start.getTime() + row.max_ttl_seconds * 1000);
}

export async function extendSandbox(
  ctx: CallContext<{ sandboxId: string; bySeconds?: number | undefined; until?: string | undefined }>,
) {
  const db = sandboxDb(ctx.db);
  const row = await loadSandbox(db, ctx.tenantId, ctx.input.sandboxId, true);
  if (row.state !== 'running' && row.state !== 'starting')
    throw new ComputeError(
      'INVALID_STATE',
      `sandbox ${row.id} is ${row.state}; only a starting or running sandbox is extended`,
      {
        details: { state: row.state },
      },
    );
  const now = ctx.now();
  const current = row.expires_at ?? now;
  const wanted =
    ctx.input.bySeconds !== undefined
      ? new Date(current.getTime() + ctx.input.bySeconds * 1000)
      : new Date(ctx.input.until!);
  const latest = latestExpiry(row);
  if (wanted.getTime() > latest.getTime())
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `sandbox ${row.id} may live until ${latest.toISOString()} at the latest (its template's maximum of ${row.max_ttl_seconds} s); ${wanted.toISOString()} is past it`,
      {
        details: {
          field: ctx.input.bySeconds !== undefined ? 'bySeconds' : 'until',
          latest: latest.toISOString(),
        },
        hint: `Extend it --until ${latest.toISOString()} at most.`,
      },
    );
  if (wanted.getTime() <= now.getTime() || wanted.getTime() <= current.getTime())
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${wanted.toISOString()} does not lengthen sandbox ${row.id}'s lifetime (it ends ${current.toISOString()})`,
      {
        details: { field: 'until', expiresAt: current.toISOString() },
        hint: 'Pass a time after its current end.',
      },
    );
  const updated = await db
    .updateTable('compute.sandboxes')
    .set({ expires_at: wanted, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const event = sandboxEvent('sandbox.ready', updated, row.state);
  ctx.emit({
    ...event,
    type: 'sandbox.extended',
    data: {
      ...(event.data as object),
      expiresAt: wanted.toISOString(),
      previousExpiresAt: row.expires_at?.toISOString() ?? null,
    },
  } as typeof event);
  return sandboxView(updated, now);
}

export async function deleteSandbox(ctx: CallContext<{ sandboxId: string }>) {
  const db = sandboxDb(ctx.db);
  const row = await loadSandbox(db, ctx.tenantId, ctx.input.sandboxId, true);
  if (row.state === 'deleting') return sandboxView(row, ctx.now());
  if (row.state === 'deleted')
    throw new ComputeError('INVALID_STATE', `sandbox ${row.id} is already deleted`, {
      details: { state: row.state },
    });
  return sandboxView(await removeSandbox(envOf(ctx), row), ctx.now());
}

export function snapshotSandbox(deps: SandboxDeps) {
  return async (ctx: CallContext<{ sandboxId: string; memory?: boolean | undefined; keep: boolean }>) => {
    if (deps.snapshots === false) throw noSnapshotStore();
    const db = sandboxDb(ctx.db);
    const row = await loadSandbox(db, ctx.tenantId, ctx.input.sandboxId, true);
    if (ctx.input.memory === true && row.runtime === 'bwrap')
      throw new ComputeError(
        'UNSUPPORTED',
        `sandbox ${row.id} runs on bwrap, which snapshots the disk only`,
        {
          details: { reason: 'runtime', runtime: row.runtime, field: 'memory' },
          hint: 'Leave --memory out (or pass --no-memory), or use a qemu template for memory snapshots.',
        },
      );
    if (row.state !== 'running' || !row.node_id)
      throw new ComputeError(
        'INVALID_STATE',
        `sandbox ${row.id} is ${row.state}; only a running sandbox is snapshotted`,
        {
          details: { state: row.state },
        },
      );
    const memory = ctx.input.memory ?? row.runtime === 'qemu';
    const now = ctx.now();
    const id = newId('snapshot');
    const workflowId = await startWorkflow(
      envOf(ctx),
      row.node_id,
      'sandbox.snapshot',
      { snapshotId: id },
      [
        commandStep(memory ? 'snapshot disk and memory' : 'snapshot disk', 'sandbox.snapshot', {
          sandboxId: row.id,
          snapshotId: id,
          memory,
        }),
      ],
      `snapshot ${row.id}`,
    );
    const snapshot = await db
      .insertInto('compute.sandbox_snapshots')
      .values({
        id,
        tenant_id: row.tenant_id,
        sandbox_id: row.id,
        template_id: row.template_id,
        node_id: row.node_id,
        state: 'creating',
        memory,
        keep: ctx.input.keep,
        size_bytes: null,
        reason: null,
        owner_id: ctx.identity ? ownerOf(ctx.identity) : row.owner_id,
        workflow_id: workflowId,
        created_at: now,
        updated_at: now,
        deleted_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    ctx.emit({
      type: 'sandbox-snapshot.created',
      tenantId: row.tenant_id,
      subject: { type: 'sandboxSnapshot', id },
      data: { state: 'creating', sandboxId: row.id, nodeId: row.node_id, memory, keep: snapshot.keep },
    });
    return snapshotView(snapshot);
  };
}

/** The tenant a sandbox belongs to (its template's), whatever its state; null when there is none. */
export async function sandboxTenant(db: Kysely<ComputeTables>, sandboxId: string): Promise<string | null> {
  const row = await sandboxDb(db)
    .selectFrom('compute.sandboxes')
    .select('tenant_id')
    .where('id', '=', sandboxId)
    .executeTakeFirst();
  return row?.tenant_id ?? null;
}
