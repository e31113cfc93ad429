/**
 * `sandboxTemplates.*`: a template says what its sandboxes are and how many to keep warm. Every
 * reference is checked when it is written (pool, flavor, image, runtime, volumes, secret
 * references), so a template that exists can start sandboxes. The warm pool follows the template
 * through the controller (controller.ts): a change retires the warm sandboxes of the old version.
 */
import { type AuthorizationCheck, ComputeError, formatDuration, newId } from '@better-compute/core';
import { SANDBOX_ATTACH_ACTION, SECRETS_USE_ACTION } from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CatalogEventDraft } from '@better-compute/events';
import type { CallContext } from '../define-module.js';
import { checkVersion } from '../fleet/common.js';
import { lockPool } from '../fleet/locks.js';
import { visiblePool } from '../fleet/pools.js';
import { visibleFlavor } from '../vps/flavors.js';
import { visibleImage } from '../vps/images.js';
import { asFleet, vpsDb } from '../vps/tables.js';
import { checkSecretReferences, parseSecretReference } from '../secrets/index.js';
import { poolRuns } from './placement.js';
import { loadTemplate, templateViews } from './rows.js';
import {
  sandboxDb,
  type SandboxNetwork,
  type SandboxRuntime,
  type StoredTemplateVolume,
  type TemplateRow,
} from './tables.js';

interface VolumeInput {
  volumeId?: string | undefined;
  name?: string | undefined;
  path: string;
  readOnly: boolean;
}

interface TemplateFields {
  flavorId: string;
  imageId: string;
  userData: string | null;
  defaultTtlSeconds: number;
  maxTtlSeconds: number;
  warmMin: number;
  warmMax: number;
  env: { name: string; secretRef: string }[];
  network: SandboxNetwork;
  volumes: VolumeInput[];
}

export interface CreateTemplateInput extends Omit<TemplateFields, 'warmMax'> {
  name: string;
  poolId: string;
  runtime: SandboxRuntime;
  warmMax?: number | undefined;
}

export type UpdateTemplateInput = { templateId: string; ifVersion?: number | undefined } & {
  [K in keyof TemplateFields]?: TemplateFields[K] | undefined;
};

function invalid(field: string, message: string, hint?: string, details: Record<string, unknown> = {}) {
  return new ComputeError('INVALID_ARGUMENT', message, {
    details: { field, ...details },
    ...(hint ? { hint } : {}),
  });
}

