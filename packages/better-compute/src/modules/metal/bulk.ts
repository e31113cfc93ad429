/**
 * `metal.bulk`: one verb on many machines, as one call (docs/decisions/metal-bulk.md). Every
 * machine is locked and checked first, with the same checks the one-machine methods make, and any
 * refusal names every machine refused and why, before anything is created. Then, in the same
 * transaction, either the destructive verbs (power-off, power-reset) become one batch of
 * metal.bmc-power leaves for the approvers, while the quorum is on; or each machine runs the verb
 * as its own method would (verbOn, abortOn, powerOn). Nothing is half-created: one transaction.
 */
import { ComputeError, type ScopeLeaf } from '@better-compute/core';
import {
  type batchSchema,
  METAL_BULK_DESTRUCTIVE,
  type METAL_BULK_VERBS,
} from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { readySiteAgent } from '../fleet/queries.js';
import {
  abortOn,
  bmcPowerLeaf,
  type MachineCall,
  type PowerAction,
  powerOn,
  powerRefusal,
  runningWorkflowRefusal,
  verbOn,
  type WorkflowVerb,
  verbRefusal,
} from './service.js';
import { type MachineRow, metalDb } from './tables.js';

export type BulkVerb = (typeof METAL_BULK_VERBS)[number];
/** The bulk verbs that are verbs of the transition table (or abort), not power actions. */
type TableVerb = Exclude<BulkVerb, `power-${string}`>;

/**
 * Creates a batch from leaves in the caller's transaction, as commandBatches.create does (the
 * batches module's createBatch, given to this module by compute.ts so the two modules do not import
 * each other): each metal.bmc-power leaf is checked there by bmcPowerMember, as any batch's is.
 */
export type ProposeBatch = (
  ctx: CallContext<unknown>,
  batch: { reason: string; hours: number; leaves: ScopeLeaf[] },
) => Promise<z.input<typeof batchSchema>>;

interface BulkInput {
  verb: BulkVerb;
  machineIds: string[];
  reason: string;
  hours: number;
}

/** How many refused machines a message names before "and N more" (details name them all). */
const NAMED_IN_MESSAGE = 10;

const powerActionOf = (verb: BulkVerb): PowerAction | null =>
  verb.startsWith('power-') ? (verb.slice('power-'.length) as PowerAction) : null;

export const isDestructive = (verb: BulkVerb): boolean =>
  (METAL_BULK_DESTRUCTIVE as readonly string[]).includes(verb);

/** The ids once each, in the order first given. */
export const dedupe = (ids: readonly string[]): string[] => [...new Set(ids)];

function listed(ids: readonly string[]): string {
  const named = ids.slice(0, NAMED_IN_MESSAGE).join(', ');
  return ids.length > NAMED_IN_MESSAGE ? `${named} and ${ids.length - NAMED_IN_MESSAGE} more` : named;
}

