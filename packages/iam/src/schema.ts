/**
 * The IAM tables as Kysely sees them. They live in the schema `iam`; `migrations.ts` creates them.
 * Hashes are stored as lowercase hex text so PostgreSQL (`pg`, Buffer) and PGlite (Uint8Array)
 * answer the same type.
 */
import type { ColumnType, Generated } from 'kysely';
import type { PrincipalKind, TenantState } from '@better-compute/core';

type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface TenantsTable {
  id: string;
  parent_id: string | null;
  name: string;
  state: ColumnType<TenantState, TenantState | undefined, TenantState>;
  created_at: CreatedAt;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
  version: ColumnType<number, number | undefined, number>;
}

export interface PrincipalsTable {
  id: string;
  tenant_id: string;
  kind: PrincipalKind;
  email: string | null;
  display_name: string;
  password_hash: string | null;
  disabled: ColumnType<boolean, boolean | undefined, boolean>;
  acting_for: string | null;
  created_at: CreatedAt;
  version: ColumnType<number, number | undefined, number>;
}

export interface SessionsTable {
  id: string;
  principal_id: string;
  token_hash: string;
  mfa: boolean;
  created_at: CreatedAt;
  expires_at: Timestamp;
  revoked_at: NullableTimestamp;
  last_seen_at: NullableTimestamp;
}

export interface TotpTable {
  principal_id: string;
  secret: string;
  confirmed: ColumnType<boolean, boolean | undefined, boolean>;
  last_counter: number | null;
  created_at: CreatedAt;
}

interface RecoveryCodesTable {
  principal_id: string;
  code_hash: string;
  used_at: Date | string | null;
}

export interface RecoveryAuditTable {
  id: Generated<number>;
  tenant_id: string;
  actor: string;
  action: 'totp.reset' | 'passwords.reset';
  principal_id: string;
  request_id: string;
  occurred_at: Date | string;
}

export interface ApiKeysTable {
  id: string;
  principal_id: string;
  token_hash: string;
  name: string;
  created_at: CreatedAt;
  expires_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
}

export interface RolesTable {
  id: string;
  tenant_id: string | null;
  name: string;
  description: string;
  actions: string[];
  created_at: CreatedAt;
  deleted_at: NullableTimestamp;
}

interface GroupsTable {
  id: string;
  tenant_id: string;
  name: string;
  created_at: CreatedAt;
}

interface GroupMembersTable {
  group_id: string;
  principal_id: string;
}

export type ScopeType = 'tenant' | 'project' | 'resource';

export interface BindingsTable {
  id: string;
  tenant_id: string;
  role_id: string;
  principal_id: string | null;
  group_id: string | null;
  scope_type: ScopeType;
  scope_id: string | null;
  scope_resource_type: string | null;
  created_at: CreatedAt;
  revoked_at: NullableTimestamp;
}

export interface DelegationsTable {
  id: string;
  tenant_id: string;
  agent_id: string;
  person_id: string;
  /** Action patterns whose calls wait for the person's confirmation. */
  confirm: string[];
  spend_limit_gpu_hours: number | null;
  /** The principal that set it, or `migration` / `system`. */
  created_by: string;
  created_at: Timestamp;
  expires_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

interface SigningKeysTable {
  kid: string;
  alg: string;
  public_jwk: string;
  private_jwk: string;
  created_at: CreatedAt;
  retired_at: NullableTimestamp;
}

interface ActionCatalogTable {
  action: string;
  summary: string;
  source: string;
}

export interface IamDatabase {
  'iam.tenants': TenantsTable;
  'iam.principals': PrincipalsTable;
  'iam.sessions': SessionsTable;
  'iam.totp': TotpTable;
  'iam.recovery_codes': RecoveryCodesTable;
  'iam.recovery_audit': RecoveryAuditTable;
  'iam.api_keys': ApiKeysTable;
  'iam.roles': RolesTable;
  'iam.groups': GroupsTable;
  'iam.group_members': GroupMembersTable;
  'iam.bindings': BindingsTable;
  'iam.delegations': DelegationsTable;
  'iam.signing_keys': SigningKeysTable;
  'iam.action_catalog': ActionCatalogTable;
  'iam.sign_in_attempts': SignInAttemptsTable;
  'iam.meters': MetersTable;
}

/** A billing meter (migration 0007): what a usage export's quantity is counted in. */
interface MetersTable {
  name: string;
  unit: string;
  aggregation: 'sum' | 'max';
  dimensions: string[];
  description: string;
  created_at: Generated<Date>;
}

interface SignInAttemptsTable {
  account_hash: string;
  failures: number;
  first_failed_at: Date;
  locked_until: Date | null;
}