/** Checks every field against the pool and the tenant; answers what is stored. */
async function checkFields(
  ctx: CallContext<unknown>,
  poolId: string,
  runtime: SandboxRuntime,
  fields: TemplateFields,
): Promise<{ volumes: StoredTemplateVolume[] }> {
  const db = vpsDb(ctx.db);
  const flavor = await visibleFlavor(db, ctx.tenantId, fields.flavorId);
  if (flavor.pool_id !== poolId)
    throw invalid(
      'flavorId',
      `flavor ${flavor.id} belongs to pool ${flavor.pool_id}, not ${poolId}`,
      `better-compute flavors list --pool ${poolId} shows this pool's flavors.`,
    );
  if (flavor.gpus > 0)
    throw invalid(
      'flavorId',
      `flavor ${flavor.name} has GPUs; sandboxes take flavors without GPUs`,
      'Pick a flavor without GPUs, or run an instance for GPU work.',
    );
  const image = await visibleImage(db, ctx.tenantId, fields.imageId);
  if (image.channel === 'deprecated')
    throw new ComputeError('INVALID_STATE', `image ${image.id} is deprecated; it starts no new sandboxes`, {
      details: { state: image.channel, field: 'imageId' },
      hint: 'better-compute images list --channel stable shows the images to use.',
    });
  if (fields.userData !== null && runtime === 'bwrap' && !fields.userData.startsWith('#!'))
    throw invalid(
      'userData',
      'on the bwrap runtime user data must be a script starting with #! (there is no cloud-init to read cloud-config)',
      'Write the first-start steps as a shell script (#!/bin/sh …), or use the qemu runtime for cloud-config.',
    );
  if (fields.defaultTtlSeconds > fields.maxTtlSeconds)
    throw invalid(
      'defaultTtlSeconds',
      `the default lifetime (${formatDuration(fields.defaultTtlSeconds)}) is longer than the maximum (${formatDuration(fields.maxTtlSeconds)})`,
      'Lower --default-ttl or raise --max-ttl.',
    );
  if (fields.warmMax < fields.warmMin)
    throw invalid(
      'warmMax',
      `warm.max (${fields.warmMax}) is below warm.min (${fields.warmMin})`,
      'Give --warm-max at least --warm-min.',
    );
  const names = new Set<string>();
  for (const entry of fields.env) {
    if (names.has(entry.name)) throw invalid('env', `environment variable ${entry.name} is named twice`);
    names.add(entry.name);
    const refTenant = /^secret:\/\/([^/]+)\//.exec(entry.secretRef)?.[1];
    if (refTenant !== ctx.tenantId)
      throw invalid(
        'env',
        `${entry.name} refers to a secret of tenant ${refTenant}; a template reads only its own tenant's (${ctx.tenantId})`,
        `Write it as secret://${ctx.tenantId}/sec_….`,
      );
  }
  // Each reference must name a secret of the tenant that exists now (decided on the secret as
  // compute:secrets:use by attachChecks).
  await checkSecretReferences(ctx.db, ctx.tenantId, fields.env);
  if (runtime === 'qemu' && fields.volumes.length > 0)
    throw invalid(
      'volumes',
      'volumes are mounted by bwrap sandboxes only; a qemu template mounts none',
      'Leave --volumes out of a qemu template, or make the template with --runtime bwrap.',
      { reason: 'runtime', runtime },
    );
  const volumes: StoredTemplateVolume[] = [];
  const nodes = new Set<string>();
  const paths = new Set<string>();
  for (const [index, entry] of fields.volumes.entries()) {
    let query = sandboxDb(ctx.db)
      .selectFrom('compute.sandbox_volumes')
      .selectAll()
      .where('tenant_id', '=', ctx.tenantId)
      .where('state', 'not in', ['deleted', 'deleting', 'failed']);
    query =
      entry.volumeId !== undefined
        ? query.where('id', '=', entry.volumeId)
        : query.where('name', '=', entry.name!);
    const volume = await query.executeTakeFirst();
    const named = entry.volumeId ?? entry.name!;
    if (!volume)
      throw new ComputeError('NOT_FOUND', `sandbox volume ${named} does not exist`, {
        details: { field: `volumes.${index}`, id: named },
        hint: 'better-compute sandbox-volume list shows your volumes.',
      });
    if (volume.pool_id !== poolId)
      throw invalid(
        `volumes.${index}`,
        `volume ${volume.name} lives on pool ${volume.pool_id}, not the template's ${poolId}`,
      );
    if (paths.has(entry.path)) throw invalid(`volumes.${index}`, `two volumes are mounted at ${entry.path}`);
    paths.add(entry.path);
    if (volume.node_id) nodes.add(volume.node_id);
    volumes.push({ volumeId: volume.id, path: entry.path, readOnly: entry.readOnly });
  }
  if (nodes.size > 1)
    throw invalid(
      'volumes',
      `the volumes live on ${nodes.size} different nodes; a sandbox runs on one`,
      'Mount volumes of one node (better-compute sandbox-volume list shows where each lives).',
    );
  if (volumes.length > 0 && fields.warmMax !== 0)
    throw invalid(
      'warmMax',
      'a template that mounts volumes keeps no warm pool: warm.max must be 0',
      'Pass --warm-min 0 --warm-max 0 with --volumes.',
    );
  return { volumes };
}

/**
 * The attach decisions a template's volumes need: each volume it names (by id or name, in the
 * tenant) is decided as compute:sandboxes:attach on the volume, with its owner for `@own`. A name
 * that matches no volume is left to the method, which answers NOT_FOUND.
 */
