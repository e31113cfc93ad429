/**
 * Inspection (metal inspect), as Ironic's in-band inspection does it: the machine boots the deploy
 * ramdisk from its site's provisioning network, and the ramdisk's agent reports the hardware it
 * finds. The metal.inspect workflow waits twice here: until a site agent has the ramdisk's boot
 * entry for one of the machine's MACs in place (metal.ensureRamdisk; a machine enrolled by its UUID
 * only waits for a person to confirm its MAC), and until the report arrived.
 *
 * The report reaches the control plane only through the site agent's authenticated session: the
 * agent took it from the ramdisk with the one-time token it put on that MAC's kernel command line,
 * and the gateway names the agent. It is recorded only for a machine of the agent's own site that
 * holds the MAC and is inspecting now, and only when the SMBIOS UUID the machine reports is the one
 * it was enrolled with, so a machine answering on a MAC it does not own writes nothing.
 */
import { BOOT_ENTRIES_KIND, normalizeMac } from '@better-compute/core';
import type { MetalInventory } from '@better-compute/core/methods';
import { type Kysely, sql } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { endedCommand, recentCommandsOfKind } from '../commands/queries.js';
import { registerCommandEndJob } from '../commands/service.js';
import type { JobContext } from '../define-module.js';
import { siteAgentsOf, siteOfSiteAgent } from '../fleet/queries.js';
import type { WaitOutcome, WorkflowHookContext } from '../workflows/hooks.js';
import { wakeWorkflow } from '../workflows/service.js';
import type { WorkflowStep } from '../workflows/tables.js';
import { metalDb } from './tables.js';

/** Whether a boot-entries payload boots one of `macs` into the ramdisk for `purpose`. */
function bootsRamdisk(payload: Record<string, unknown>, macs: readonly string[], purpose: string): boolean {
  const entries = Array.isArray(payload.entries) ? (payload.entries as Record<string, unknown>[]) : [];
  return entries.some(
    (entry) => entry.boot === 'ramdisk' && entry.purpose === purpose && macs.includes(String(entry.mac)),
  );
}

/** The metal.inspect workflow's waits: the ramdisk's entry in place, then the report recorded. */
export async function inspectionCheck(
  context: WorkflowHookContext,
  step: WorkflowStep,
): Promise<WaitOutcome> {
  const { workflow } = context;
  const row = await metalDb(context.db)
    .selectFrom('compute.metal_machines')
    .select(['id', 'tenant_id', 'site_id', 'macs', 'inspected_at'])
    .where('id', '=', String(workflow.input.machineId ?? ''))
    .executeTakeFirst();
  if (!row) return { failed: `machine ${String(workflow.input.machineId)} is gone` };
  const since = new Date(workflow.created_at);
  if (step.params?.check === 'inventory')
    return { done: row.inspected_at !== null && new Date(row.inspected_at) >= since };
  if (step.params?.check !== 'ramdisk-entry')
    return { failed: `unknown check ${String(step.params?.check)}` };
  // No MAC yet: enrolled by its UUID only, it waits for metal confirm-mac.
  if (row.macs.length === 0) return { done: false };
  const agents = await siteAgentsOf(context.db, row.tenant_id, row.site_id);
  for (const command of await recentCommandsOfKind(context.db, agents, BOOT_ENTRIES_KIND, since)) {
    if (!bootsRamdisk(command.payload, row.macs, 'inspect')) continue;
    if (command.state === 'succeeded') return { done: true };
    if (command.state === 'failed' || command.state === 'cancelled')
      return {
        failed: `site agent ${command.node_id} could not boot the ramdisk for the machine: ${command.error ?? command.state}`,
      };
    return { done: false };
  }
  return { done: false };
}

export type ReportOutcome =
  { outcome: 'recorded'; machineId: string } | { outcome: 'refused'; reason: string };

/**
 * A ramdisk's inspection report, relayed by the site agent `agentNodeId`: stored on the machine it
 * belongs to, with its event, and the machine's workflow woken, in one transaction; or refused,
 * changing nothing, with the reason the gateway logs and answers.
 */
