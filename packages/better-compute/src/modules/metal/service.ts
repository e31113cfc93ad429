/**
 * The metal module's methods: enroll, read, and every verb of core's transition table. Each verb
 * locks the machine's row, asks the table (nextState) whether it may run, and either ends at once
 * or starts its workflow on the site's agent and holds the transient state until the workflow's
 * hook (workflows.ts) moves it on. One transaction per call: a refusal changes nothing.
 */
import {
  allowedVerbs,
  BMC_POWER_KIND,
  bmcEndpoint,
  ComputeError,
  type LeafPayload,
  type MetalState,
  type MetalVerb,
  newId,
  normalizeMac,
  nextState,
  POWER_FROM,
  transitionOf,
  TRANSITIONS,
} from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { isSiteAgentOf, readySiteAgent, tenantHasSite } from '../fleet/queries.js';
import { abortWorkflowFor, commandStep, startNodeWorkflow, workflowStateOf } from '../workflows/service.js';
import { pushBootEntries, siteRunsProvisioningNetwork } from './boot-entries.js';
import type { BmcSealer } from './sealing.js';
import { BMC_STEP, bmcOf, bmcPayload, RAMDISK_VERBS, workflowFor } from './verb-workflows.js';
import { type MachineRow, metalDb } from './tables.js';

const iso = (value: Date | string) => new Date(value).toISOString();

export function machineView(row: MachineRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    siteId: row.site_id,
    name: row.name,
    provisionState: row.provision_state,
    targetState: row.target_state,
    powerState: row.power_state,
    bmc: { ...bmcOf(row), passwordSet: true as const },
    productUuid: row.product_uuid,
    macs: row.macs,
    inventory: row.inventory,
    inspectedAt: row.inspected_at === null ? null : iso(row.inspected_at),
    cleaning: row.cleaning,
    cleanedAt: row.cleaned_at === null ? null : iso(row.cleaned_at),
    workflowId: row.workflow_id,
    lastError: row.last_error,
    allowed: allowedVerbs(row.provision_state),
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    stateChangedAt: iso(row.state_changed_at),
  };
}

function notFound(id: string) {
  return new ComputeError('NOT_FOUND', `machine ${id} does not exist`, {
    details: { id },
    hint: 'List the machines you can see with better-compute metal list.',
  });
}

/** The machine of the tenant, locked for the call's transaction when `forUpdate`. */
async function ownedMachine(db: Kysely<ComputeTables>, tenantId: string, id: string, forUpdate: boolean) {
  let query = metalDb(db)
    .selectFrom('compute.metal_machines')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound(id);
  return row;
}

/** INVALID_STATE naming the state the machine is in and the states the verb needs. */
function notAllowed(row: MachineRow, verb: MetalVerb | 'abort' | 'power', from: readonly MetalState[]) {
  return new ComputeError(
    'INVALID_STATE',
    `machine ${row.id} is ${row.provision_state}; ${verb} needs ${from.length ? from.join(', ') : 'a transition that can be interrupted'}`,
    {
      details: { state: row.provision_state, verb, allowedFrom: [...from] },
      hint: `From ${row.provision_state} it allows: ${allowedVerbs(row.provision_state).join(', ') || 'nothing'} (better-compute metal get ${row.id}).`,
    },
  );
}

/**
 * The site's agent that runs the machine's BMC commands: a ready node joined with a site token in
 * a pool of the machine's site, the one heard from last. None is INVALID_STATE with what to do.
 */
async function siteAgent(db: Kysely<ComputeTables>, tenantId: string, siteId: string): Promise<string> {
  const agent = await readySiteAgent(db, tenantId, siteId);
  if (!agent)
    throw new ComputeError('INVALID_STATE', `site ${siteId} has no ready site agent to reach the BMC`, {
      details: { siteId, reason: 'no-site-agent' },
      hint: 'Mint a site token (better-compute site-tokens create --pool POOL) for a pool of the site, and run bcd join with it on a machine that reaches the BMCs.',
    });
  return agent;
}

