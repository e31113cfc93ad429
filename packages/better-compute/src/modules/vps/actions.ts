/**
 * `instances.start`, `stop`, `resize` and `delete`: each checks the instance's state under its row
 * lock, moves it (one event) and starts the workflow that carries the change to its node; the
 * workflow's end moves it again (lifecycle.ts). A change that needs another state is INVALID_STATE.
 */
import { ComputeError } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { checkVersion } from '../fleet/common.js';
import { lockPool } from '../fleet/locks.js';
import { boundGpuIndices } from '../fleet/queries.js';

import { shapeOf, READY_TIMEOUT_MS } from './create.js';
import { visibleFlavor } from './flavors.js';
import { runtimeImage } from './images.js';
import { instanceView, loadInstance, moveInstance, startInstanceWorkflow } from './instances.js';
import { commandStep } from '../workflows/service.js';
import { fits, noRoom, roomOnNodes } from './placement.js';
import { instanceQuotas } from './quotas.js';
import { type InstanceRow, type InstanceState, vpsDb, asFleet } from './tables.js';

type Ref = { instanceId: string; ifVersion?: number | undefined };

async function lockedInstance(ctx: CallContext<Ref>, allowed: readonly InstanceState[], action: string) {
  const db = vpsDb(ctx.db);
  const peek = await loadInstance(db, ctx.tenantId, ctx.input.instanceId);
  // The pool first, then the instance (fleet/locks.ts): deletes and resizes change what the pool holds.
  await lockPool(asFleet(db), peek.pool_id);
  const row = await loadInstance(db, ctx.tenantId, ctx.input.instanceId, true);
  checkVersion('instance', row.id, row.version, ctx.input.ifVersion);
  if (!allowed.includes(row.state))
    throw new ComputeError('INVALID_STATE', `instance ${row.id} is ${row.state}; it cannot ${action}`, {
      details: { state: row.state },
      hint:
        row.state === 'provisioning' || row.state === 'stopping' || row.state === 'deleting'
          ? `Wait until its workflow ${row.workflow_id} ends (better-compute instances get ${row.id}).`
          : `Only an instance that is ${allowed.join(' or ')} can ${action}.`,
    });
  return row;
}

async function imageOf(ctx: CallContext<Ref>, row: InstanceRow) {
  const image = await vpsDb(ctx.db)
    .selectFrom('compute.images')
    .selectAll()
    .where('id', '=', row.image_id)
    .executeTakeFirstOrThrow();
  return runtimeImage(image);
}

/** The GPUs its reservation holds on its node, as the runtime's shape names them. */
async function gpusOf(ctx: CallContext<Ref>, row: InstanceRow): Promise<string[]> {
  if (!row.reservation_id) return [];
  return (await boundGpuIndices(ctx.db, row.reservation_id)).map((index) => String(index));
}

async function begin(
  ctx: CallContext<Ref>,
  row: InstanceRow,
  state: InstanceState,
  kind: 'instance.start' | 'instance.stop' | 'instance.resize' | 'instance.delete',
  steps: ReturnType<typeof commandStep>[],
  change: Parameters<typeof moveInstance>[5] = {},
) {
  const workflowId = await startInstanceWorkflow(ctx, row, kind, steps, `${kind.slice(9)} ${row.name}`);
  const moved = await moveInstance(ctx.db, row, state, ctx.now(), ctx.emit, {
    ...change,
    workflow_id: workflowId,
  });
  return instanceView(moved);
}

export async function startInstance(ctx: CallContext<Ref>) {
  const row = await lockedInstance(ctx, ['stopped'], 'start');
  return begin(ctx, row, 'provisioning', 'instance.start', [
    commandStep('boot and wait for the guest', 'instance.start', {
      instanceId: row.id,
      image: await imageOf(ctx, row),
      shape: shapeOf(row, await gpusOf(ctx, row)),
      readyTimeoutMs: READY_TIMEOUT_MS,
      egress: row.egress,
    }),
  ]);
}

export async function stopInstance(ctx: CallContext<Ref & { timeoutSeconds: number }>) {
  const row = await lockedInstance(ctx, ['running'], 'stop');
  return begin(ctx, row, 'stopping', 'instance.stop', [
    commandStep('power off (ACPI, then by force)', 'instance.stop', {
      instanceId: row.id,
      timeoutMs: ctx.input.timeoutSeconds * 1000,
    }),
  ]);
}