export async function recordInspection(
  db: Kysely<ComputeTables>,
  agentNodeId: string,
  report: { mac: string; inventory: MetalInventory },
  at: Date,
): Promise<ReportOutcome> {
  const mac = normalizeMac(report.mac);
  if (!mac) return { outcome: 'refused', reason: 'the MAC is not a network card’s' };
  return db.transaction().execute(async (trx): Promise<ReportOutcome> => {
    const site = await siteOfSiteAgent(trx, agentNodeId);
    if (!site) return { outcome: 'refused', reason: 'the node is not a site agent' };
    const row = await metalDb(trx)
      .selectFrom('compute.metal_machines')
      .selectAll()
      .where('tenant_id', '=', site.tenantId)
      .where('site_id', '=', site.siteId)
      .where(sql<boolean>`${mac} = any(macs)`)
      .orderBy('id')
      .forUpdate()
      .executeTakeFirst();
    if (!row) return { outcome: 'refused', reason: `no machine of the agent’s site has the MAC ${mac}` };
    if (row.provision_state !== 'inspecting' || !row.workflow_id)
      return { outcome: 'refused', reason: `machine ${row.id} is ${row.provision_state}, not inspecting` };
    const uuid = report.inventory.systemUuid;
    if (uuid !== null && uuid !== row.product_uuid)
      return {
        outcome: 'refused',
        reason: `the machine on MAC ${mac} reports system UUID ${uuid}, and machine ${row.id} was enrolled with ${row.product_uuid}`,
      };
    await metalDb(trx)
      .updateTable('compute.metal_machines')
      .set({
        inventory: JSON.stringify(report.inventory),
        inspected_at: at,
        version: row.version + 1,
        updated_at: at,
      })
      .where('id', '=', row.id)
      .execute();
    const { inventory } = report;
    await writeEvents(
      trx,
      [
        {
          type: 'metal.inspected',
          tenantId: row.tenant_id,
          subject: { type: 'machine', id: row.id },
          data: {
            workflowId: row.workflow_id,
            mac,
            cpus: inventory.cpu.count,
            memoryMiB: inventory.memory.physicalMiB,
            disks: inventory.disks.length,
            nics: inventory.nics.length,
          },
        },
      ],
      { tenantId: row.tenant_id, actor: null, requestId: `metal-inspection:${row.id}` },
    );
    await wakeWorkflow(trx, row.workflow_id, at);
    return { outcome: 'recorded', machineId: row.id };
  });
}

/** Queued when a site agent's metal.boot-entries ends: wakes the workflows waiting for its ramdisk entries. */
export const BOOT_ENTRIES_ENDED_JOB = 'metal.boot-entries-ended';

/**
 * A site agent applied (or failed to apply) boot entries: each machine whose MAC it was told to
 * boot into the ramdisk has its workflow looked at now rather than at its next check, so
 * inspection goes on as soon as the entry is in place.
 */
export async function bootEntriesEnded(context: JobContext): Promise<void> {
  const command = await endedCommand(context.db, String(context.payload.commandId ?? ''));
  if (!command || command.kind !== BOOT_ENTRIES_KIND) return;
  const entries = Array.isArray(command.payload.entries)
    ? (command.payload.entries as Record<string, unknown>[])
    : [];
  const macs = entries.filter((entry) => entry.boot === 'ramdisk').map((entry) => String(entry.mac));
  if (macs.length === 0) return;
  const waiting = await metalDb(context.db)
    .selectFrom('compute.metal_machines')
    .select('workflow_id')
    .where('tenant_id', '=', command.tenant_id)
    .where('provision_state', '=', 'inspecting')
    .where(sql<boolean>`macs && ${sql.val(macs)}::text[]`)
    .execute();
  for (const { workflow_id } of waiting)
    if (workflow_id) await wakeWorkflow(context.db, workflow_id, context.now());
}

registerCommandEndJob(BOOT_ENTRIES_KIND, BOOT_ENTRIES_ENDED_JOB);
