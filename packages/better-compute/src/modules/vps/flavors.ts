/**
 * Flavors: the shapes a VPS pool offers. Pool management: only the pool's owner changes them; a
 * tenant the pool is offered to lists them. A flavor an instance uses (any instance not deleted)
 * is never deleted, and a change to one reaches an instance only when it is resized to it.
 */
import { ComputeError, newId } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso } from '../fleet/common.js';
import { ownedPool, visiblePool } from '../fleet/pools.js';

import { asFleet, type FlavorRow, type ImageChannel, vpsDb, type VpsDb } from './tables.js';

function flavorView(row: FlavorRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    name: row.name,
    vcpus: row.vcpus,
    memoryMiB: row.memory_mib,
    diskGiB: row.disk_gib,
    gpus: row.gpus,
    gpuModel: row.gpu_model,
    description: row.description,
    image: row.image_os && row.image_channel ? { os: row.image_os, channel: row.image_channel } : null,
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

function flavorNotFound(id: string) {
  return new ComputeError('NOT_FOUND', `flavor ${id} does not exist`, {
    details: { id },
    hint: 'better-compute flavors list --pool POOL shows a pool’s flavors.',
  });
}

/** A flavor of a pool the tenant owns or is offered; NOT_FOUND otherwise. */
export async function visibleFlavor(db: VpsDb, tenantId: string, flavorId: string): Promise<FlavorRow> {
  const row = await db
    .selectFrom('compute.flavors')
    .selectAll()
    .where('id', '=', flavorId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) throw flavorNotFound(flavorId);
  try {
    await visiblePool(asFleet(db), tenantId, row.pool_id);
  } catch {
    throw flavorNotFound(flavorId);
  }
  return row;
}

/** A flavor of a pool the tenant owns, locked: NOT_FOUND when unseen, ACCESS_DENIED when only offered. */
async function ownedFlavor(db: VpsDb, tenantId: string, flavorId: string): Promise<FlavorRow> {
  const row = await visibleFlavor(db, tenantId, flavorId);
  await ownedPool(asFleet(db), tenantId, row.pool_id);
  return db
    .selectFrom('compute.flavors')
    .selectAll()
    .where('id', '=', row.id)
    .forUpdate()
    .executeTakeFirstOrThrow();
}

function checkGpuModel(gpus: number, gpuModel: string | null) {
  if (gpus === 0 && gpuModel !== null)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      'gpuModel names the model of a flavor’s GPUs; this one has none',
      {
        details: { field: 'gpuModel' },
        hint: 'Give --gpus as well, or leave --gpu-model out.',
      },
    );
}

