/**
 * The embedded IAM's public shapes: the options `createIam` takes, the service object it returns
 * (`Iam`), the caps (IAM_LIMITS) and what the HTTP layer needs besides the service. Types only (and
 * the default caps): the areas, the routes and the assembler all import from here, and it imports
 * none of them.
 */
import type {
  ActionCatalogEntry,
  AuthorizationCheck,
  AuthorizationDecision,
  ClientInfo,
  IamBridge,
  Identity,
  PrincipalKind,
  RateLimiter,
  TenantState,
} from '@better-compute/core';
import type { Database, ModuleMigrations } from '@better-compute/db';
import type { RecoveryAuditTable } from './schema.js';
import type {
  ApiKey,
  Binding,
  BindingScope,
  Delegation,
  Group,
  Page,
  PageOptions,
  Principal,
  Role,
  Session,
  Tenant,
} from './types.js';

export interface CreateIamOptions {
  database: Database;
  /** Injected time, for tests and the simulator. */
  clock?: () => Date;
  /** Origins whose pages may call IAM's routes with the session cookie. Default: the request's own origin. */
  trustedOrigins?: string[];
  /** How long a password session lasts; default 12 hours. */
  sessionTtlMs?: number;
  /** How long a session JWT lasts; default 10 minutes. */
  jwtTtlSeconds?: number;
  /**
   * The PostgreSQL URL IAM listens on for other processes' changes. Defaults to the database's own
   * `url` when it has one (test databases do). Without it, cache entries live one second.
   */
  listenUrl?: string;
  /** Where a route's failure that its answer does not tell (an unknown throw) is written; default none. */
  log?: IamLog;
  /**
   * The rate limiter of IAM's routes (a deployment shares compute's): per identity, and per client
   * address for the sign-in; none by default.
   */
  limiter?: RateLimiter;
  /** Caps per person and per tenant (IAM_LIMITS); each may be set lower or higher. */
  limits?: Partial<IamLimits>;
  /**
   * The deployment's secret (BETTER_COMPUTE_SECRET): TOTP seeds are sealed under a key derived from
   * it. Without one they are stored unsealed, which `secretsSealed()` reports for `doctor`.
   */
  secret?: string;
}

/** A billing meter: what usage is counted in, by name (`compute.gpu-seconds`). */
export interface MeterDefinition {
  name: string;
  unit: string;
  aggregation: 'sum' | 'max';
  /** The fields a usage row is broken down by (`tenantId`, `poolId`, `gpuModel`). */
  dimensions: string[];
  description: string;
}

export interface Meter extends MeterDefinition {
  createdAt: string;
}

export interface EnsuredMeters {
  created: string[];
  existing: string[];
  /** Meters of the name that exist with another unit, aggregation or dimensions: never changed here. */
  different: string[];
}

/** Who took a recovery action on a person, for its audit entry. */
export interface RecoveryAudit {
  actor: string;
  requestId: string;
}

export interface RecoveryAuditEntry {
  tenantId: string;
  actor: string;
  action: RecoveryAuditTable['action'];
  principalId: string;
  requestId: string;
  occurredAt: string;
}

/**
 * What one person or tenant may hold at most (docs/security.md). `childTenantsPerTenant` also decides
 * who creates tenants: at 0 (the default) only platform operators do; above 0 a tenant's
 * administrators may create that many child tenants directly under their own.
 */
export interface IamLimits {
  apiKeysPerPrincipal: number;
  sessionsPerPerson: number;
  principalsPerTenant: number;
  rolesPerTenant: number;
  bindingsPerTenant: number;
  childTenantsPerTenant: number;
}

export const IAM_LIMITS: IamLimits = {
  apiKeysPerPrincipal: 100,
  sessionsPerPerson: 100,
  principalsPerTenant: 10_000,
  rolesPerTenant: 500,
  bindingsPerTenant: 20_000,
  childTenantsPerTenant: 0,
};

/** A log entry IAM writes: a route failure, with the request it came from. */
export interface IamLog {
  (entry: { level: 'error'; message: string; requestId: string; error: unknown }): void;
}

