/**
 * The policy model, pure and synchronous so a warm authorize never waits: action patterns, the
 * bindings a principal holds, and the decision for one check. Loading the inputs (and caching
 * them) is the job of `areas/authorize.ts`.
 *
 * Patterns are `:`-separated; `*` stands for one or more whole segments (`compute:*` is every
 * compute action, `compute:*:read` every compute read), and a bare `*` is everything. A pattern
 * ending in `@own` applies only to resources whose `ownerId` is the caller (docs/decisions/
 * iam-own-resources.md). Reserved actions (`compute:fleet:admin`) are matched only by their exact
 * name or the bare `*`, and only through the root tenant (docs/decisions/iam-reserved-actions.md).
 */
import {
  ROOT_TENANT,
  type AuthorizationCheck,
  type AuthorizationDecision,
  type PrincipalKind,
  type ResourceRef,
  type TenantState,
} from '@better-compute/core';
import type { ScopeType } from './schema.js';

/** Actions no tenant-level wildcard reaches: only root administrators get them. */
export const RESERVED_ACTIONS: ReadonlySet<string> = new Set(['compute:fleet:admin']);

const OWN_SUFFIX = '@own';
const PATTERN_SHAPE = /^(\*|[a-z0-9-]+)(:(\*|[a-z0-9-]+))*(@own)?$/;

/** A resource as IAM decides on it (core's ResourceRef, with its project when it has one). */
export type IamResourceRef = ResourceRef;

export interface CompiledPattern {
  source: string;
  /** The pattern without `@own`. */
  action: string;
  own: boolean;
  regex: RegExp | null;
}

export function isPatternShape(pattern: string): boolean {
  return pattern.length <= 200 && PATTERN_SHAPE.test(pattern);
}

