/** The shapes IAM answers with, in code and over HTTP. None of them ever carries a secret. */
import type { PrincipalKind, TenantState } from '@better-compute/core';

export interface Tenant {
  id: string;
  parentId: string | null;
  name: string;
  state: TenantState;
  createdAt: string;
  updatedAt: string;
  version: number;
}

export interface Principal {
  id: string;
  tenantId: string;
  kind: PrincipalKind;
  email: string | null;
  displayName: string;
  disabled: boolean;
  actingFor: string | null;
  createdAt: string;
}

export interface Session {
  id: string;
  principalId: string;
  mfa: boolean;
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
  lastSeenAt: string | null;
}

export interface ApiKey {
  id: string;
  principalId: string;
  name: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

export interface Role {
  id: string;
  /** null for a built-in role. */
  tenantId: string | null;
  name: string;
  description: string;
  actions: string[];
  builtIn: boolean;
}

export type BindingScope =
  | { type: 'tenant' }
  | { type: 'project'; id: string }
  | { type: 'resource'; resourceType: string; id: string };

export interface Binding {
  id: string;
  tenantId: string;
  roleId: string;
  roleName: string;
  principalId: string | null;
  groupId: string | null;
  scope: BindingScope;
  createdAt: string;
  revokedAt: string | null;
}

/** An agent's delegation: what of its calls waits for its person's confirmation. */
export interface Delegation {
  id: string;
  tenantId: string;
  agentId: string;
  personId: string;
  /** Action patterns whose calls need the person's confirmation. */
  confirm: string[];
  /** GPU-hours one reservation may take without confirmation; null for no limit. */
  spendLimitGpuHours: number | null;
  createdBy: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  /** active, or why it no longer counts. */
  state: 'active' | 'expired' | 'revoked';
}

export interface Group {
  id: string;
  tenantId: string;
  name: string;
  createdAt: string;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface PageOptions {
  limit?: number;
  cursor?: string;
}