export async function listFlavors(
  ctx: CallContext<{ poolId: string; name?: string | undefined; limit: number; cursor?: string | undefined }>,
) {
  const db = vpsDb(ctx.db);
  await visiblePool(asFleet(db), ctx.tenantId, ctx.input.poolId);
  let query = db
    .selectFrom('compute.flavors')
    .selectAll()
    .where('pool_id', '=', ctx.input.poolId)
    .where('deleted_at', 'is', null);
  if (ctx.input.name) query = query.where('name', '=', ctx.input.name);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map(flavorView),
    nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export async function createFlavor(
  ctx: CallContext<{
    poolId: string;
    name: string;
    vcpus: number;
    memoryMiB: number;
    diskGiB: number;
    gpus: number;
    gpuModel?: string | undefined;
    description: string;
    image?: { os: string; channel: ImageChannel } | undefined;
  }>,
) {
  const db = vpsDb(ctx.db);
  const { input } = ctx;
  const pool = await ownedPool(asFleet(db), ctx.tenantId, input.poolId);
  if (pool.class !== 'vps')
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `pool ${pool.id} is a ${pool.class} pool; flavors belong to vps pools`,
      {
        details: { field: 'poolId' },
        hint: 'Create a pool with --class vps for instances.',
      },
    );
  if (pool.state !== 'active')
    throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`, {
      details: { state: pool.state },
    });
  checkGpuModel(input.gpus, input.gpuModel ?? null);
  const now = ctx.now();
  const row = await db
    .insertInto('compute.flavors')
    .values({
      id: newId('flavor'),
      tenant_id: ctx.tenantId,
      pool_id: pool.id,
      name: input.name,
      vcpus: input.vcpus,
      memory_mib: input.memoryMiB,
      disk_gib: input.diskGiB,
      gpus: input.gpus,
      gpu_model: input.gpuModel ?? null,
      description: input.description,
      image_os: input.image?.os ?? null,
      image_channel: input.image?.channel ?? null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['pool_id', 'name']).where('deleted_at', 'is', null).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!row)
    throw new ComputeError('ALREADY_EXISTS', `pool ${pool.id} has a flavor named ${input.name}`, {
      details: { field: 'name' },
      hint: 'better-compute flavors list --pool shows its flavors; update that one or pick another name.',
    });
  ctx.emit({
    type: 'flavor.created',
    subject: { type: 'flavor', id: row.id },
    data: { poolId: row.pool_id, name: row.name, version: row.version },
  });
  return flavorView(row);
}

export async function updateFlavor(
  ctx: CallContext<{
    flavorId: string;
    vcpus?: number | undefined;
    memoryMiB?: number | undefined;
    diskGiB?: number | undefined;
    gpus?: number | undefined;
    gpuModel?: string | null | undefined;
    description?: string | undefined;
    image?: { os: string; channel: ImageChannel } | null | undefined;
    ifVersion?: number | undefined;
  }>,
) {
  const db = vpsDb(ctx.db);
  const { input } = ctx;
  const row = await ownedFlavor(db, ctx.tenantId, input.flavorId);
  checkVersion('flavor', row.id, row.version, input.ifVersion);
  const next = {
    vcpus: input.vcpus ?? row.vcpus,
    memory_mib: input.memoryMiB ?? row.memory_mib,
    disk_gib: input.diskGiB ?? row.disk_gib,
    gpus: input.gpus ?? row.gpus,
    gpu_model: input.gpuModel === undefined ? row.gpu_model : input.gpuModel,
    description: input.description ?? row.description,
    image_os: input.image === undefined ? row.image_os : (input.image?.os ?? null),
    image_channel: input.image === undefined ? row.image_channel : (input.image?.channel ?? null),
  };
  checkGpuModel(next.gpus, next.gpu_model);
  const same = (Object.keys(next) as (keyof typeof next)[]).every((key) => next[key] === row[key]);
  if (same) return flavorView(row);
  const updated = await db
    .updateTable('compute.flavors')
    .set({ ...next, version: row.version + 1, updated_at: ctx.now() })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'flavor.updated',
    subject: { type: 'flavor', id: row.id },
    data: { poolId: row.pool_id, name: row.name, version: updated.version },
  });
  return flavorView(updated);
}

export async function deleteFlavor(ctx: CallContext<{ flavorId: string; ifVersion?: number | undefined }>) {
  const db = vpsDb(ctx.db);
  const row = await ownedFlavor(db, ctx.tenantId, ctx.input.flavorId);
  checkVersion('flavor', row.id, row.version, ctx.input.ifVersion);
  // An instance is created under its flavor's row lock (FOR SHARE), so none can appear between
  // this count and the delete.
  const users = await db
    .selectFrom('compute.instances')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('flavor_id', '=', row.id)
    .where('state', '<>', 'deleted')
    .executeTakeFirstOrThrow();
  if (Number(users.n) > 0)
    throw new ComputeError('CONFLICT', `flavor ${row.id} is used by ${users.n} instance(s)`, {
      details: { id: row.id, instances: Number(users.n) },
      hint: 'Delete or resize the instances that use it first (better-compute instances list).',
    });
  // Deleted instances keep naming it, so the row stays, marked deleted; its name is free again.
  await db.updateTable('compute.flavors').set({ deleted_at: ctx.now() }).where('id', '=', row.id).execute();
  ctx.emit({
    type: 'flavor.deleted',
    subject: { type: 'flavor', id: row.id },
    data: { poolId: row.pool_id, name: row.name, version: row.version },
  });
  return { id: row.id, deleted: true as const };
}
