/**
 * `instances.create`: checks the pool, flavor and image, takes the pool's lock, checks the quotas,
 * takes the flavor's GPUs through the reservation service (an instance with GPUs holds a
 * reservation, so GPUs are placed and counted once for both), places the instance on a node with
 * room, and starts its workflow: fetch the image, make the disk and seed, boot. One transaction.
 */
import { ComputeError, newId, ownerOf } from '@better-compute/core';
import { MAX_RESERVATION_SECONDS } from '@better-compute/core/methods';
import type { CallContext } from '../define-module.js';
import { lockPool } from '../fleet/locks.js';
import { visiblePool } from '../fleet/pools.js';
import { createReservation } from '../fleet/reservations/reserve.js';

import { visibleFlavor } from './flavors.js';
import { imageToBoot, runtimeImage } from './images.js';
import { instanceEvent, instanceView, startInstanceWorkflow } from './instances.js';
import { commandStep } from '../workflows/service.js';
import { fits, noRoom, roomOnNodes } from './placement.js';
import { instanceQuotas } from './quotas.js';
import { type FlavorRow, type ImageRow, type InstanceRow, vpsDb, asFleet } from './tables.js';

/** How long a guest has to answer after QEMU starts it (TCG boots are slow). */
export const READY_TIMEOUT_MS = 300_000;

export interface CreateInput {
  poolId: string;
  flavorId: string;
  imageId?: string | undefined;
  name: string;
  sshKeys: string[];
  userData: string | null;
  egress: boolean;
}

export function shapeOf(row: Pick<InstanceRow, 'vcpus' | 'memory_mib' | 'disk_gib'>, gpus: string[]) {
  return { vcpus: row.vcpus, memoryMiB: row.memory_mib, diskGiB: row.disk_gib, gpus };
}

