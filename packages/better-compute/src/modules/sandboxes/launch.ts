/**
 * Starting a sandbox on a node, for a person's create or for a template's warm pool: place it,
 * write its row, and start its workflow (fetch the image, start the sandbox; the hooks then
 * certify its host key, lifecycle.ts). Used by `sandboxes.create` and the controller alike.
 */
import { ComputeError, newId } from '@better-compute/core';
import type { CatalogEventDraft } from '@better-compute/events';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { lockPool } from '../fleet/locks.js';
import { runtimeImage } from '../vps/images.js';
import { asFleet, vpsDb } from '../vps/tables.js';
import { flavorForLaunch, imageById } from '../vps/queries.js';
import type { SandboxCa } from './keys.js';
import { checkSecretReferences } from '../secrets/index.js';
import { placeSandbox } from './placement.js';
import { sandboxQuotas } from './quotas.js';
import { sandboxEvent, startWorkflow } from './rows.js';
import { commandStep } from '../workflows/service.js';
import { sandboxDb, type SandboxRow, type SnapshotRow, type TemplateRow } from './tables.js';

export interface Env {
  db: Kysely<ComputeTables>;
  now: Date;
  emit: (event: CatalogEventDraft) => void;
}

/** How long a node has to make a sandbox ready: bubblewrap in well under a second, a TCG guest in minutes. */
export const READY_TIMEOUT_MS = { bwrap: 30_000, qemu: 300_000 } as const;

export async function launchSandbox(
  env: Env,
  template: TemplateRow,
  ca: SandboxCa,
  options: {
    ownerId: string | null;
    agentId: string | null;
    ttlSeconds: number;
    fromSnapshot: SnapshotRow | null;
  },
): Promise<SandboxRow> {
  const db = sandboxDb(env.db);
  await lockPool(asFleet(vpsDb(env.db)), template.pool_id);
  const flavor = await flavorForLaunch(env.db, template.flavor_id);
  if (!flavor || flavor.deleted_at !== null)
    throw new ComputeError(
      'INVALID_STATE',
      `flavor ${template.flavor_id} of template ${template.id} was deleted`,
      {
        details: { field: 'flavorId', id: template.flavor_id },
        hint: `Give the template another flavor (better-compute sandbox-template update ${template.id} --flavor …).`,
      },
    );
  const image = await imageById(env.db, template.image_id);
  // A sandbox that mounts volumes runs where they live; a restore runs where its snapshot is.
  let onNode: string | null = options.fromSnapshot?.node_id ?? null;
  if (template.volumes.length > 0) {
    const volumes = await db
      .selectFrom('compute.sandbox_volumes')
      .select(['id', 'node_id', 'state'])
      .where(
        'id',
        'in',
        template.volumes.map((v) => v.volumeId),
      )
      .execute();
    const notReady =
      volumes.find((v) => v.state !== 'ready') ??
      (volumes.length < template.volumes.length ? { id: '?', state: 'deleted' } : undefined);
    if (notReady)
      throw new ComputeError(
        'INVALID_STATE',
        `volume ${notReady.id} of template ${template.id} is ${notReady.state}`,
        {
          details: { state: notReady.state, id: notReady.id },
          hint: 'Wait until the volume is ready (better-compute sandbox-volume get), or change the template’s volumes.',
        },
      );
    const volumeNode = volumes[0]?.node_id ?? null;
    if (onNode !== null && volumeNode !== null && onNode !== volumeNode)
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `the snapshot is on node ${onNode} but the template's volumes are on ${volumeNode}`,
        {
          details: { field: 'fromSnapshotId' },
        },
      );
    onNode = volumeNode;
  }
  // The secrets its environment names must still exist (they are opened only as the node is sent
  // the start, by the gateway: docs/secrets.md).
  await checkSecretReferences(env.db, template.tenant_id, template.env, 'INVALID_STATE');
  const shape = { vcpus: flavor.vcpus, memoryMiB: flavor.memory_mib };
  // Under the pool's lock, so concurrent creates of one tenant see each other.
  await sandboxQuotas.check(env.db, template.tenant_id, template.pool_id, { sandboxes: 1, ...shape });
  const nodeId = await placeSandbox(env.db, template.pool_id, template.runtime, shape, onNode);
  const id = newId('sandbox');
  await db
    .insertInto('compute.sandboxes')
    .values({
      id,
      tenant_id: template.tenant_id,
      template_id: template.id,
      template_version: template.version,
      image_id: image.id,
      pool_id: template.pool_id,
      node_id: nodeId,
      runtime: template.runtime,
      state: 'starting',
      reason: null,
      warm: false,
      for_pool: options.ownerId === null,
      from_snapshot_id: options.fromSnapshot?.id ?? null,
      identity_rebound: true,
      host_public_key: null,
      host_certificate_expires_at: null,
      vcpus: flavor.vcpus,
      memory_mib: flavor.memory_mib,
      ttl_seconds: options.ttlSeconds,
      max_ttl_seconds: template.max_ttl_seconds,
      expires_at: options.ownerId === null ? null : new Date(env.now.getTime() + options.ttlSeconds * 1000),
      workflow_id: null,
      owner_id: options.ownerId,
      agent_id: options.agentId,
      created_at: env.now,
      ready_at: null,
      claimed_at: null,
      updated_at: env.now,
      deleted_at: null,
    })
    .execute();
  const runtime = runtimeImage(image);
  const workflowId = await startWorkflow(
    env,
    nodeId,
    'sandbox.create',
    { sandboxId: id },
    [
      // One command: the node fetches the image into its cache first when it is not there (a step
      // of its own would cost a sandbox's start another round trip to the node).
      commandStep(`start ${template.runtime} sandbox of image ${image.name}`, 'sandbox.create', {
        sandboxId: id,
        runtime: template.runtime,
        image: runtime,
        shape: { ...shape, diskGiB: flavor.disk_gib, gpus: [] },
        network: template.network,
        volumes: template.volumes,
        userData: template.user_data,
        userCaPublicKey: ca.sshPublicKey.trim(),
        fromSnapshot: options.fromSnapshot
          ? { snapshotId: options.fromSnapshot.id, memory: options.fromSnapshot.memory }
          : null,
        readyTimeoutMs: READY_TIMEOUT_MS[template.runtime],
        // References only: the gateway puts each value in as it signs the command for the node.
        env: template.env.map((entry) => ({ name: entry.name, secretRef: entry.secretRef })),
      }),
    ],
    options.ownerId === null ? `warm pool of ${template.name}` : `sandbox of ${template.name}`,
  );
  const placed = await db
    .updateTable('compute.sandboxes')
    .set({ workflow_id: workflowId })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
  env.emit(sandboxEvent('sandbox.created', placed, null));
  return placed;
}