/** The metal.bmc-power leaf that powers `row` off or resets it through the site agent `runner`. */
export function bmcPowerLeaf(row: MachineRow, action: 'off' | 'reset', runner: string) {
  return {
    subject: row.id,
    kind: BMC_POWER_KIND,
    payload: { action, runner, bmc: bmcEndpoint(bmcPayload(row, action).bmc) },
  };
}

/** Why `power` may not run on the machine in its provision state, or null when it may. */
export function powerRefusal(row: MachineRow): ComputeError | null {
  return POWER_FROM.includes(row.provision_state) ? null : notAllowed(row, 'power', POWER_FROM);
}

/**
 * CONFLICT when the machine's own workflow still runs: a power call waits for it rather than
 * racing its BMC commands. Null when none runs.
 */
export async function runningWorkflowRefusal(
  db: Kysely<ComputeTables>,
  row: MachineRow,
): Promise<ComputeError | null> {
  if (!row.workflow_id || (await workflowStateOf(db, row.workflow_id)) !== 'running') return null;
  return new ComputeError('CONFLICT', `machine ${row.id} has workflow ${row.workflow_id} running`, {
    details: { workflowId: row.workflow_id },
    hint: `Wait for it (better-compute workflows get ${row.workflow_id}), then try again.`,
  });
}

/** Why `verb` (a verb of the table, or abort) may not run on the machine now, or null when it may. */
export function verbRefusal(verb: MetalVerb | 'abort', row: MachineRow): ComputeError | null {
  if (verb === 'abort')
    return nextState('abort', row.provision_state) && row.workflow_id
      ? null
      : notAllowed(
          row,
          'abort',
          TRANSITIONS.filter((t) => t.slice && t.abortable).map((t) => t.via!),
        );
  return nextState(verb, row.provision_state) ? null : notAllowed(row, verb, transitionOf(verb).from);
}

/**
 * A batch's metal.bmc-power leaf, checked against the machine it names, and the member command
 * that carries it out: a metal.bmc on the runner the leaf names, held until the batch is approved.
 * The machine is the tenant's and in a state power allows; the runner is a site agent of the
 * machine's site (the only node the gateway opens the BMC password for); the BMC is the one the
 * machine is enrolled with, so what approvers sign is what the agent will address. Each refusal
 * names the leaf and what it should hold. docs/decisions/metal-power-quorum.md.
 */
export async function bmcPowerMember(
  db: Kysely<ComputeTables>,
  tenantId: string,
  leaf: { subject: string; payload: LeafPayload },
  index: number,
): Promise<{ nodeId: string; kind: 'metal.bmc'; payload: Record<string, unknown> }> {
  const row = await ownedMachine(db, tenantId, leaf.subject, false);
  const refusal = powerRefusal(row);
  if (refusal) throw refusal;
  const action = leaf.payload.action as 'off' | 'reset';
  const runner = leaf.payload.runner!;
  if (!(await isSiteAgentOf(db, runner, tenantId, row.site_id)))
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `leaf ${index}: ${runner} is not a site agent of site ${row.site_id}, where machine ${row.id} is`,
      {
        details: { field: `leaves.${index}.payload.runner` },
        hint: `Name a site agent of the machine's site; better-compute metal power ${action} ${row.id} refuses with the leaf to propose.`,
      },
    );
  const payload = bmcPayload(row, action);
  const bmc = bmcEndpoint(payload.bmc);
  if (leaf.payload.bmc !== bmc)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `leaf ${index}: machine ${row.id}'s BMC is ${bmc}, not the ${leaf.payload.bmc} the leaf names`,
      {
        details: { field: `leaves.${index}.payload.bmc` },
        hint: `Put "bmc": ${JSON.stringify(bmc)} in the leaf.`,
      },
    );
  return { nodeId: runner, kind: 'metal.bmc', payload };
}

/** A fingerprint as stored and pinned: colon-separated upper-case hex, whatever form it was given in. */
function fingerprintOf(given: string | undefined): string | null {
  if (given === undefined) return null;
  const hex = given
    .replace(/^sha256[:/]/i, '')
    .replace(/:/g, '')
    .toUpperCase();
  return hex.match(/../g)!.join(':');
}

