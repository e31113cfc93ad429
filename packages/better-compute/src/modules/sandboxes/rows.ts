/**
 * The sandboxes module's rows as the API shows them, reading them within a tenant (another
 * tenant's id is NOT_FOUND, never a hint that it exists), moving a sandbox's state with its event,
 * and starting the workflow that carries a change to a node.
 */
import { ComputeError } from '@better-compute/core';
import type { CatalogEventDraft } from '@better-compute/events';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { iso, isoOrNull } from '../fleet/common.js';
import { startNodeWorkflow } from '../workflows/service.js';
import type { WorkflowKind, WorkflowStep } from '../workflows/tables.js';
import {
  sandboxDb,
  type SandboxDb,
  type SandboxRow,
  type SandboxState,
  type SnapshotRow,
  type TemplateRow,
  type VolumeRow,
} from './tables.js';

type Emit = (event: CatalogEventDraft) => void;

export function templateView(
  row: TemplateRow,
  counts: { ready: number; starting: number },
  names: Map<string, string>,
) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    poolId: row.pool_id,
    flavorId: row.flavor_id,
    imageId: row.image_id,
    runtime: row.runtime,
    userData: row.user_data,
    defaultTtlSeconds: row.default_ttl_seconds,
    maxTtlSeconds: row.max_ttl_seconds,
    warm: { min: row.warm_min, max: row.warm_max, ready: counts.ready, starting: counts.starting },
    env: row.env,
    network: row.network,
    volumes: row.volumes.map((v) => ({ ...v, name: names.get(v.volumeId) ?? '' })),
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** The warm pool counts and volume names of templates, for their views. */
export async function templateViews(db: SandboxDb, rows: TemplateRow[]) {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const counts = await db
    .selectFrom('compute.sandboxes')
    .select(['template_id', 'state', sql<number>`count(*)::int`.as('n')])
    .where('template_id', 'in', ids)
    .where('for_pool', '=', true)
    .where('owner_id', 'is', null)
    .where('state', 'in', ['warm', 'starting'])
    .groupBy(['template_id', 'state'])
    .execute();
  const volumeIds = [...new Set(rows.flatMap((r) => r.volumes.map((v) => v.volumeId)))];
  const volumes = volumeIds.length
    ? await db
        .selectFrom('compute.sandbox_volumes')
        .select(['id', 'name'])
        .where('id', 'in', volumeIds)
        .execute()
    : [];
  const names = new Map(volumes.map((v) => [v.id, v.name]));
  return rows.map((row) => {
    const of = (state: string) =>
      Number(counts.find((c) => c.template_id === row.id && c.state === state)?.n ?? 0);
    return templateView(row, { ready: of('warm'), starting: of('starting') }, names);
  });
}

export function sandboxView(row: SandboxRow, now: Date) {
  const certExpires = row.host_certificate_expires_at;
  return {
    id: row.id,
    tenantId: row.tenant_id,
    templateId: row.template_id,
    poolId: row.pool_id,
    nodeId: row.node_id,
    runtime: row.runtime,
    state: row.state,
    reason: row.reason,
    warm: row.warm,
    fromSnapshotId: row.from_snapshot_id,
    identityRebound: row.identity_rebound,
    hostCertified: certExpires !== null && certExpires.getTime() > now.getTime(),
    hostCertificateExpiresAt: isoOrNull(certExpires),
    expiresAt: isoOrNull(row.expires_at),
    ownerId: row.owner_id,
    agentId: row.agent_id,
    version: row.version,
    createdAt: iso(row.created_at),
    readyAt: isoOrNull(row.ready_at),
    updatedAt: iso(row.updated_at),
    deletedAt: isoOrNull(row.deleted_at),
  };
}

export function snapshotView(row: SnapshotRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    sandboxId: row.sandbox_id,
    templateId: row.template_id,
    nodeId: row.node_id,
    state: row.state,
    memory: row.memory,
    keep: row.keep,
    sizeBytes: row.size_bytes === null ? null : Number(row.size_bytes),
    reason: row.reason,
    ownerId: row.owner_id,
    createdAt: iso(row.created_at),
    deletedAt: isoOrNull(row.deleted_at),
  };
}

