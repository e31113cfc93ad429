/**
 * A VM that stopped without a command asking, as its node reports it (`instance.exited` on the
 * daemon's session): the instance moves from `running` to `failed` with the node's reason, or to
 * `stopped` when the guest powered itself off (docs/decisions/instance-exit.md), in one transaction
 * with its event. Only the node that holds the instance can move it, and only out of `running`:
 * an instance a workflow is changing (stopping, deleting, booting) belongs to that workflow.
 */
import { newId } from '@better-compute/core';
import { retryTransient } from '@better-compute/db';
import type { CatalogEventDraft } from '@better-compute/events';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { lockPool } from '../fleet/locks.js';
import { fleetDb } from '../fleet/tables.js';
import { moveInstance } from './instances.js';
import { type InstanceRow, vpsDb } from './tables.js';

export interface InstanceExit {
  instanceId: string;
  reason: string;
  clean: boolean;
}

/**
 * Records a node's report of an exit: `moved` (the instance as it is now), `ignored` (not this
 * node's, or not running), or `later` when the instance's start has finished on the node but the
 * control plane has not yet marked it running: the node tells the exit again.
 */
export async function instanceExited(
  database: Kysely<ComputeTables>,
  nodeId: string,
  exit: InstanceExit,
  now: Date,
): Promise<{ outcome: 'moved'; instance: InstanceRow } | { outcome: 'ignored' | 'later' }> {
  return retryTransient(() =>
    database.transaction().execute(async (trx) => {
      const db = vpsDb(trx);
      // Only this node's instance: another node's id reads as nothing at all.
      const peek = await db
        .selectFrom('compute.instances')
        .select(['pool_id', 'tenant_id'])
        .where('id', '=', exit.instanceId)
        .where('node_id', '=', nodeId)
        .executeTakeFirst();
      if (!peek) return { outcome: 'ignored' as const };
      // The pool first, then the instance, as every other change of an instance locks them.
      await lockPool(fleetDb(trx), peek.pool_id);
      const row = await db
        .selectFrom('compute.instances')
        .selectAll()
        .where('id', '=', exit.instanceId)
        .where('node_id', '=', nodeId)
        .forUpdate()
        .executeTakeFirst();
      if (row?.state === 'provisioning') return { outcome: 'later' as const };
      if (row?.state !== 'running') return { outcome: 'ignored' as const };
      const events: CatalogEventDraft[] = [];
      const reason = exit.reason.replace(/[^\t -~]/g, '').slice(0, 500) || 'the VM exited';
      const moved = await moveInstance(
        trx,
        row,
        exit.clean ? 'stopped' : 'failed',
        now,
        (event) => void events.push(event),
        { reason, address: null, ssh_port: null },
      );
      await writeEvents(trx, events, {
        tenantId: row.tenant_id,
        actor: null,
        requestId: `node:${nodeId}:${newId('request').slice(4)}`,
      });
      return { outcome: 'moved' as const, instance: moved };
    }),
  );
}