export function enrollMachine(sealer: BmcSealer) {
  return async (
    ctx: CallContext<{
      siteId: string;
      name: string;
      bmcDriver: 'ipmi' | 'redfish';
      bmcAddress: string;
      bmcPort?: number | undefined;
      bmcUser: string;
      bmcPassword: string;
      bmcTlsFingerprint?: string | undefined;
      productUuid: string;
      macs?: string[] | undefined;
    }>,
  ) => {
    const db = metalDb(ctx.db);
    const { input } = ctx;
    // Another tenant's site is not found, as every read of a site answers it.
    if (!(await tenantHasSite(ctx.db, ctx.tenantId, input.siteId)))
      throw new ComputeError('NOT_FOUND', `site ${input.siteId} does not exist`, {
        details: { id: input.siteId, field: 'siteId' },
        hint: 'List your sites with better-compute sites list.',
      });
    const macs = [...new Set((input.macs ?? []).map((mac) => normalizeMac(mac)!))].sort();
    const uuid = input.productUuid.toLowerCase();
    const clash = await db
      .selectFrom('compute.metal_machines')
      .select(['id', 'name', 'product_uuid'])
      .where('tenant_id', '=', ctx.tenantId)
      .where((eb) => eb.or([eb('name', '=', input.name), eb('product_uuid', '=', uuid)]))
      .executeTakeFirst();
    if (clash)
      throw new ComputeError(
        'ALREADY_EXISTS',
        clash.name === input.name
          ? `a machine named ${input.name} is enrolled already (${clash.id})`
          : `the machine with product UUID ${uuid} is enrolled already as ${clash.id}`,
        {
          details: { id: clash.id, field: clash.name === input.name ? 'name' : 'productUuid' },
          hint: `See it with better-compute metal get ${clash.id}.`,
        },
      );
    const id = newId('node');
    const now = ctx.now();
    const row = await db
      .insertInto('compute.metal_machines')
      .values({
        id,
        tenant_id: ctx.tenantId,
        site_id: input.siteId,
        name: input.name,
        provision_state: 'enroll',
        target_state: null,
        power_state: 'unknown',
        bmc_driver: input.bmcDriver,
        bmc_address: input.bmcAddress,
        bmc_port: input.bmcPort ?? null,
        bmc_user: input.bmcUser,
        bmc_tls_fingerprint: fingerprintOf(input.bmcTlsFingerprint),
        bmc_password_sealed: sealer.seal(input.bmcPassword, ctx.tenantId, id),
        product_uuid: uuid,
        macs,
        workflow_id: null,
        last_error: null,
        version: 1,
        created_at: now,
        updated_at: now,
        state_changed_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    // Known MACs are answered by the site's provisioning network at once, as confirmed ones are.
    if (macs.length > 0)
      await pushBootEntries(ctx.db, ctx.tenantId, input.siteId, now, (event) => ctx.emit(event));
    ctx.emit({
      type: 'metal.enrolled',
      subject: { type: 'machine', id },
      data: {
        siteId: input.siteId,
        name: input.name,
        bmcDriver: input.bmcDriver,
        bmcAddress: input.bmcAddress,
        provisionState: 'enroll',
      },
    });
    return machineView(row);
  };
}

export async function listMachines(
  ctx: CallContext<{
    siteId?: string | undefined;
    provisionState?: MetalState | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  let query = metalDb(ctx.db)
    .selectFrom('compute.metal_machines')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.siteId) query = query.where('site_id', '=', ctx.input.siteId);
  if (ctx.input.provisionState) query = query.where('provision_state', '=', ctx.input.provisionState);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  const more = rows.length > ctx.input.limit;
  const page = more ? rows.slice(0, ctx.input.limit) : rows;
  return { items: page.map(machineView), nextCursor: more ? page[page.length - 1]!.id : null };
}

export async function getMachine(ctx: CallContext<{ machineId: string }>) {
  return machineView(await ownedMachine(ctx.db, ctx.tenantId, ctx.input.machineId, false));
}

/** Moves the locked machine to `to`, with its event; the one writer of provision_state outside hooks. */
async function moveTo(
  ctx: CallContext<{ machineId: string; reason?: string | undefined }>,
  row: MachineRow,
  verb: MetalVerb | 'abort',
  to: MetalState,
  set: { target_state: MetalState | null; workflow_id?: string | null; last_error?: string | null },
) {
  const now = ctx.now();
  const updated = await metalDb(ctx.db)
    .updateTable('compute.metal_machines')
    .set({
      provision_state: to,
      ...set,
      version: row.version + 1,
      updated_at: now,
      state_changed_at: now,
    })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'metal.state-changed',
    subject: { type: 'machine', id: row.id },
    data: {
      verb,
      from: row.provision_state,
      to,
      workflowId: updated.workflow_id,
      ...(ctx.input.reason ? { reason: ctx.input.reason } : {}),
    },
  });
  return machineView(updated);
}

