/**
 * Where a machine's workflow lands it, in the transaction that ends the workflow: a verb's
 * workflow (metal.verify, metal.inspect, metal.clean) moves the machine from its transient state to the table's
 * `to` on success and its `failed` state on failure or abort; a power workflow records the BMC's
 * answer. A workflow that is no longer the machine's own (a later one replaced it) changes nothing.
 *
 * A batch's member (a held metal.bmc the approvers released, with no workflow) records its answer
 * the same way (recordPower), from the job the commands module queues when it ends.
 */
import { type MetalVerb, transitionOf } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { commandResult, endedCommand } from '../commands/queries.js';
import { registerCommandEndJob } from '../commands/service.js';
import type { EventDraft, JobContext } from '../define-module.js';
import { registerWorkflowHooks, type WorkflowHookContext } from '../workflows/hooks.js';
import { pushBootEntries } from './boot-entries.js';
import { ramdiskCheck, RAMDISK_STATES } from './ramdisk.js';
import { type MachineRow, metalDb } from './tables.js';

const METAL_WORKFLOW_KINDS = ['metal.verify', 'metal.inspect', 'metal.clean', 'metal.power'] as const;
/** Queued when a workflow-less metal.bmc (a batch's member) ends: records its power answer. */
export const METAL_MEMBER_ENDED_JOB = 'metal.bmc-member-ended';

const powerOf = (result: Record<string, unknown> | null | undefined): 'on' | 'off' | null => {
  const power = result?.powerState;
  return power === 'on' || power === 'off' ? power : null;
};

/** The power state the last command step's result reported, if it did. */
async function reportedPower(context: WorkflowHookContext): Promise<'on' | 'off' | null> {
  const commandId = [...context.steps].reverse().find((s) => s.commandId)?.commandId;
  if (!commandId) return null;
  return powerOf(await commandResult(context.db, commandId));
}

type PowerAction = 'on' | 'off' | 'reset' | 'status';

/**
 * Records a power call's answer on the locked machine, and answers its metal.powered event: a
 * change the BMC accepted says what was asked, status says what the BMC answered, and a failure
 * keeps the power state and sets lastError. The one writer of power_state after a power command,
 * whether the command ran in a metal.power workflow or as a batch's member.
 */
async function recordPower(
  db: Kysely<ComputeTables>,
  row: MachineRow,
  answer: {
    action: PowerAction;
    reported: 'on' | 'off' | null;
    error: string | null;
    now: Date;
    workflowId: string | null;
    batch?: { batchId: string; commandId: string };
  },
): Promise<EventDraft> {
  const { action, reported, error } = answer;
  const powerState =
    reported ??
    (error ? row.power_state : action === 'off' ? 'off' : action === 'status' ? row.power_state : 'on');
  await metalDb(db)
    .updateTable('compute.metal_machines')
    .set({ power_state: powerState, last_error: error, version: row.version + 1, updated_at: answer.now })
    .where('id', '=', row.id)
    .execute();
  return {
    type: 'metal.powered',
    tenantId: row.tenant_id,
    subject: { type: 'machine', id: row.id },
    data: {
      action,
      powerState,
      workflowId: answer.workflowId,
      ...(answer.batch ?? {}),
      ...(error ? { error } : {}),
    },
  };
}

async function land(context: WorkflowHookContext, error: string | null): Promise<void> {
  const { workflow, now } = context;
  const machineId = String(workflow.input.machineId ?? '');
  const db = metalDb(context.db);
  const row = await db
    .selectFrom('compute.metal_machines')
    .selectAll()
    .where('id', '=', machineId)
    .forUpdate()
    .executeTakeFirst();
  if (!row || row.workflow_id !== workflow.id) return;
  const power = error ? null : await reportedPower(context);
  if (workflow.kind === 'metal.power') {
    context.emit(
      await recordPower(context.db, row, {
        action: String(workflow.input.action) as PowerAction,
        reported: power,
        error,
        now,
        workflowId: workflow.id,
      }),
    );
    return;
  }
  const verb = String(workflow.input.verb) as MetalVerb;
  const rule = transitionOf(verb);
  if (row.provision_state !== rule.via) return;
  const to = error ? rule.failed! : rule.to;
  await db
    .updateTable('compute.metal_machines')
    .set({
      provision_state: to,
      target_state: null,
      ...(power ? { power_state: power } : {}),
      last_error: error,
      version: row.version + 1,
      updated_at: now,
      state_changed_at: now,
    })
    .where('id', '=', row.id)
    .execute();
  context.emit({
    type: 'metal.state-changed',
    tenantId: row.tenant_id,
    subject: { type: 'machine', id: row.id },
    data: { verb, from: row.provision_state, to, workflowId: workflow.id, ...(error ? { error } : {}) },
  });
  // Out of inspecting or cleaning, its MACs boot from the disk again.
  if (RAMDISK_STATES[row.provision_state])
    await pushBootEntries(context.db, row.tenant_id, row.site_id, now, (event) => context.emit(event));
}

registerWorkflowHooks(METAL_WORKFLOW_KINDS, {
  check: ramdiskCheck,
  succeeded: (context) => land(context, null),
  failed: (context, error) => land(context, error.slice(0, 1000)),
});

/**
 * A batch's member ended: the power action the approvers released reached the BMC (or failed), and
 * the machine's powerState follows as after a direct call. Cancelled members (a batch cancelled or
 * expired) never reached the BMC and change nothing.
 */
export async function memberEnded(context: JobContext): Promise<void> {
  const commandId = String(context.payload.commandId ?? '');
  await context.db.transaction().execute(async (trx) => {
    const command = await endedCommand(trx, commandId);
    if (!command || command.kind !== 'metal.bmc' || command.state === 'cancelled') return;
    const payload = command.payload as { machineId?: unknown; action?: unknown };
    const row = await metalDb(trx)
      .selectFrom('compute.metal_machines')
      .selectAll()
      .where('id', '=', String(payload.machineId ?? ''))
      .where('tenant_id', '=', command.tenant_id)
      .forUpdate()
      .executeTakeFirst();
    if (!row) return;
    const failed = command.state === 'failed';
    const event = await recordPower(trx, row, {
      action: String(payload.action) as PowerAction,
      reported: failed ? null : powerOf(command.result),
      error: failed
        ? `command ${command.id} failed: ${command.error ?? 'no reason given'}`.slice(0, 1000)
        : null,
      now: context.now(),
      workflowId: null,
      ...(command.batch_id ? { batch: { batchId: command.batch_id, commandId: command.id } } : {}),
    });
    await writeEvents(trx, [event], {
      tenantId: row.tenant_id,
      actor: null,
      requestId: `metal-member:${command.id}`,
    });
  });
}

registerCommandEndJob('metal.bmc', METAL_MEMBER_ENDED_JOB);