export async function createInstance(ctx: CallContext<CreateInput>) {
  const db = vpsDb(ctx.db);
  const { input } = ctx;
  const { pool } = await visiblePool(asFleet(db), ctx.tenantId, input.poolId);
  if (pool.class !== 'vps')
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `pool ${pool.id} is a ${pool.class} pool; instances run on vps pools`,
      {
        details: { field: 'poolId' },
        hint: 'better-compute pools list shows the pools and their class.',
      },
    );
  if (pool.state !== 'active')
    throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived; it takes no new instances`, {
      details: { state: pool.state },
    });
  const flavor = await visibleFlavor(db, ctx.tenantId, input.flavorId);
  if (flavor.pool_id !== pool.id)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `flavor ${flavor.id} belongs to pool ${flavor.pool_id}, not ${pool.id}`,
      {
        details: { field: 'flavorId' },
        hint: `better-compute flavors list --pool ${pool.id} shows this pool's flavors.`,
      },
    );
  const image = await imageToBoot(db, ctx.tenantId, input.imageId, flavor);
  if (image.channel === 'deprecated')
    throw new ComputeError('INVALID_STATE', `image ${image.id} is deprecated; it boots no new instances`, {
      details: { state: image.channel },
      hint: 'better-compute images list --channel stable shows the images to use.',
    });
  await lockPool(asFleet(db), pool.id);
  // The flavor is held as it is read: a concurrent delete waits for this create, then sees it.
  await db.selectFrom('compute.flavors').select('id').where('id', '=', flavor.id).forShare().execute();
  const shape = { vcpus: flavor.vcpus, memoryMiB: flavor.memory_mib };
  await instanceQuotas.check(ctx.db, ctx.tenantId, pool.id, { instances: 1, ...shape });
  const sameName = await db
    .selectFrom('compute.instances')
    .select('id')
    .where('tenant_id', '=', ctx.tenantId)
    .where('name', '=', input.name)
    .where('state', '<>', 'deleted')
    .executeTakeFirst();
  if (sameName)
    throw new ComputeError(
      'ALREADY_EXISTS',
      `your tenant has an instance named ${input.name}: ${sameName.id}`,
      {
        details: { field: 'name', id: sameName.id },
        hint: 'Pick another name, or delete that instance first.',
      },
    );
  const id = newId('instance');
  const { nodeId, reservationId, gpus } = await placeInstance(ctx, pool.id, flavor, shape, id);
  const now = ctx.now();
  const row = await db
    .insertInto('compute.instances')
    .values({
      id,
      tenant_id: ctx.tenantId,
      pool_id: pool.id,
      node_id: nodeId,
      flavor_id: flavor.id,
      image_id: image.id,
      name: input.name,
      state: 'provisioning',
      reason: null,
      vcpus: flavor.vcpus,
      memory_mib: flavor.memory_mib,
      disk_gib: flavor.disk_gib,
      gpus: flavor.gpus,
      reservation_id: reservationId,
      workflow_id: null,
      ssh_keys: JSON.stringify(input.sshKeys),
      user_data: input.userData,
      address: null,
      ssh_port: null,
      egress: input.egress,
      owner_id: ctx.identity ? ownerOf(ctx.identity) : null,
      agent_id: ctx.identity?.principalKind === 'agent' ? ctx.identity.principalId : null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const workflowId = await startInstanceWorkflow(
    ctx,
    row,
    'instance.create',
    createSteps(row, image, gpus),
    `create ${row.name}`,
  );
  const placed = await db
    .updateTable('compute.instances')
    .set({ workflow_id: workflowId })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const created = instanceEvent(placed, 'provisioning', null);
  ctx.emit({
    ...created,
    type: 'instance.created',
    data: { ...(created.data as object), flavorId: flavor.id, imageId: image.id },
  } as typeof created);
  return instanceView(placed);
}

function createSteps(row: InstanceRow, image: ImageRow, gpus: string[]) {
  const runtime = runtimeImage(image);
  const shape = shapeOf(row, gpus);
  return [
    commandStep(`fetch image ${image.name}`, 'image.fetch', { image: runtime }),
    commandStep('make the disk and seed', 'instance.create', {
      instanceId: row.id,
      hostname: row.name,
      image: runtime,
      shape,
      sshKeys: row.ssh_keys,
      userData: row.user_data,
    }),
    commandStep('boot and wait for the guest', 'instance.start', {
      instanceId: row.id,
      image: runtime,
      shape,
      readyTimeoutMs: READY_TIMEOUT_MS,
      egress: row.egress,
    }),
  ];
}

/**
 * The node: for a flavor with GPUs, the node its reservation bound (which must also have room for
 * the vCPUs and memory); otherwise the fullest ready node with room.
 */
async function placeInstance(
  ctx: CallContext<CreateInput>,
  poolId: string,
  flavor: FlavorRow,
  shape: { vcpus: number; memoryMiB: number },
  instanceId: string,
): Promise<{ nodeId: string; reservationId: string | null; gpus: string[] }> {
  const db = vpsDb(ctx.db);
  if (flavor.gpus === 0) {
    const rooms = await roomOnNodes(db, poolId);
    const room = rooms.find((r) => fits(r, shape));
    if (!room) throw noRoom(poolId, shape, rooms);
    return { nodeId: room.nodeId, reservationId: null, gpus: [] };
  }
  const reservation = await createReservation(
    {
      ...ctx,
      input: {
        poolId,
        gpus: flavor.gpus,
        durationSeconds: MAX_RESERVATION_SECONDS,
        nvlink: false,
        gpuModel: flavor.gpu_model,
        tolerations: [],
      },
    },
    'vps',
    // Held for as long as the instance lives, not for a reservation's longest term.
    instanceId,
  );
  const nodes = [...new Set(reservation.binding.map((b) => b.nodeId))];
  if (reservation.state !== 'active' || nodes.length !== 1)
    // Thrown, so the reservation made above is rolled back with everything else.
    throw new ComputeError(
      'UNAVAILABLE',
      `no ready node of pool ${poolId} has ${flavor.gpus} free GPU(s)${flavor.gpu_model ? ` of model ${flavor.gpu_model}` : ''} for flavor ${flavor.name}`,
      {
        details: { poolId, gpus: flavor.gpus },
        hint: 'Retry when GPUs of the pool are free (better-compute capacity --pool shows them), or pick a flavor without GPUs.',
      },
    );
  const nodeId = nodes[0]!;
  const rooms = await roomOnNodes(db, poolId, nodeId);
  if (!rooms[0] || !fits(rooms[0], shape))
    throw noRoom(poolId, shape, rooms, { node: { nodeId, role: "the node holding the flavor's GPUs" } });
  const gpus = reservation.binding.flatMap((b) => b.gpuIndices.map((index) => String(index)));
  return { nodeId, reservationId: reservation.id, gpus };
}