export interface SignInResult {
  /** The session token, shown this once. */
  token: string;
  session: Session;
  principal: Principal;
}

export interface CreatedApiKey {
  /** The key, shown this once. */
  key: string;
  apiKey: ApiKey;
}

export interface DevAccount {
  tenantId: string;
  principalId: string;
  email: string;
  password: string;
  role: string;
  apiKey: string;
}

export interface DevBootstrap {
  rootAdmin: DevAccount;
  acmeAdmin: DevAccount;
  acmeMember: DevAccount;
}

/** The embedded IAM, as `createIam` returns it. */
export interface Iam {
  /** What compute calls: authenticate, tenantState, authorize, installActions. */
  readonly bridge: IamBridge;
  /**
   * Serves every route under `/api/iam/`; NOT_FOUND for anything else. With the client's address
   * in `client`, the public sign-in is limited by it (docs/rate-limits.md).
   */
  handler(request: Request, client?: ClientInfo): Promise<Response>;
  readonly migrations: ModuleMigrations;
  /** Resolves once the cross-process change feed listens (PostgreSQL); at once elsewhere. */
  ready(): Promise<void>;

  authenticate(credential: string): Promise<Identity | null>;
  tenantState(tenantId: string): Promise<TenantState | null>;
  authorize(identity: Identity, checks: AuthorizationCheck[]): Promise<AuthorizationDecision[]>;
  installActions(catalog: ActionCatalogEntry[]): Promise<void>;

  /**
   * Creates a tenant. `byTenant` is the creator's own tenant when a caller asks through the API: a
   * tenant other than root may create children only under itself, up to `childTenantsPerTenant`.
   */
  createTenant(input: { id: string; name: string; parentId?: string; byTenant?: string }): Promise<Tenant>;
  getTenant(id: string): Promise<Tenant>;
  listTenants(options?: { parentId?: string } & PageOptions): Promise<Page<Tenant>>;
  suspendTenant(id: string): Promise<Tenant>;
  reactivateTenant(id: string): Promise<Tenant>;
  deleteTenant(id: string): Promise<Tenant>;

  createPerson(input: {
    tenantId: string;
    email: string;
    password?: string;
    displayName?: string;
  }): Promise<Principal>;
  createServiceAccount(input: { tenantId: string; displayName: string }): Promise<Principal>;
  /**
   * Creates an agent acting for a person, with its delegation in the same transaction: `confirm`
   * (DEFAULT_CONFIRM when absent) and `spendLimitGpuHours` (none when absent).
   */
  createAgent(input: {
    tenantId: string;
    displayName: string;
    actingFor: string;
    confirm?: readonly string[] | undefined;
    spendLimitGpuHours?: number | null | undefined;
    /** Who creates it, recorded on its delegation; `system` when absent. */
    createdBy?: string | undefined;
  }): Promise<Principal>;
  getPrincipal(id: string): Promise<Principal>;
  listPrincipals(input: { tenantId: string; kind?: PrincipalKind } & PageOptions): Promise<Page<Principal>>;
  disablePrincipal(id: string): Promise<Principal>;
  enablePrincipal(id: string): Promise<Principal>;

  signIn(email: string, password: string, tenantId: string, totp?: string): Promise<SignInResult>;
  signOut(sessionId: string): Promise<Session>;
  getSession(sessionId: string): Promise<Session>;
  listSessions(principalId: string, page?: PageOptions): Promise<Page<Session>>;
  revokeSession(sessionId: string): Promise<Session>;
  enrollTotp(principalId: string): Promise<{ secret: string; uri: string }>;
  /** Confirms the factor; answers the recovery codes, shown this once. */
  confirmTotp(principalId: string, code: string): Promise<{ confirmed: true; recoveryCodes: string[] }>;
  /** Removes the person's own factor, proven with a current code or a recovery code. */
  removeTotp(principalId: string, code: string): Promise<{ removed: boolean }>;
  /** Removes a person's factor for them (an administrator's recovery path). */
  resetTotp(principalId: string, audit: RecoveryAudit): Promise<{ removed: boolean }>;
  /** Changes a person's password; every other session of theirs ends. */
  changePassword(
    principalId: string,
    input: { currentPassword: string; newPassword: string; keepSessionId?: string },
  ): Promise<{ changed: true; sessionsEnded: number }>;
  /** Sets a one-time password for a person, answered once, and ends all their sessions. */
  resetPassword(
    principalId: string,
    audit: RecoveryAudit,
  ): Promise<{ oneTimePassword: string; sessionsEnded: number }>;
  /** The recovery actions administrators took on people of a tenant, newest first. */
  listRecoveryAudit(tenantId: string): Promise<RecoveryAuditEntry[]>;
  /**
   * Creates the billing meters that are missing (by name), idempotently: answers which were created,
   * which existed as given, and which exist with another definition (left as they are).
   */
  ensureMeters(meters: readonly MeterDefinition[]): Promise<EnsuredMeters>;
  /** Every billing meter, by name. */
  listMeters(): Promise<Meter[]>;

