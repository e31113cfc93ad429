/**
 * What the deploy ramdisk does for a machine's workflow, as Ironic's agent does: the machine boots
 * the ramdisk from its site's provisioning network and the ramdisk's agent reports what it was
 * booted for. `metal.inspect` (metal inspect) has it report the hardware; `metal.clean` (provide)
 * has it erase the disks' metadata and report what it erased. Each workflow waits here twice: until
 * a site agent has the ramdisk's boot entry for one of the machine's MACs in place
 * (metal.ensureRamdisk; a machine enrolled by its UUID only waits for a person to confirm its MAC),
 * and until the report arrived.
 *
 * A report reaches the control plane only through the site agent's authenticated session: the
 * agent took it from the ramdisk with the one-time token it put on that MAC's kernel command line,
 * and the gateway names the agent. It is recorded only for a machine of the agent's own site that
 * holds the MAC and is in the state the report is for now, and only when the SMBIOS UUID the
 * machine reports is the one it was enrolled with, so a machine answering on a MAC it does not own
 * writes nothing.
 */
import { BOOT_ENTRIES_KIND, type MetalState, normalizeMac, type RamdiskPurpose } from '@better-compute/core';
import type { MetalCleaning, MetalInventory } from '@better-compute/core/methods';
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
import { type MachineRow, metalDb } from './tables.js';

/** The machine states that boot the deploy ramdisk, and what for: one row per ramdisk workflow. */
export const RAMDISK_STATES: Readonly<Partial<Record<MetalState, RamdiskPurpose>>> = {
  inspecting: 'inspect',
  cleaning: 'clean',
};
const STATE_OF_PURPOSE = Object.fromEntries(
  Object.entries(RAMDISK_STATES).map(([state, purpose]) => [purpose, state as MetalState]),
) as Record<RamdiskPurpose, MetalState>;
const PURPOSE_OF_WORKFLOW: Readonly<Record<string, RamdiskPurpose>> = {
  'metal.inspect': 'inspect',
  'metal.clean': 'clean',
};

/** Whether a boot-entries payload boots one of `macs` into the ramdisk for `purpose`. */
function bootsRamdisk(payload: Record<string, unknown>, macs: readonly string[], purpose: string): boolean {
  const entries = Array.isArray(payload.entries) ? (payload.entries as Record<string, unknown>[]) : [];
  return entries.some(
    (entry) => entry.boot === 'ramdisk' && entry.purpose === purpose && macs.includes(String(entry.mac)),
  );
}

const reportedSince = (at: Date | string | null, since: Date) => at !== null && new Date(at) >= since;