/** Every machine of the tenant among `ids`, locked in id order (so two bulk calls never deadlock). */
async function lockedMachines(db: Kysely<ComputeTables>, tenantId: string, ids: readonly string[]) {
  const rows = await metalDb(db)
    .selectFrom('compute.metal_machines')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', ids)
    .orderBy('id')
    .forUpdate()
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

/** Why the verb may not run on the machine, by the one-machine method's own checks; null when it may. */
async function refusalOf(
  db: Kysely<ComputeTables>,
  row: MachineRow,
  verb: BulkVerb,
  batched: boolean,
): Promise<ComputeError | null> {
  if (powerActionOf(verb) === null) return verbRefusal(verb as TableVerb, row);
  // A batch's member runs once approved, so a workflow running now does not stop it (bmcPowerMember).
  return powerRefusal(row) ?? (batched ? null : await runningWorkflowRefusal(db, row));
}

/** The site agent of each site the machines are at that the verb needs; a site with none is named. */
async function agentsOf(db: Kysely<ComputeTables>, tenantId: string, rows: readonly MachineRow[]) {
  const agents = new Map<string, string | null>();
  for (const siteId of new Set(rows.map((row) => row.site_id)))
    agents.set(siteId, await readySiteAgent(db, tenantId, siteId));
  return agents;
}

/** Verbs that reach the BMC through the site agent; retire, recover and abort do not. */
const needsAgent = (verb: BulkVerb) =>
  verb === 'manage' || verb === 'inspect' || verb === 'provide' || verb.startsWith('power-');

export function bulkMachines(quorumOn: () => Promise<boolean>, proposeBatch: ProposeBatch | undefined) {
  return async (ctx: CallContext<BulkInput & { idempotencyKey?: string | undefined }>) => {
    const { verb, reason, hours } = ctx.input;
    const machineIds = dedupe(ctx.input.machineIds);
    const batched = isDestructive(verb) && (await quorumOn());
    const rows = await lockedMachines(ctx.db, ctx.tenantId, machineIds);

    // Another tenant's machine reads as absent, as every read of a machine answers it.
    const unknown = machineIds.filter((id) => !rows.has(id));
    if (unknown.length)
      throw new ComputeError(
        'NOT_FOUND',
        unknown.length === 1
          ? `machine ${unknown[0]} does not exist`
          : `${unknown.length} machines do not exist: ${listed(unknown)}`,
        {
          details: { field: 'machineIds', ids: unknown },
          hint: 'Nothing was done. List the machines you can see with better-compute metal list, and leave the others out.',
        },
      );

    const ordered = machineIds.map((id) => rows.get(id)!);
    const refused: { id: string; code: string; message: string }[] = [];
    for (const row of ordered) {
      const refusal = await refusalOf(ctx.db, row, verb, batched);
      if (refusal) refused.push({ id: row.id, code: refusal.code, message: refusal.message });
    }
    const agents = needsAgent(verb)
      ? await agentsOf(ctx.db, ctx.tenantId, ordered)
      : new Map<string, string | null>();
    for (const row of ordered)
      if (
        agents.has(row.site_id) &&
        agents.get(row.site_id) === null &&
        !refused.some((r) => r.id === row.id)
      )
        refused.push({
          id: row.id,
          code: 'INVALID_STATE',
          message: `site ${row.site_id} has no ready site agent to reach the BMC of machine ${row.id}`,
        });
    if (refused.length) {
      // CONFLICT only when every refusal is a running workflow: waiting then is the whole answer.
      const code = refused.every((r) => r.code === 'CONFLICT') ? 'CONFLICT' : 'INVALID_STATE';
      throw new ComputeError(
        code,
        `${refused.length} of ${ordered.length} machines cannot ${verb}: ${refused
          .slice(0, NAMED_IN_MESSAGE)
          .map((r) => r.message)
          .join(
            '; ',
          )}${refused.length > NAMED_IN_MESSAGE ? `; and ${refused.length - NAMED_IN_MESSAGE} more` : ''}`,
        {
          details: { field: 'machineIds', verb, refused },
          hint: 'Nothing was done. Leave those machines out, or bring them to a state the verb allows (better-compute metal get ID lists what each allows).',
        },
      );
    }

    if (batched) {
      if (!proposeBatch)
        throw new ComputeError('UNSUPPORTED', 'this deployment cannot create batches from metal bulk', {
          hint: 'Propose the leaves with better-compute batch create --scope FILE.',
        });
      const action = powerActionOf(verb) as 'off' | 'reset';
      const leaves = ordered.map((row) => bmcPowerLeaf(row, action, agents.get(row.site_id)!));
      const batch = await proposeBatch(ctx, { reason, hours, leaves });
      return { verb, mode: 'batch' as const, machineIds, batch, machines: [] };
    }

    const machines = [];
    for (const row of ordered) {
      const one: MachineCall = { ...ctx, input: { machineId: row.id, reason } };
      const action = powerActionOf(verb);
      if (action) machines.push(await powerOn(one, row, action, quorumOn));
      else if (verb === 'abort') machines.push(await abortOn(one, row));
      else machines.push(await verbOn(one, row, verb as WorkflowVerb, quorumOn));
    }
    return { verb, mode: 'direct' as const, machineIds, batch: null, machines };
  };
}
