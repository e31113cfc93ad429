/**
 * The bridge between compute and IAM (DESIGN section 7). Compute never reads IAM's tables: it asks
 * the bridge to authenticate a credential, to decide a batch of checks and to learn compute's
 * action catalog. The embedded Better IAM implements it; a remote IAM could too.
 */
import type { ResourceRef } from './contract.js';

/** The root tenant: its members are the platform's operators. */
export const ROOT_TENANT = 'root';

export type PrincipalKind = 'person' | 'service-account' | 'agent';
export type CredentialKind = 'session' | 'api-key' | 'jwt';

/** Who is calling, as IAM authenticated it. Never carries the credential itself. */
export interface Identity {
  principalId: string;
  principalKind: PrincipalKind;
  tenantId: string;
  credentialKind: CredentialKind;
  /** The session's or key's id (never its secret). */
  credentialId: string;
  /** Whether the session was opened with a second factor. */
  mfa: boolean;
  /** ISO time the credential stops working, or null when it does not expire. */
  expiresAt: string | null;
  displayName?: string;
  email?: string;
  /** For an agent: the person it acts for, who owns what the agent creates. */
  actingFor?: string;
  /**
   * For an agent: its active delegation (docs/confirmations.md). Calls whose action matches one of
   * `confirm`, and reservations above `spendLimitGpuHours`, wait for the person's confirmation.
   */
  delegation?: IdentityDelegation;
}

/**
 * What an agent's calls need its person's confirmation for, unless the delegation says otherwise
 * (docs/decisions/delegation-defaults.md): anything that destroys (deletes, archives, retires,
 * drains), anything that hands out root or a way in (node consoles, commands,
 * join tokens, admitting machines), anything that changes limits or approves a destructive batch,
 * every webhook change (a webhook sends the tenant's events out), and anything of IAM. Better IAM's
 * migration 0005 backfilled existing agents with this list as it read then; compute holds an agent
 * whose IAM gives it no delegation to it too (http/confirmation.ts).
 */
export const DEFAULT_CONFIRM_PATTERNS: readonly string[] = Object.freeze([
  'compute:*:delete',
  'compute:*:archive',
  'compute:*:set-quota',
  'compute:quotas:set',
  'compute:nodes:retire',
  'compute:nodes:drain',
  'compute:nodes:console',
  'compute:commands:run',
  'compute:batches:approve',
  'compute:join-tokens:create',
  'compute:join-requests:approve',
  'compute:webhooks:create',
  'compute:webhooks:update',
  'compute:webhooks:ping',
  'compute:webhooks:rotate-secret',
  'compute:webhooks:redeliver',
  'iam:*',
]);

/** An agent's delegation as its identity carries it. */
export interface IdentityDelegation {
  id: string;
  /** Action patterns (IAM's grammar without `@own`) that need the person's confirmation. */
  confirm: string[];
  /** GPU-hours one reservation may take without confirmation; null for no limit. */
  spendLimitGpuHours: number | null;
}

/**
 * Whether an action pattern names an action, in IAM's grammar: `:`-separated segments, where `*`
 * stands for one or more whole segments and a bare `*` for everything (better-iam's policy.ts
 * decides role patterns the same way; its delegation tests hold the two equal).
 */
export function actionPatternMatches(pattern: string, action: string): boolean {
  if (pattern === '*') return true;
  const want = pattern.split(':');
  const have = action.split(':');
  const match = (i: number, j: number): boolean => {
    if (i === want.length) return j === have.length;
    if (want[i] === '*') {
      for (let k = j + 1; k <= have.length; k++) if (match(i + 1, k)) return true;
      return false;
    }
    return j < have.length && want[i] === have[j] && match(i + 1, j + 1);
  };
  return match(0, 0);
}

/** Who owns what an identity creates: the person an agent acts for, else the principal itself. */
export function ownerOf(identity: Pick<Identity, 'principalId' | 'actingFor'>): string {
  return identity.actingFor ?? identity.principalId;
}

export interface AuthorizationCheck {
  action: string;
  resource: ResourceRef;
}

export interface AuthorizationDecision {
  allowed: boolean;
  /** Why, in words an operator can act on: the binding that allowed it, or what was missing. */
  reason: string;
}

export type TenantState = 'active' | 'suspended' | 'deleted';

/** One action compute may ask IAM about. */
export interface ActionCatalogEntry {
  action: string;
  summary: string;
}

export interface IamBridge {
  /** The identity behind a bearer credential, or null when it is unknown, expired or revoked. */
  authenticate(credential: string): Promise<Identity | null>;
  /** The state of a tenant, or null when there is no such tenant. */
  tenantState(tenantId: string): Promise<TenantState | null>;
  /** One decision per check, in order. */
  authorize(identity: Identity, checks: AuthorizationCheck[]): Promise<AuthorizationDecision[]>;
  /** Teaches IAM compute's actions, so a binding to an unknown action is refused. */
  installActions(catalog: ActionCatalogEntry[]): Promise<void>;
  /**
   * Whether an agent's delegation still counts: compute ends the confirmations of one that does
   * not. Optional: without it, those confirmations only expire (an agent whose delegation ended
   * does not authenticate, so none of them can run either way).
   */
  delegationState?(delegationId: string): Promise<'active' | 'expired' | 'revoked' | null>;
}