export function compilePattern(source: string): CompiledPattern {
  const own = source.endsWith(OWN_SUFFIX);
  const action = own ? source.slice(0, -OWN_SUFFIX.length) : source;
  if (action === '*') return { source, action, own, regex: null };
  const body = action
    .split(':')
    .map((segment) =>
      segment === '*' ? '[a-z0-9-]+(?::[a-z0-9-]+)*' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join(':');
  return { source, action, own, regex: new RegExp(`^${body}$`) };
}

/** Whether a pattern (ignoring `@own`) names an action. */
export function patternMatches(pattern: CompiledPattern, action: string): boolean {
  if (pattern.regex === null) return true;
  if (RESERVED_ACTIONS.has(action)) return pattern.action === action;
  return pattern.regex.test(action);
}

export interface PolicyRole {
  id: string;
  name: string;
  tenantId: string | null;
  patterns: CompiledPattern[];
}

export interface PolicyBinding {
  id: string;
  tenantId: string;
  role: PolicyRole;
  /** `principal` for a direct binding, else the group it came through. */
  via: string;
  scopeType: ScopeType;
  scopeId: string | null;
  scopeResourceType: string | null;
}

/** Everything authorize needs to know about one principal, loaded once and cached. */
export interface PrincipalSnapshot {
  id: string;
  tenantId: string;
  kind: PrincipalKind;
  disabled: boolean;
  bindings: PolicyBinding[];
  /** For an agent: the person it acts for. */
  actingFor: PrincipalSnapshot | null;
}

export type TenantStates = (tenantId: string) => TenantState | null;

function describeScope(binding: PolicyBinding): string {
  if (binding.scopeType === 'tenant') return `tenant ${binding.tenantId}`;
  if (binding.scopeType === 'project') return `project ${binding.scopeId} in tenant ${binding.tenantId}`;
  return `${binding.scopeResourceType} ${binding.scopeId} in tenant ${binding.tenantId}`;
}

function describeResource(resource: IamResourceRef): string {
  return resource.id
    ? `${resource.type} ${resource.id} in tenant ${resource.tenantId}`
    : `${resource.type} in tenant ${resource.tenantId}`;
}

function scopeCovers(binding: PolicyBinding, resource: IamResourceRef): boolean {
  if (binding.scopeType === 'tenant') return true;
  if (binding.scopeType === 'project') {
    return (
      resource.projectId === binding.scopeId ||
      (resource.type === 'project' && resource.id === binding.scopeId)
    );
  }
  return resource.type === binding.scopeResourceType && resource.id === binding.scopeId;
}

/** Platform bindings: a root-tenant principal bound at the root tenant's scope acts in every tenant. */
function isPlatformBinding(principal: PrincipalSnapshot, binding: PolicyBinding): boolean {
  return (
    principal.tenantId === ROOT_TENANT && binding.tenantId === ROOT_TENANT && binding.scopeType === 'tenant'
  );
}

/**
 * One principal's decision on one check, from its own bindings only. `owners` is who counts as
 * "the caller" for `@own` patterns (the agent and the person it acts for, for an agent).
 */
function decideFor(
  principal: PrincipalSnapshot,
  check: AuthorizationCheck,
  tenantState: TenantStates,
  owners: ReadonlySet<string>,
): AuthorizationDecision {
  const resource = check.resource as IamResourceRef;
  const { action } = check;
  if (principal.disabled) return { allowed: false, reason: `principal ${principal.id} is disabled` };
  const ownState = tenantState(principal.tenantId);
  if (ownState !== 'active')
    return { allowed: false, reason: `tenant ${principal.tenantId} is ${ownState ?? 'unknown'}` };
  const noBinding: AuthorizationDecision = {
    allowed: false,
    reason: `no binding of ${principal.id} grants ${action} on ${describeResource(resource)}`,
  };
  // A tenant the principal has nothing to do with gets the same answer whether it exists, is
  // suspended or not: a refusal must not tell a stranger which tenants there are.
  const related =
    resource.tenantId === principal.tenantId ||
    principal.bindings.some(
      (binding) => binding.tenantId === resource.tenantId || isPlatformBinding(principal, binding),
    );
  if (!related) return noBinding;
  const targetState = tenantState(resource.tenantId);
  if (targetState === null) return { allowed: false, reason: `there is no tenant ${resource.tenantId}` };
  const reserved = RESERVED_ACTIONS.has(action);
  let ownMiss: PolicyBinding | undefined;
  let reservedMiss = false;
  for (const binding of principal.bindings) {
    const platform = isPlatformBinding(principal, binding);
    if (binding.tenantId !== resource.tenantId && !platform) continue;
    // A suspended tenant's own bindings stop working; the platform's keep working there (to reactivate it).
    if (targetState !== 'active' && !platform) continue;
    if (!scopeCovers(binding, resource)) continue;
    for (const pattern of binding.role.patterns) {
      if (!patternMatches(pattern, action)) continue;
      if (pattern.own && !(resource.ownerId !== undefined && owners.has(resource.ownerId))) {
        ownMiss ??= binding;
        continue;
      }
      if (reserved && !platform) {
        reservedMiss = true;
        continue;
      }
      return {
        allowed: true,
        reason: `allowed by binding ${binding.id} (role ${binding.role.name} at ${describeScope(binding)}${binding.via === 'principal' ? '' : `, through group ${binding.via}`})`,
      };
    }
  }
  if (targetState !== 'active')
    return { allowed: false, reason: `tenant ${resource.tenantId} is ${targetState}` };
  if (reserved || reservedMiss)
    return { allowed: false, reason: `${action} is only for root administrators` };
  if (ownMiss) {
    return {
      allowed: false,
      reason: `role ${ownMiss.role.name} (binding ${ownMiss.id}) allows ${action} only on ${principal.id}'s own resources`,
    };
  }
  return noBinding;
}

/**
 * The decision for a principal; an agent acting for a person gets the intersection of its own
 * bindings and the person's (docs/decisions/iam-agent-intersection.md).
 */
export function decide(
  principal: PrincipalSnapshot,
  check: AuthorizationCheck,
  tenantState: TenantStates,
): AuthorizationDecision {
  const person = principal.actingFor;
  if (principal.kind !== 'agent' || person === null)
    return decideFor(principal, check, tenantState, new Set([principal.id]));
  // An agent's sandbox is its person's too; but IAM's own resources (credentials, sessions, second
  // factors) are never shared: an agent manages only its own, so a key it mints can never act as
  // the person (docs/decisions/iam-agent-intersection.md).
  const owners = check.action.startsWith('iam:')
    ? new Set([principal.id])
    : new Set([principal.id, person.id]);
  const own = decideFor(principal, check, tenantState, owners);
  if (!own.allowed) return own;
  const theirs = decideFor(person, check, tenantState, owners);
  if (!theirs.allowed)
    return {
      allowed: false,
      reason: `agent ${principal.id} acts for ${person.id}, who is not allowed: ${theirs.reason}`,
    };
  return { allowed: true, reason: `${own.reason}; and for ${person.id}, whom it acts for: ${theirs.reason}` };
}