export async function attachChecks(
  db: Kysely<ComputeTables>,
  tenantId: string,
  input: unknown,
): Promise<AuthorizationCheck[]> {
  // Naming a secret is decided on the secret (its own tenant's only; another's is refused by the method).
  const secrets = ((input as { env?: { secretRef: string }[] }).env ?? []).flatMap((entry) => {
    const ref = parseSecretReference(entry.secretRef);
    return ref && ref.tenantId === tenantId
      ? [{ action: SECRETS_USE_ACTION, resource: { type: 'compute-secret', id: ref.id, tenantId } }]
      : [];
  });
  const volumes = (input as { volumes?: VolumeInput[] }).volumes ?? [];
  if (volumes.length === 0) return secrets;
  const ids = volumes.flatMap((v) => (v.volumeId ? [v.volumeId] : []));
  const names = volumes.flatMap((v) => (v.name ? [v.name] : []));
  const rows = await sandboxDb(db)
    .selectFrom('compute.sandbox_volumes')
    .select(['id', 'owner_id'])
    .where('tenant_id', '=', tenantId)
    .where('state', '<>', 'deleted')
    .where((eb) =>
      eb.or([
        ...(ids.length ? [eb('id', 'in', ids)] : []),
        ...(names.length ? [eb('name', 'in', names)] : []),
      ]),
    )
    .execute();
  return [
    ...secrets,
    ...rows.map((row) => ({
      action: SANDBOX_ATTACH_ACTION,
      resource: {
        type: 'compute-sandbox-volume',
        id: row.id,
        tenantId,
        ...(row.owner_id ? { ownerId: row.owner_id } : {}),
      },
    })),
  ];
}

async function refuseSameName(ctx: CallContext<unknown>, name: string) {
  const same = await sandboxDb(ctx.db)
    .selectFrom('compute.sandbox_templates')
    .select('id')
    .where('tenant_id', '=', ctx.tenantId)
    .where('name', '=', name)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (same)
    throw new ComputeError('ALREADY_EXISTS', `your tenant has a sandbox template named ${name}: ${same.id}`, {
      details: { field: 'name', id: same.id },
      hint: 'Pick another name, or update that template.',
    });
}

function templateEvent(
  type: 'sandbox-template.created' | 'sandbox-template.updated' | 'sandbox-template.deleted',
  row: TemplateRow,
): CatalogEventDraft {
  return {
    type,
    tenantId: row.tenant_id,
    subject: { type: 'sandboxTemplate', id: row.id },
    data: { name: row.name, poolId: row.pool_id, version: row.version },
  };
}

async function viewOf(ctx: CallContext<unknown>, row: TemplateRow) {
  return (await templateViews(sandboxDb(ctx.db), [row]))[0]!;
}