/**
 * Starts removing a sandbox on its node, with its snapshots that are not kept. A sandbox still
 * starting is only marked: its create workflow's end starts the removal (lifecycle.ts), so the
 * node never gets the delete before the create.
 */
export async function removeSandbox(
  env: Env,
  row: SandboxRow,
  eventType: 'sandbox.deleting' | 'sandbox.expired' = 'sandbox.deleting',
): Promise<SandboxRow> {
  const db = sandboxDb(env.db);
  const snapshots = await db
    .updateTable('compute.sandbox_snapshots')
    .set({ state: 'deleting', updated_at: env.now })
    .where('sandbox_id', '=', row.id)
    .where('keep', '=', false)
    .where('state', 'in', ['ready', 'failed'])
    .returning(['id'])
    .execute();
  let workflowId = row.workflow_id;
  if (row.state !== 'starting' && row.node_id) {
    workflowId = await startWorkflow(
      env,
      row.node_id,
      'sandbox.delete',
      { sandboxId: row.id },
      [
        commandStep('stop and remove the sandbox', 'sandbox.delete', { sandboxId: row.id }),
        ...snapshots.map((s) =>
          commandStep(`remove snapshot ${s.id}`, 'sandbox.snapshot-delete', { snapshotId: s.id }),
        ),
      ],
      `delete sandbox ${row.id}`,
    );
  }
  const updated = await db
    .updateTable('compute.sandboxes')
    .set({ state: 'deleting', workflow_id: workflowId, version: row.version + 1, updated_at: env.now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  env.emit(sandboxEvent(eventType, updated, row.state));
  return updated;
}