  createApiKey(
    principalId: string,
    options: { name: string; expiresAt?: string | Date },
  ): Promise<CreatedApiKey>;
  getApiKey(id: string): Promise<ApiKey>;
  listApiKeys(principalId: string, options?: PageOptions): Promise<Page<ApiKey>>;
  revokeApiKey(id: string): Promise<ApiKey>;

  createRole(input: {
    tenantId: string;
    name: string;
    actions: string[];
    description?: string;
  }): Promise<Role>;
  listRoles(tenantId: string): Promise<Page<Role>>;
  deleteRole(tenantId: string, roleId: string): Promise<Role>;
  createGroup(input: { tenantId: string; name: string }): Promise<Group>;
  addGroupMember(groupId: string, principalId: string): Promise<void>;
  removeGroupMember(groupId: string, principalId: string): Promise<void>;
  createBinding(input: {
    tenantId: string;
    role: string;
    principalId?: string;
    groupId?: string;
    scope?: BindingScope;
    /**
     * Who asks (the route passes its caller): a binding then grants nothing its creator does not
     * hold at the binding's scope. Unset for the service's own bootstrap.
     */
    grantedBy?: Identity;
  }): Promise<Binding>;
  getBinding(id: string): Promise<Binding>;
  listBindings(input: { tenantId: string; principalId?: string } & PageOptions): Promise<Page<Binding>>;
  revokeBinding(id: string): Promise<Binding>;

  /** Sets an agent's delegation, replacing its active one (the agent's credentials re-read it). */
  createDelegation(input: {
    agentId: string;
    confirm?: readonly string[] | undefined;
    spendLimitGpuHours?: number | null | undefined;
    expiresAt?: string | Date | null | undefined;
    createdBy?: string | undefined;
  }): Promise<Delegation>;
  getDelegation(id: string): Promise<Delegation>;
  listDelegations(
    input: { tenantId: string; agentId?: string; personId?: string } & PageOptions,
  ): Promise<Page<Delegation>>;
  /** Ends a delegation: its agent stops authenticating, everywhere, on its next call. */
  revokeDelegation(id: string): Promise<Delegation>;
  /** active, expired or revoked (also while its agent or person is disabled); null for none. */
  delegationState(id: string): Promise<Delegation['state'] | null>;

  issueSessionJwt(sessionId: string): Promise<{ token: string; expiresAt: string }>;
  jwks(): Promise<{ keys: Record<string, unknown>[] }>;

  /** Whether an enabled person of the root tenant holds platform-admin. */
  hasRootAdministrator(): Promise<boolean>;
  /** Whether secrets IAM keeps (TOTP seeds) are sealed: the deployment gave it a secret. */
  secretsSealed(): boolean;
  bootstrapRootAdmin(input: {
    email: string;
    password: string;
  }): Promise<{ created: boolean; principal: Principal | null }>;
  bootstrapDev(): Promise<DevBootstrap | null>;
  /** Writes pending last-used times and stops listening. Does not close the database. */
  close(): Promise<void>;
}

/** The options the HTTP layer needs besides the service. */
export interface IamInternals {
  trustedOrigins: string[] | undefined;
  limiter: RateLimiter | undefined;
  limits: IamLimits;
  now(): Date;
  log: IamLog | undefined;
}
