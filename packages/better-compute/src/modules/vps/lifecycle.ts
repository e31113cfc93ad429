/**
 * How an instance moves when its workflow ends, in the transaction that ends it: create and start
 * end `running` (with the guest's address and SSH port as the node reported them), stop and resize
 * `stopped`, delete `deleted` (its GPUs' reservation released, its place freed with its row); any
 * failure, or an abort, `failed` with the reason.
 */
import type { RuntimeCommandResults } from '@better-compute/core/runtime-commands';
import type { CatalogEventDraft } from '@better-compute/events';
import { commandResult } from '../commands/queries.js';
import { lockPool } from '../fleet/locks.js';
import { releaseReservation } from '../fleet/reservations/extend-release.js';
import { fleetDb } from '../fleet/tables.js';
import type { WorkflowHookContext, WorkflowHooks } from '../workflows/hooks.js';
import { moveInstance } from './instances.js';
import type { InstanceRow } from './tables.js';
import { vpsDb } from './tables.js';

export const INSTANCE_WORKFLOW_KINDS = [
  'instance.create',
  'instance.start',
  'instance.stop',
  'instance.resize',
  'instance.delete',
] as const;

/** The instance, locked after its pool (the lock order of fleet/locks.ts, as the methods take it). */
async function lockedInstance(context: WorkflowHookContext): Promise<InstanceRow | undefined> {
  const db = vpsDb(context.db);
  const instanceId = context.workflow.instance_id;
  if (!instanceId) return undefined;
  const peek = await db
    .selectFrom('compute.instances')
    .select('pool_id')
    .where('id', '=', instanceId)
    .executeTakeFirst();
  if (!peek) return undefined;
  await lockPool(fleetDb(context.db), peek.pool_id);
  const row = await db
    .selectFrom('compute.instances')
    .selectAll()
    .where('id', '=', instanceId)
    .forUpdate()
    .executeTakeFirst();
  // A workflow that is no longer the instance's own (a later one replaced it) changes nothing.
  if (!row || row.workflow_id !== context.workflow.id || row.state === 'deleted') return undefined;
  return row;
}

/** What the node said when the guest booted: the last `instance.start` command's result. */
async function bootResult(context: WorkflowHookContext) {
  const started = [...context.steps].reverse().find((s) => s.commandKind === 'instance.start' && s.commandId);
  if (!started?.commandId) return null;
  return (await commandResult(context.db, started.commandId)) as Partial<
    RuntimeCommandResults['instance.start']
  > | null;
}

const emitOf = (context: WorkflowHookContext) => (event: CatalogEventDraft) => context.emit(event);

async function succeeded(context: WorkflowHookContext): Promise<void> {
  const row = await lockedInstance(context);
  if (!row) return;
  const emit = emitOf(context);
  switch (context.workflow.kind) {
    case 'instance.create':
    case 'instance.start': {
      const boot = await bootResult(context);
      await moveInstance(context.db, row, 'running', context.now, emit, {
        address: typeof boot?.address === 'string' ? boot.address : null,
        ssh_port: typeof boot?.sshPort === 'number' ? boot.sshPort : null,
      });
      return;
    }
    case 'instance.stop':
    case 'instance.resize':
      await moveInstance(context.db, row, 'stopped', context.now, emit, { address: null, ssh_port: null });
      return;
    case 'instance.delete':
      if (row.reservation_id) await releaseGpus(context, row.reservation_id, row.tenant_id, row.id);
      await moveInstance(context.db, row, 'deleted', context.now, emit, {
        address: null,
        ssh_port: null,
        deleted_at: context.now,
      });
      return;
    default:
      return;
  }
}

async function releaseGpus(
  context: WorkflowHookContext,
  reservationId: string,
  tenantId: string,
  instanceId: string,
) {
  await releaseReservation(
    {
      input: { reservationId },
      identity: null,
      tenantId,
      requestId: `workflow:${context.workflow.id}`,
      db: context.db,
      emit: emitOf(context),
      now: () => context.now,
      tenantExists: async (id) => id === tenantId,
      routes: () => [],
    },
    instanceId,
  );
}

async function failed(context: WorkflowHookContext, error: string): Promise<void> {
  const row = await lockedInstance(context);
  if (!row) return;
  await moveInstance(context.db, row, 'failed', context.now, emitOf(context), {
    reason: `${context.workflow.kind.slice(9)} failed: ${error}`.slice(0, 2000),
    ssh_port: null,
  });
}

export const instanceWorkflowHooks: WorkflowHooks = { succeeded, failed };