/** The call's context for one machine of a call (bulk's), with that machine and the reason. */
export type MachineCall = CallContext<{ machineId: string; reason?: string | undefined }>;

/**
 * A verb of the table on the locked machine `row`: at once, or by its workflow on the site's
 * agent. Refused (changing nothing) when the table does not allow it from the machine's state.
 */
export async function verbOn(
  ctx: MachineCall,
  row: MachineRow,
  verb: WorkflowVerb,
  quorumOn: () => Promise<boolean>,
) {
  // A power call still running (its workflow holds the machine) is waited for, as power waits for a verb's.
  const refusal = verbRefusal(verb, row) ?? (await runningWorkflowRefusal(ctx.db, row));
  if (refusal) throw refusal;
  const rule = transitionOf(verb);
  const to = nextState(verb, row.provision_state)!;
  const workflow = workflowFor(verb, row);
  // retire and recover end at once (recover where RECOVERS_TO names, which nextState read).
  if (!workflow) return moveTo(ctx, row, verb, to, { target_state: null, last_error: null });
  const agent = await siteAgent(ctx.db, ctx.tenantId, row.site_id);
  const ramdisk = RAMDISK_VERBS.includes(verb);
  if (ramdisk && !(await siteRunsProvisioningNetwork(ctx.db, ctx.tenantId, row.site_id)))
    throw new ComputeError(
      'INVALID_STATE',
      `no site agent of site ${row.site_id} runs the provisioning network the deploy ramdisk boots from`,
      {
        details: { siteId: row.site_id, reason: 'no-provisioning-network' },
        hint: `Run bcd on a site agent with --pxe-dir DIR --ramdisk-dir DIR (docs/metal.md), then ${verb} again.`,
      },
    );
  // The workflow powers the machine off first; under the quorum only an approved batch may, unless
  // it is off already (the agent powers an off machine off without one). Refused before anything starts.
  if (ramdisk && row.power_state !== 'off' && (await quorumOn())) {
    const leaf = bmcPowerLeaf(row, 'off', agent);
    throw new ComputeError(
      'INVALID_STATE',
      `${verb} of machine ${row.id} powers it off first, and its power is ${row.power_state}: while the destructive-batch quorum is on, power it off through an approved batch first`,
      {
        details: { reason: 'quorum', action: 'off', leaf },
        hint: `Propose the power off: better-compute metal bulk --verb power-off --nodes ${row.id} --reason …; once approvers signed and it is off, run ${verb} again (docs/decisions/metal-power-quorum.md).`,
      },
    );
  }
  const workflowId = await startNodeWorkflow(
    { db: ctx.db, emit: (event) => ctx.emit(event), now: ctx.now() },
    {
      nodeId: agent,
      kind: workflow.kind,
      steps: workflow.steps,
      input: { machineId: row.id, verb },
      reason: ctx.input.reason ?? `metal ${verb} ${row.id}`,
    },
  );
  const moved = await moveTo(ctx, row, verb, to, {
    target_state: rule.to,
    workflow_id: workflowId,
    last_error: null,
  });
  // The machine's boot entry follows its state: inspecting and cleaning boot the ramdisk (siteBootEntries).
  if (ramdisk)
    await pushBootEntries(ctx.db, ctx.tenantId, row.site_id, ctx.now(), (event) => ctx.emit(event));
  return moved;
}

