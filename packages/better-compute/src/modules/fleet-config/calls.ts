/**
 * The calls a plan makes, run with the owning modules' own services (imported from their index.ts,
 * never their tables): each call's input is parsed by its method's own schema, decided by IAM on
 * its method's own action and resource before any runs (`callChecks`), and run in the apply's one
 * transaction with an audit entry of its own (`runCalls`). A refusal anywhere rolls every call back.
 */
import {
  type AuthorizationCheck,
  canonicalJson,
  ComputeError,
  methodAction,
  type ResourceRef,
  toComputeError,
  validatedInput,
} from '@better-compute/core';
import { type FleetCall, methods } from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeAudit } from '../../db/unit-of-work.js';
import type { CallContext } from '../define-module.js';
import {
  archivePool,
  createPool,
  createSite,
  deleteSite,
  offerPool,
  setQuota,
  updatePool,
  updateSite,
} from '../fleet/index.js';
import {
  createProviderAccount,
  credentialChecks,
  deleteAccount,
  updateProviderAccount,
} from '../provider-accounts/index.js';
import { attachChecks, createTemplate, deleteTemplate, updateTemplate } from '../sandboxes/index.js';
import { createFlavor, deleteFlavor, updateFlavor } from '../vps/index.js';

type Service = (ctx: CallContext<never>) => Promise<unknown>;

/** Each method a plan may call, and the service its module binds to it (modules/*\/module.ts). */
const SERVICES = {
  'sites.create': createSite,
  'sites.update': updateSite,
  'sites.delete': deleteSite,
  'pools.create': createPool,
  'pools.update': updatePool,
  'pools.archive': archivePool,
  'pools.offer': (ctx) => offerPool(ctx as never, true),
  'pools.unoffer': (ctx) => offerPool(ctx as never, false),
  'quotas.set': setQuota,
  'flavors.create': createFlavor,
  'flavors.update': updateFlavor,
  'flavors.delete': deleteFlavor,
  'sandboxTemplates.create': createTemplate,
  'sandboxTemplates.update': updateTemplate,
  'sandboxTemplates.delete': deleteTemplate,
  'providerAccounts.create': createProviderAccount,
  'providerAccounts.update': updateProviderAccount,
  'providerAccounts.delete': deleteAccount,
} satisfies Record<string, Service>;

type PlannedMethod = keyof typeof SERVICES;

/** More decisions a method needs on what its input names, as its binding declares them. */
const MORE_CHECKS: Partial<Record<PlannedMethod, typeof attachChecks>> = {
  'sandboxTemplates.create': attachChecks,
  'sandboxTemplates.update': attachChecks,
  'providerAccounts.create': credentialChecks,
  'providerAccounts.update': credentialChecks,
};

function definitionOf(call: FleetCall) {
  if (!(call.method in SERVICES))
    throw new ComputeError('INTERNAL', `a fleet plan has a call to ${call.method}, which it never makes`);
  return methods[call.method as PlannedMethod];
}

/** The resource a call is decided on, as the pipeline makes it: an id an earlier call creates is left out. */
function resourceOf(call: FleetCall, input: Record<string, unknown>, tenantId: string): ResourceRef {
  const named = (
    definitionOf(call).resource as ((i: unknown) => Omit<ResourceRef, 'tenantId'>) | undefined
  )?.(input);
  const resource: ResourceRef = { type: 'tenant', id: tenantId, ...named, tenantId };
  if (resource.id === undefined) delete resource.id;
  return resource;
}

/**
 * Every decision the calls need, each once: the method's action on its resource, and what its
 * binding adds (a template's volumes, decided as compute:sandboxes:attach).
 */
export async function callChecks(
  db: Kysely<ComputeTables>,
  tenantId: string,
  calls: readonly FleetCall[],
): Promise<AuthorizationCheck[]> {
  const checks = new Map<string, AuthorizationCheck>();
  const add = (check: AuthorizationCheck) => checks.set(canonicalJson(check), check);
  for (const call of calls) {
    const action = methodAction(definitionOf(call));
    if (!action) throw new ComputeError('INTERNAL', `${call.method} has no action to decide`);
    add({ action, resource: resourceOf(call, call.input, tenantId) });
    const more = MORE_CHECKS[call.method as PlannedMethod];
    if (more) for (const check of await more(db, tenantId, call.input)) add(check);
  }
  return [...checks.values()];
}

/** A call's refusal, naming the call; its code, details and hint stay the service's own. */
function refusal(error: unknown, index: number, call: FleetCall, total: number): ComputeError {
  const failure = toComputeError(error);
  if (failure.code === 'INTERNAL') return failure;
  return new ComputeError(
    failure.code,
    `call ${index + 1} of ${total} (${call.method}) was refused, so nothing was applied: ${failure.message}`,
    {
      details: { ...failure.details, call: index + 1, method: call.method },
      hint:
        failure.hint ??
        'Fix what the message names (in the document, or in the fleet), then plan and apply again.',
    },
  );
}

/**
 * Runs the calls in order in the caller's transaction (`ctx.db`): each input completed with the ids
 * of the objects earlier calls created, parsed by its method's schema, run by its module's service,
 * and audited as its own method. Answers how many ran.
 */
export async function runCalls(ctx: CallContext<unknown>, calls: readonly FleetCall[]): Promise<number> {
  const created = new Map<string, string>();
  for (const [index, call] of calls.entries()) {
    const definition = definitionOf(call);
    const raw: Record<string, unknown> = { ...call.input };
    for (const [field, ref] of Object.entries(call.refs)) {
      const id = created.get(ref);
      if (!id)
        throw new ComputeError('INTERNAL', `call ${index + 1} needs ${ref}, which no earlier call made`);
      raw[field] = id;
    }
    let output: unknown;
    try {
      const input = validatedInput(definition.input, raw) as Record<string, unknown>;
      output = await SERVICES[call.method as PlannedMethod]({ ...ctx, input } as CallContext<never>);
      const identity = ctx.identity;
      await writeAudit(ctx.db, {
        tenantId: ctx.tenantId,
        actor: identity?.principalId ?? null,
        actorKind: identity?.principalKind ?? null,
        action: methodAction(definition)!,
        method: call.method,
        resource: resourceOf(call, input, ctx.tenantId),
        outcome: 'allowed',
        requestId: ctx.requestId,
      });
    } catch (error) {
      throw refusal(error, index, call, calls.length);
    }
    if (call.creates) created.set(call.creates, (output as { id: string }).id);
  }
  return calls.length;
}