export async function volumeView(db: SandboxDb, row: VolumeRow) {
  const templates = await db
    .selectFrom('compute.sandbox_templates')
    .select('id')
    .where('tenant_id', '=', row.tenant_id)
    .where('deleted_at', 'is', null)
    .where(sql<boolean>`volumes @> ${JSON.stringify([{ volumeId: row.id }])}::jsonb`)
    .orderBy('id')
    .execute();
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    nodeId: row.node_id,
    name: row.name,
    sizeGiB: row.size_gib,
    state: row.state,
    reason: row.reason,
    templateIds: templates.map((t) => t.id),
    ownerId: row.owner_id,
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    deletedAt: isoOrNull(row.deleted_at),
  };
}

function notFound(kind: string, id: string, list: string) {
  return new ComputeError('NOT_FOUND', `${kind} ${id} does not exist`, {
    details: { id },
    hint: `better-compute ${list} shows the ones you can see.`,
  });
}

export async function loadTemplate(db: SandboxDb, tenantId: string, id: string, forUpdate = false) {
  let query = db
    .selectFrom('compute.sandbox_templates')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId)
    .where('deleted_at', 'is', null);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('sandbox template', id, 'sandbox templates');
  return row;
}

export async function loadSandbox(db: SandboxDb, tenantId: string, id: string, forUpdate = false) {
  let query = db
    .selectFrom('compute.sandboxes')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  // A warm sandbox nobody claimed is the pool's, not a sandbox anyone holds.
  if (!row || (row.for_pool && row.owner_id === null && row.state !== 'deleted' && row.state !== 'failed'))
    throw notFound('sandbox', id, 'sandbox list');
  return row;
}

export async function loadSnapshot(db: SandboxDb, tenantId: string, id: string, forUpdate = false) {
  let query = db
    .selectFrom('compute.sandbox_snapshots')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('sandbox snapshot', id, 'sandbox-snapshot list');
  return row;
}

export async function loadVolume(db: SandboxDb, tenantId: string, id: string, forUpdate = false) {
  let query = db
    .selectFrom('compute.sandbox_volumes')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('sandbox volume', id, 'sandbox-volume list');
  return row;
}

export function checkVersion(kind: string, id: string, version: number, ifVersion: number | undefined) {
  if (ifVersion !== undefined && ifVersion !== version)
    throw new ComputeError('CONFLICT', `${kind} ${id} is at version ${version}, not ${ifVersion}`, {
      details: { id, version, ifVersion },
      hint: `Read it again (its version is ${version}) and retry with --if-version ${version} if the change still applies.`,
    });
}

type SandboxEventType =
  | 'sandbox.created'
  | 'sandbox.ready'
  | 'sandbox.claimed'
  | 'sandbox.expired'
  | 'sandbox.deleting'
  | 'sandbox.deleted'
  | 'sandbox.failed';

export function sandboxEvent(
  type: SandboxEventType,
  row: SandboxRow,
  previousState: SandboxState | null,
): CatalogEventDraft {
  return {
    type,
    tenantId: row.tenant_id,
    subject: { type: 'sandbox', id: row.id },
    data: {
      state: row.state,
      previousState,
      templateId: row.template_id,
      nodeId: row.node_id,
      ownerId: row.owner_id,
      version: row.version,
      ...(row.reason ? { reason: row.reason } : {}),
    },
  };
}

/** Moves a sandbox (its version counts up) and emits `type`, or `sandbox.<state>` by default. */
export async function moveSandbox(
  db: Kysely<ComputeTables>,
  row: SandboxRow,
  state: SandboxState,
  now: Date,
  emit: Emit,
  change: Partial<Omit<SandboxRow, 'id' | 'version' | 'state'>> = {},
  type?: SandboxEventType,
): Promise<SandboxRow> {
  const updated = await sandboxDb(db)
    .updateTable('compute.sandboxes')
    .set({ reason: null, ...change, state, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const eventType = type ?? (`sandbox.${state}` as SandboxEventType);
  if (type || ['deleting', 'deleted', 'failed'].includes(state))
    emit(sandboxEvent(eventType, updated, row.state));
  return updated;
}

/**
 * Starts a workflow on a node; `subject` (the sandbox, snapshot or volume it changes) travels in
 * its input, where the hooks find it.
 */
export function startWorkflow(
  ctx: { db: Kysely<ComputeTables>; emit: (event: CatalogEventDraft) => void; now: Date },
  nodeId: string,
  kind: Extract<WorkflowKind, `sandbox.${string}` | `volume.${string}`>,
  subject: Record<string, string>,
  steps: WorkflowStep[],
  reason: string,
): Promise<string> {
  return startNodeWorkflow(ctx, { nodeId, kind, steps, input: subject, reason });
}