/** The ramdisk workflows' waits: the ramdisk's entry in place, then its report recorded. */
export async function ramdiskCheck(context: WorkflowHookContext, step: WorkflowStep): Promise<WaitOutcome> {
  const { workflow } = context;
  const row = await metalDb(context.db)
    .selectFrom('compute.metal_machines')
    .select(['id', 'tenant_id', 'site_id', 'macs', 'inspected_at', 'cleaned_at', 'cleaning'])
    .where('id', '=', String(workflow.input.machineId ?? ''))
    .executeTakeFirst();
  if (!row) return { failed: `machine ${String(workflow.input.machineId)} is gone` };
  const since = new Date(workflow.created_at);
  const check = step.params?.check;
  if (check === 'inventory') return { done: reportedSince(row.inspected_at, since) };
  if (check === 'cleaned') {
    if (!reportedSince(row.cleaned_at, since)) return { done: false };
    const failed = row.cleaning?.failed;
    return failed ? { failed: `the deploy ramdisk could not clean the disks: ${failed}` } : { done: true };
  }
  const purpose = PURPOSE_OF_WORKFLOW[workflow.kind];
  if (check !== 'ramdisk-entry' || !purpose) return { failed: `unknown check ${String(check)}` };
  // No MAC yet: enrolled by its UUID only, it waits for metal confirm-mac.
  if (row.macs.length === 0) return { done: false };
  const agents = await siteAgentsOf(context.db, row.tenant_id, row.site_id);
  for (const command of await recentCommandsOfKind(context.db, agents, BOOT_ENTRIES_KIND, since)) {
    if (!bootsRamdisk(command.payload, row.macs, purpose)) continue;
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
 * The machine a ramdisk report from site agent `agentNodeId` is for, locked: of the agent's own
 * site, holding `mac`, in the state `purpose` boots the ramdisk in, with a workflow, and enrolled
 * with the SMBIOS UUID the report names; else why not.
 */
async function reportingMachine(
  trx: Kysely<ComputeTables>,
  agentNodeId: string,
  report: { mac: string; purpose: RamdiskPurpose; systemUuid: string | null },
): Promise<{ row: MachineRow & { workflow_id: string }; mac: string } | { refused: string }> {
  const mac = normalizeMac(report.mac);
  if (!mac) return { refused: 'the MAC is not a network card’s' };
  const site = await siteOfSiteAgent(trx, agentNodeId);
  if (!site) return { refused: 'the node is not a site agent' };
  const row = await metalDb(trx)
    .selectFrom('compute.metal_machines')
    .selectAll()
    .where('tenant_id', '=', site.tenantId)
    .where('site_id', '=', site.siteId)
    .where(sql<boolean>`${mac} = any(macs)`)
    .orderBy('id')
    .forUpdate()
    .executeTakeFirst();
  if (!row) return { refused: `no machine of the agent’s site has the MAC ${mac}` };
  const state = STATE_OF_PURPOSE[report.purpose];
  if (row.provision_state !== state || !row.workflow_id)
    return { refused: `machine ${row.id} is ${row.provision_state}, not ${state}` };
  if (report.systemUuid !== null && report.systemUuid !== row.product_uuid)
    return {
      refused: `the machine on MAC ${mac} reports system UUID ${report.systemUuid}, and machine ${row.id} was enrolled with ${row.product_uuid}`,
    };
  return { row: row as MachineRow & { workflow_id: string }, mac };
}

/** What a report stores on its machine (besides version and updated_at), and its event. */
interface ReportFindings {
  columns: { inventory: string; inspected_at: Date } | { cleaning: string; cleaned_at: Date };
  event: { type: 'metal.inspected' | 'metal.cleaned'; data: Record<string, unknown> };
}

/**
 * A ramdisk's report, relayed by the site agent `agentNodeId`: its findings stored on the machine
 * it belongs to, with its event, and the machine's workflow woken, in one transaction; or refused,
 * changing nothing, with the reason the gateway logs and answers.
 */
function recordReport(
  db: Kysely<ComputeTables>,
  agentNodeId: string,
  report: { mac: string; purpose: RamdiskPurpose; systemUuid: string | null },
  at: Date,
  findings: ReportFindings,
): Promise<ReportOutcome> {
  return db.transaction().execute(async (trx): Promise<ReportOutcome> => {
    const found = await reportingMachine(trx, agentNodeId, report);
    if ('refused' in found) return { outcome: 'refused', reason: found.refused };
    const { row, mac } = found;
    await metalDb(trx)
      .updateTable('compute.metal_machines')
      .set({ ...findings.columns, version: row.version + 1, updated_at: at })
      .where('id', '=', row.id)
      .execute();
    await writeEvents(
      trx,
      [
        {
          type: findings.event.type,
          tenantId: row.tenant_id,
          subject: { type: 'machine', id: row.id },
          data: { workflowId: row.workflow_id, mac, ...findings.event.data },
        },
      ],
      { tenantId: row.tenant_id, actor: null, requestId: `metal-${report.purpose}:${row.id}` },
    );
    await wakeWorkflow(trx, row.workflow_id, at);
    return { outcome: 'recorded', machineId: row.id };
  });
}

/** An inspection's report (metal inspect): the machine's inventory, and when. */
export function recordInspection(
  db: Kysely<ComputeTables>,
  agentNodeId: string,
  report: { mac: string; inventory: MetalInventory },
  at: Date,
): Promise<ReportOutcome> {
  const { inventory } = report;
  return recordReport(
    db,
    agentNodeId,
    { mac: report.mac, purpose: 'inspect', systemUuid: inventory.systemUuid },
    at,
    {
      columns: { inventory: JSON.stringify(inventory), inspected_at: at },
      event: {
        type: 'metal.inspected',
        data: {
          cpus: inventory.cpu.count,
          memoryMiB: inventory.memory.physicalMiB,
          disks: inventory.disks.length,
          nics: inventory.nics.length,
        },
      },
    },
  );
}

/** A cleaning's report (provide): what was erased on each disk, or why cleaning stopped. */
export function recordCleaning(
  db: Kysely<ComputeTables>,
  agentNodeId: string,
  report: { mac: string; cleaning: MetalCleaning },
  at: Date,
): Promise<ReportOutcome> {
  const { cleaning } = report;
  return recordReport(
    db,
    agentNodeId,
    { mac: report.mac, purpose: 'clean', systemUuid: cleaning.systemUuid },
    at,
    {
      columns: { cleaning: JSON.stringify(cleaning), cleaned_at: at },
      event: {
        type: 'metal.cleaned',
        data: {
          disks: cleaning.disks.length,
          erasedBytes: cleaning.disks.reduce((sum, disk) => sum + disk.erasedBytes, 0),
          ...(cleaning.failed ? { failed: cleaning.failed } : {}),
        },
      },
    },
  );
}

/** Queued when a site agent's metal.boot-entries ends: wakes the workflows waiting for its ramdisk entries. */
export const BOOT_ENTRIES_ENDED_JOB = 'metal.boot-entries-ended';

/**
 * A site agent applied (or failed to apply) boot entries: each machine whose MAC it was told to
 * boot into the ramdisk has its workflow looked at now rather than at its next check, so the
 * workflow goes on as soon as the entry is in place.
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
    .where('provision_state', 'in', Object.keys(RAMDISK_STATES) as MetalState[])
    .where(sql<boolean>`macs && ${sql.val(macs)}::text[]`)
    .execute();
  for (const { workflow_id } of waiting)
    if (workflow_id) await wakeWorkflow(context.db, workflow_id, context.now());
}

registerCommandEndJob(BOOT_ENTRIES_KIND, BOOT_ENTRIES_ENDED_JOB);
