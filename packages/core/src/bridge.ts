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
}