export async function createTemplate(ctx: CallContext<CreateTemplateInput>) {
  const { input } = ctx;
  const { pool } = await visiblePool(asFleet(vpsDb(ctx.db)), ctx.tenantId, input.poolId);
  if (pool.class !== 'vps')
    throw invalid(
      'poolId',
      `pool ${pool.id} is a ${pool.class} pool; sandboxes run on vps pools`,
      'better-compute pools list shows the pools and their class.',
    );
  if (pool.state !== 'active')
    throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived; it takes no new templates`, {
      details: { state: pool.state },
    });
  if (!(await poolRuns(ctx.db, pool.id, input.runtime)))
    throw invalid(
      'runtime',
      `no node of pool ${pool.id} can run the ${input.runtime} runtime`,
      `Pick the runtime the pool's daemons offer (runtime.${input.runtime === 'bwrap' ? 'qemu' : 'bwrap'}?), or add nodes that run it.`,
      { reason: 'runtime' },
    );
  const fields: TemplateFields = { ...input, warmMax: input.warmMax ?? input.warmMin };
  const { volumes } = await checkFields(ctx, pool.id, input.runtime, fields);
  await refuseSameName(ctx, input.name);
  const now = ctx.now();
  const row = await sandboxDb(ctx.db)
    .insertInto('compute.sandbox_templates')
    .values({
      id: newId('sandboxTemplate'),
      tenant_id: ctx.tenantId,
      name: input.name,
      pool_id: pool.id,
      flavor_id: fields.flavorId,
      image_id: fields.imageId,
      runtime: input.runtime,
      user_data: fields.userData,
      default_ttl_seconds: fields.defaultTtlSeconds,
      max_ttl_seconds: fields.maxTtlSeconds,
      warm_min: fields.warmMin,
      warm_max: fields.warmMax,
      env: JSON.stringify(fields.env),
      network: fields.network,
      volumes: JSON.stringify(volumes),
      created_at: now,
      updated_at: now,
      deleted_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit(templateEvent('sandbox-template.created', row));
  return viewOf(ctx, row);
}

export async function updateTemplate(ctx: CallContext<UpdateTemplateInput>) {
  const { input } = ctx;
  const db = sandboxDb(ctx.db);
  const current = await loadTemplate(db, ctx.tenantId, input.templateId, true);
  checkVersion('sandbox template', current.id, current.version, input.ifVersion);
  const warmMin = input.warmMin ?? current.warm_min;
  const fields: TemplateFields = {
    flavorId: input.flavorId ?? current.flavor_id,
    imageId: input.imageId ?? current.image_id,
    userData: input.userData !== undefined ? input.userData : current.user_data,
    defaultTtlSeconds: input.defaultTtlSeconds ?? current.default_ttl_seconds,
    maxTtlSeconds: input.maxTtlSeconds ?? current.max_ttl_seconds,
    warmMin,
    // A new minimum above the old maximum raises the maximum with it, as a create's default does.
    warmMax: input.warmMax ?? Math.max(current.warm_max, warmMin),
    env: input.env ?? current.env,
    network: input.network ?? current.network,
    volumes:
      input.volumes ??
      current.volumes.map((v) => ({ volumeId: v.volumeId, path: v.path, readOnly: v.readOnly })),
  };
  await lockPool(asFleet(vpsDb(ctx.db)), current.pool_id);
  const { volumes } = await checkFields(ctx, current.pool_id, current.runtime, fields);
  const row = await db
    .updateTable('compute.sandbox_templates')
    .set({
      flavor_id: fields.flavorId,
      image_id: fields.imageId,
      user_data: fields.userData,
      default_ttl_seconds: fields.defaultTtlSeconds,
      max_ttl_seconds: fields.maxTtlSeconds,
      warm_min: fields.warmMin,
      warm_max: fields.warmMax,
      env: JSON.stringify(fields.env),
      network: fields.network,
      volumes: JSON.stringify(volumes),
      version: current.version + 1,
      updated_at: ctx.now(),
    })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit(templateEvent('sandbox-template.updated', row));
  return viewOf(ctx, row);
}

export async function deleteTemplate(
  ctx: CallContext<{ templateId: string; ifVersion?: number | undefined }>,
) {
  const db = sandboxDb(ctx.db);
  const current = await loadTemplate(db, ctx.tenantId, ctx.input.templateId, true);
  checkVersion('sandbox template', current.id, current.version, ctx.input.ifVersion);
  const live = await db
    .selectFrom('compute.sandboxes')
    .select('id')
    .where('template_id', '=', current.id)
    .where('owner_id', 'is not', null)
    .where('state', 'in', ['starting', 'running', 'deleting'])
    .limit(5)
    .execute();
  if (live.length)
    throw new ComputeError(
      'CONFLICT',
      `sandbox template ${current.id} has live sandboxes: ${live.map((s) => s.id).join(', ')}`,
      {
        details: { id: current.id, sandboxIds: live.map((s) => s.id) },
        hint: 'Delete them first (better-compute sandbox delete), or wait until they expire.',
      },
    );
  const view = await viewOf(ctx, current);
  const row = await db
    .updateTable('compute.sandbox_templates')
    .set({ deleted_at: ctx.now(), version: current.version + 1, updated_at: ctx.now() })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  // The controller retires the warm pool on its next pass: a deleted template keeps none.
  ctx.emit(templateEvent('sandbox-template.deleted', row));
  return { ...view, version: row.version, updatedAt: row.updated_at.toISOString() };
}

export async function listTemplates(
  ctx: CallContext<{
    poolId?: string | undefined;
    name?: string | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const db = sandboxDb(ctx.db);
  let query = db
    .selectFrom('compute.sandbox_templates')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .where('deleted_at', 'is', null);
  if (ctx.input.poolId) query = query.where('pool_id', '=', ctx.input.poolId);
  if (ctx.input.name) query = query.where('name', '=', ctx.input.name);
  if (ctx.input.cursor) query = query.where('id', '<', ctx.input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: await templateViews(db, page),
    nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export async function getTemplate(ctx: CallContext<{ templateId: string }>) {
  return viewOf(ctx, await loadTemplate(sandboxDb(ctx.db), ctx.tenantId, ctx.input.templateId));
}
