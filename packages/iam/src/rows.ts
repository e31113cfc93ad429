/**
 * The rows IAM reads, typed from `schema.ts` (never declared a second time), and how each becomes
 * the answer shape of `types.ts`. Answers carry ISO times and no secret column.
 */
import type { Selectable } from 'kysely';
import type {
  ApiKeysTable,
  BindingsTable,
  DelegationsTable,
  PrincipalsTable,
  RolesTable,
  SessionsTable,
  TenantsTable,
} from './schema.js';
import type {
  ApiKey,
  Binding,
  BindingScope,
  Delegation,
  Page,
  Principal,
  Role,
  Session,
  Tenant,
} from './types.js';

export function iso(value: Date | string): string {
  return new Date(value).toISOString();
}
function isoOrNull(value: Date | string | null): string | null {
  return value === null ? null : iso(value);
}

export function pageOf<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const items = rows.slice(0, limit);
  return { items, nextCursor: rows.length > limit ? items.at(-1)!.id : null };
}

export type TenantRow = Selectable<TenantsTable>;
export function toTenant(row: TenantRow): Tenant {
  return {
    id: row.id,
    parentId: row.parent_id,
    name: row.name,
    state: row.state,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    version: row.version,
  };
}

export const PRINCIPAL_COLUMNS = [
  'id',
  'tenant_id',
  'kind',
  'email',
  'display_name',
  'disabled',
  'acting_for',
  'created_at',
] as const;
export type PrincipalRow = Pick<Selectable<PrincipalsTable>, (typeof PRINCIPAL_COLUMNS)[number]>;
export function toPrincipal(row: PrincipalRow): Principal {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    kind: row.kind,
    email: row.email,
    displayName: row.display_name,
    disabled: row.disabled,
    actingFor: row.acting_for,
    createdAt: iso(row.created_at),
  };
}

export const SESSION_COLUMNS = [
  'id',
  'principal_id',
  'mfa',
  'created_at',
  'expires_at',
  'revoked_at',
  'last_seen_at',
] as const;
export type SessionRow = Pick<Selectable<SessionsTable>, (typeof SESSION_COLUMNS)[number]>;
export function toSession(row: SessionRow): Session {
  return {
    id: row.id,
    principalId: row.principal_id,
    mfa: row.mfa,
    createdAt: iso(row.created_at),
    expiresAt: iso(row.expires_at),
    revokedAt: isoOrNull(row.revoked_at),
    lastSeenAt: isoOrNull(row.last_seen_at),
  };
}

export const API_KEY_COLUMNS = [
  'id',
  'principal_id',
  'name',
  'created_at',
  'expires_at',
  'revoked_at',
  'last_used_at',
] as const;
export type ApiKeyRow = Pick<Selectable<ApiKeysTable>, (typeof API_KEY_COLUMNS)[number]>;
export function toApiKey(row: ApiKeyRow): ApiKey {
  return {
    id: row.id,
    principalId: row.principal_id,
    name: row.name,
    createdAt: iso(row.created_at),
    expiresAt: isoOrNull(row.expires_at),
    revokedAt: isoOrNull(row.revoked_at),
    lastUsedAt: isoOrNull(row.last_used_at),
  };
}

export const ROLE_COLUMNS = ['id', 'tenant_id', 'name', 'description', 'actions'] as const;
export type RoleRow = Pick<Selectable<RolesTable>, (typeof ROLE_COLUMNS)[number]>;
export function toRole(row: RoleRow): Role {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    description: row.description,
    actions: row.actions,
    builtIn: row.tenant_id === null,
  };
}

/** A binding with its role's name, as the answers show it. */
export type BindingRow = Selectable<BindingsTable> & { role_name: RolesTable['name'] };
function scopeOf(row: Pick<BindingRow, 'scope_type' | 'scope_id' | 'scope_resource_type'>): BindingScope {
  if (row.scope_type === 'tenant') return { type: 'tenant' };
  if (row.scope_type === 'project') return { type: 'project', id: row.scope_id ?? '' };
  return { type: 'resource', resourceType: row.scope_resource_type ?? '', id: row.scope_id ?? '' };
}
export function toBinding(row: BindingRow): Binding {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    roleId: row.role_id,
    roleName: row.role_name,
    principalId: row.principal_id,
    groupId: row.group_id,
    scope: scopeOf(row),
    createdAt: iso(row.created_at),
    revokedAt: isoOrNull(row.revoked_at),
  };
}

export type DelegationRow = Selectable<DelegationsTable>;
export function toDelegation(row: DelegationRow, now: Date): Delegation {
  const state =
    row.revoked_at !== null
      ? 'revoked'
      : row.expires_at !== null && new Date(row.expires_at) <= now
        ? 'expired'
        : 'active';
  return {
    id: row.id,
    tenantId: row.tenant_id,
    agentId: row.agent_id,
    personId: row.person_id,
    confirm: [...row.confirm],
    spendLimitGpuHours: row.spend_limit_gpu_hours === null ? null : Number(row.spend_limit_gpu_hours),
    createdBy: row.created_by,
    createdAt: iso(row.created_at),
    expiresAt: isoOrNull(row.expires_at),
    revokedAt: isoOrNull(row.revoked_at),
    state,
  };
}