/** The verbs a call runs on one machine (abort and power have their own). */
export type WorkflowVerb = 'manage' | 'inspect' | 'provide' | 'retire' | 'recover';

/** A verb of the table on one machine: at once, or by its workflow on the site's agent. */
export function runVerb(verb: WorkflowVerb, quorumOn: () => Promise<boolean>) {
  return async (ctx: MachineCall) =>
    verbOn(ctx, await ownedMachine(ctx.db, ctx.tenantId, ctx.input.machineId, true), verb, quorumOn);
}

/** abort on the locked machine: only from a transient state the table marks abortable. */
export async function abortOn(ctx: MachineCall, row: MachineRow) {
  const refusal = verbRefusal('abort', row);
  if (refusal) throw refusal;
  const now = ctx.now();
  // The workflow's failed hook moves the machine to the failure state, with its event.
  await abortWorkflowFor(
    { db: ctx.db, emit: (event) => ctx.emit(event), now },
    row.workflow_id!,
    `aborted${ctx.input.reason ? `: ${ctx.input.reason}` : ''}`,
  );
  return machineView(await ownedMachine(ctx.db, ctx.tenantId, row.id, false));
}

/** abort: only from a transient state the table marks abortable; the workflow's hook lands it. */
export async function abortMachine(ctx: MachineCall) {
  return abortOn(ctx, await ownedMachine(ctx.db, ctx.tenantId, ctx.input.machineId, true));
}

export type PowerAction = 'on' | 'off' | 'reset' | 'status';

/**
 * power on the locked machine: a metal.power workflow on the site's agent, which asks the BMC; the
 * provision state does not change, and the answer lands in powerState. While the destructive-batch
 * quorum is on, off and reset are not sent by a single person's call.
 */
export async function powerOn(
  ctx: MachineCall,
  row: MachineRow,
  action: PowerAction,
  quorumOn: () => Promise<boolean>,
) {
  const refusal = powerRefusal(row) ?? (await runningWorkflowRefusal(ctx.db, row));
  if (refusal) throw refusal;
  const agent = await siteAgent(ctx.db, ctx.tenantId, row.site_id);
  if ((action === 'off' || action === 'reset') && (await quorumOn())) {
    // The leaf to propose, exactly: a person's call never sends it, a threshold of approvers does.
    const leaf = bmcPowerLeaf(row, action, agent);
    throw new ComputeError(
      'INVALID_STATE',
      `power ${action} of machine ${row.id} needs an approved batch while the destructive-batch quorum is on`,
      {
        details: { reason: 'quorum', action, leaf },
        hint: `Propose it as a batch: better-compute metal bulk --verb power-${action} --nodes ${row.id} --reason …, or batch create --reason … --scope FILE, FILE holding [${JSON.stringify(leaf)}]; it runs once a threshold of approvers sign (docs/decisions/metal-power-quorum.md).`,
      },
    );
  }
  const now = ctx.now();
  const workflowId = await startNodeWorkflow(
    { db: ctx.db, emit: (event) => ctx.emit(event), now },
    {
      nodeId: agent,
      kind: 'metal.power',
      steps: [commandStep(`power ${action}`, 'metal.bmc', bmcPayload(row, action), BMC_STEP)],
      input: { machineId: row.id, action },
      reason: ctx.input.reason ?? `metal power ${action} ${row.id}`,
    },
  );
  const updated = await metalDb(ctx.db)
    .updateTable('compute.metal_machines')
    .set({ workflow_id: workflowId, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return machineView(updated);
}

/** power on|off|reset|status of one machine (powerOn). */
export function powerMachine(quorumOn: () => Promise<boolean>) {
  return async (
    ctx: CallContext<{
      machineId: string;
      action: PowerAction;
      reason?: string | undefined;
    }>,
  ) =>
    powerOn(
      ctx,
      await ownedMachine(ctx.db, ctx.tenantId, ctx.input.machineId, true),
      ctx.input.action,
      quorumOn,
    );
}