export async function deleteInstance(ctx: CallContext<Ref>) {
  const row = await lockedInstance(ctx, ['running', 'stopped', 'failed'], 'be deleted');
  const steps = [
    ...(row.state === 'running'
      ? [
          commandStep('power off (ACPI, then by force)', 'instance.stop', {
            instanceId: row.id,
            timeoutMs: 30_000,
          }),
        ]
      : []),
    commandStep('remove the disk and seed', 'instance.delete', { instanceId: row.id }),
  ];
  return begin(ctx, row, 'deleting', 'instance.delete', steps);
}

/**
 * A stopped instance takes another flavor of its pool: its vCPUs and memory at its next start, its
 * disk grown now (never shrunk). The new shape must fit its node and the tenant's quotas; a flavor
 * with another number of GPUs would need another reservation, so it is refused.
 */
export async function resizeInstance(ctx: CallContext<Ref & { flavorId: string }>) {
  const row = await lockedInstance(ctx, ['stopped'], 'be resized');
  const db = vpsDb(ctx.db);
  const flavor = await visibleFlavor(db, ctx.tenantId, ctx.input.flavorId);
  if (flavor.pool_id !== row.pool_id)
    throw new ComputeError('INVALID_ARGUMENT', `flavor ${flavor.id} is not a flavor of pool ${row.pool_id}`, {
      details: { field: 'flavorId' },
      hint: `better-compute flavors list --pool ${row.pool_id} shows the flavors it can take.`,
    });
  if (flavor.disk_gib < row.disk_gib)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `flavor ${flavor.name} has a ${flavor.disk_gib} GiB disk; instance ${row.id} has ${row.disk_gib} GiB and a disk only grows`,
      { details: { field: 'flavorId', diskGiB: flavor.disk_gib, currentDiskGiB: row.disk_gib } },
    );
  if (flavor.gpus !== row.gpus)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `flavor ${flavor.name} has ${flavor.gpus} GPU(s); instance ${row.id} holds ${row.gpus}, and resize keeps its GPUs`,
      { details: { field: 'flavorId' }, hint: 'Create a new instance with the GPU flavor instead.' },
    );
  await db.selectFrom('compute.flavors').select('id').where('id', '=', flavor.id).forShare().execute();
  const grow = { vcpus: flavor.vcpus - row.vcpus, memoryMiB: flavor.memory_mib - row.memory_mib };
  await instanceQuotas.check(ctx.db, ctx.tenantId, row.pool_id, {
    instances: 0,
    vcpus: Math.max(0, grow.vcpus),
    memoryMiB: Math.max(0, grow.memoryMiB),
  });
  const room = (await roomOnNodes(db, row.pool_id, row.node_id))[0];
  const more = { vcpus: Math.max(0, grow.vcpus), memoryMiB: Math.max(0, grow.memoryMiB) };
  if ((more.vcpus > 0 || more.memoryMiB > 0) && (!room || !fits(room, more)))
    throw noRoom(row.pool_id, more, room ? [room] : [], {
      node: { nodeId: row.node_id, role: `instance ${row.id}'s node` },
      growing: true,
    });
  // The new shape is held from now on, so nothing else takes the room while the disk grows.
  const resized = await begin(
    ctx,
    row,
    'provisioning',
    'instance.resize',
    [
      commandStep(`grow the disk to ${flavor.disk_gib} GiB`, 'instance.resize', {
        instanceId: row.id,
        diskGiB: flavor.disk_gib,
      }),
    ],
    { flavor_id: flavor.id, vcpus: flavor.vcpus, memory_mib: flavor.memory_mib, disk_gib: flavor.disk_gib },
  );
  ctx.emit({
    type: 'instance.resized',
    subject: { type: 'instance', id: row.id },
    data: {
      state: resized.state,
      previousState: row.state,
      poolId: row.pool_id,
      nodeId: row.node_id,
      version: resized.version,
      workflowId: resized.workflowId,
      flavorId: flavor.id,
      previousFlavorId: row.flavor_id,
    },
  });
  return resized;
}
