/**
 * The embedded Better IAM: tenants, principals, credentials, roles, bindings and the bridge compute
 * asks. Service functions are trusted (code calls them after deciding); the HTTP routes in
 * `handler.ts` decide every call with `iam:*` actions before calling them.
 *
 * Every change runs in one transaction that also queues its change notification, and drops the
 * cache entries it touches right after the commit, before the function returns: a revoked key,
 * session or binding is refused on the very next call.
 */
import { SignJWT, decodeProtectedHeader, jwtVerify } from 'jose';
import { type Kysely, sql } from 'kysely';
import * as OTPAuth from 'otpauth';
import {
  type ActionCatalogEntry,
  type AuthorizationCheck,
  type AuthorizationDecision,
  ComputeError,
  type IamBridge,
  type Identity,
  type IdKind,
  type IdSource,
  isId,
  isTenantId,
  newId,
  type PrincipalKind,
  type RateLimiter,
  ROOT_TENANT,
  type TenantState,
} from '@better-compute/core';
import type { Database, ModuleMigrations } from '@better-compute/db';
import { AuthCache, type IamChange, type TokenEntry } from './cache.js';
import { ChangeFeed } from './change-feed.js';
import { IAM_ACTIONS } from './methods.js';
import { BUILT_IN_ROLE_IDS, iamMigrations } from './migrations.js';
import {
  compilePattern,
  decide,
  isPatternShape,
  patternMatches,
  RESERVED_ACTIONS,
  type PolicyBinding,
  type PrincipalSnapshot,
  type PolicyRole,
} from './policy.js';
import type { IamDatabase, ScopeType } from './schema.js';
import {
  API_KEY_PREFIX,
  hashPassword,
  hashToken,
  hasTokenShape,
  newToken,
  safeEqual,
  SESSION_TOKEN_PREFIX,
  verifyPassword,
} from './secrets.js';
import { createSealer } from './sealing.js';
import { JWT_ALG, SigningKeys } from './signing-keys.js';
import type {
  ApiKey,
  Binding,
  BindingScope,
  Group,
  Page,
  PageOptions,
  Principal,
  Role,
  Session,
  Tenant,
} from './types.js';

/** The longest an API key may be given to live (docs/security.md). */
const API_KEY_MAX_LIFETIME_MS = 10 * 365.25 * 24 * 3600 * 1000;

/** How many recovery codes a confirmed second factor comes with. */
const RECOVERY_CODES = 10;
const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

/** A recovery code, `xxxxx-xxxxx`: 50 bits from a 31-letter alphabet without look-alikes. */
function newRecoveryCode(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(10));
  const letters = [...bytes].map((b) => RECOVERY_ALPHABET[b % RECOVERY_ALPHABET.length]).join('');
  return `${letters.slice(0, 5)}-${letters.slice(5)}`;
}

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
  /** The per-identity rate limiter of IAM's routes (a deployment shares compute's); none by default. */
  limiter?: RateLimiter;
  /** Caps per person and per tenant (IAM_LIMITS); each may be set lower or higher. */
  limits?: Partial<IamLimits>;
  /**
   * The deployment's secret (BETTER_COMPUTE_SECRET): TOTP seeds are sealed under a key derived from
   * it. Without one they are stored unsealed, which `secretsSealed()` reports for `doctor`.
   */
  secret?: string;
}

/**
 * What one person or tenant may hold at most (docs/security.md). `childTenantsPerTenant` also decides
 * who creates tenants: at 0 (the default) only platform operators do; above 0 a tenant's
 * administrators may create that many child tenants directly under their own.
 */
/** Who took a recovery action on a person, for its audit entry. */
export interface RecoveryAudit {
  actor: string;
  requestId: string;
}

export interface RecoveryAuditEntry {
  tenantId: string;
  actor: string;
  action: 'totp.reset' | 'passwords.reset';
  principalId: string;
  requestId: string;
  occurredAt: string;
}

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

const ISSUER = 'better-iam';
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const LIVE_TTL_MS = 60_000;
const UNSURE_TTL_MS = 1_000;
const FLUSH_EVERY_MS = 5_000;
const SIGN_IN_FAILED = 'invalid email, password or tenant';
/** Failed sign-ins of one account that count together, and how many pass before it must wait. */
const SIGN_IN_WINDOW_MS = 15 * 60_000;
const SIGN_IN_FREE_FAILURES = 5;
/** The first wait, doubled with each further failure, never longer than the last. */
const SIGN_IN_FIRST_LOCK_MS = 30_000;
const SIGN_IN_MAX_LOCK_MS = 15 * 60_000;

type Db = Kysely<IamDatabase>;

function iso(value: Date | string): string {
  return new Date(value).toISOString();
}
function isoOrNull(value: Date | string | null): string | null {
  return value === null ? null : iso(value);
}

function notFound(what: string): ComputeError {
  return new ComputeError('NOT_FOUND', `${what} was not found`);
}

function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505';
}

function pageOf<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const items = rows.slice(0, limit);
  return { items, nextCursor: rows.length > limit ? items.at(-1)!.id : null };
}

interface TenantRow {
  id: string;
  parent_id: string | null;
  name: string;
  state: TenantState;
  created_at: Date;
  updated_at: Date;
  version: number;
}
function toTenant(row: TenantRow): Tenant {
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

interface PrincipalRow {
  id: string;
  tenant_id: string;
  kind: PrincipalKind;
  email: string | null;
  display_name: string;
  disabled: boolean;
  acting_for: string | null;
  created_at: Date;
}
function toPrincipal(row: PrincipalRow): Principal {
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
const PRINCIPAL_COLUMNS = [
  'id',
  'tenant_id',
  'kind',
  'email',
  'display_name',
  'disabled',
  'acting_for',
  'created_at',
] as const;

interface SessionRow {
  id: string;
  principal_id: string;
  mfa: boolean;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  last_seen_at: Date | null;
}
function toSession(row: SessionRow): Session {
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
const SESSION_COLUMNS = [
  'id',
  'principal_id',
  'mfa',
  'created_at',
  'expires_at',
  'revoked_at',
  'last_seen_at',
] as const;

interface ApiKeyRow {
  id: string;
  principal_id: string;
  name: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}
function toApiKey(row: ApiKeyRow): ApiKey {
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
const API_KEY_COLUMNS = [
  'id',
  'principal_id',
  'name',
  'created_at',
  'expires_at',
  'revoked_at',
  'last_used_at',
] as const;

interface RoleRow {
  id: string;
  tenant_id: string | null;
  name: string;
  description: string;
  actions: string[];
}
function toRole(row: RoleRow): Role {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    description: row.description,
    actions: row.actions,
    builtIn: row.tenant_id === null,
  };
}

interface BindingRow {
  id: string;
  tenant_id: string;
  role_id: string;
  role_name: string;
  principal_id: string | null;
  group_id: string | null;
  scope_type: ScopeType;
  scope_id: string | null;
  scope_resource_type: string | null;
  created_at: Date;
  revoked_at: Date | null;
}
function scopeOf(row: Pick<BindingRow, 'scope_type' | 'scope_id' | 'scope_resource_type'>): BindingScope {
  if (row.scope_type === 'tenant') return { type: 'tenant' };
  if (row.scope_type === 'project') return { type: 'project', id: row.scope_id ?? '' };
  return { type: 'resource', resourceType: row.scope_resource_type ?? '', id: row.scope_id ?? '' };
}
function toBinding(row: BindingRow): Binding {
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

/** The embedded IAM, as `createIam` returns it. */
export interface Iam {
  /** What compute calls: authenticate, tenantState, authorize, installActions. */
  readonly bridge: IamBridge;
  /** Serves every route under `/api/iam/`; NOT_FOUND for anything else. */
  handler(request: Request): Promise<Response>;
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
  createAgent(input: { tenantId: string; displayName: string; actingFor: string }): Promise<Principal>;
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

/** Creates the embedded IAM over a database whose `iam` migrations have run. */
export function createIam(options: CreateIamOptions): Iam {
  const db: Db = options.database.db;
  const clock = options.clock ?? (() => new Date());
  const limits: IamLimits = { ...IAM_LIMITS, ...options.limits };
  const sealer = createSealer(options.secret);

  /**
   * Refuses a create that would take `what` past its cap. `count` counts what is held now, in the
   * create's own transaction after `lock` serialised creates of the same holder.
   */
  async function underLimit(
    limit: keyof IamLimits,
    what: string,
    count: () => Promise<number>,
  ): Promise<void> {
    const max = limits[limit];
    if ((await count()) >= max) {
      throw new ComputeError('QUOTA_EXCEEDED', `${what} is at its limit of ${max} (${limit})`, {
        details: { limit, max },
        hint: 'Remove or revoke one first, or ask the operator to raise the limit in the deployment’s configuration (iamLimits).',
      });
    }
  }
  const countOf = async (query: { executeTakeFirstOrThrow(): Promise<{ n: string | number | bigint }> }) =>
    Number((await query.executeTakeFirstOrThrow()).n);
  const nowMs = () => clock().getTime();
  const idSource: IdSource = {
    now: nowMs,
    randomBytes: (size) => crypto.getRandomValues(new Uint8Array(size)),
  };
  const id = (kind: IdKind) => newId(kind, idSource);
  const sessionTtlMs = options.sessionTtlMs ?? 12 * 3600_000;
  const jwtTtlSeconds = options.jwtTtlSeconds ?? 600;
  const listenUrl = options.listenUrl ?? (options.database as { url?: unknown }).url;

  // Entries live long only while every change is known to reach this cache (see change-feed.ts).
  const cache: AuthCache = new AuthCache(
    () => Date.now(),
    (): number => (feed.live ? LIVE_TTL_MS : UNSURE_TTL_MS),
  );
  const feed: ChangeFeed = new ChangeFeed({
    kind: options.database.kind,
    key: options.database.db as object,
    listenUrl: typeof listenUrl === 'string' ? listenUrl : undefined,
    cache,
  });
  void feed.start();
  const keys = new SigningKeys(db, clock);
  const rolePatterns = new Map<string, PolicyRole>();
  let handle: ((request: Request) => Promise<Response>) | undefined;

  // last_used_at / last_seen_at are written in batches, off the request path.
  const lastUsedKeys = new Map<string, Date>();
  const lastSeenSessions = new Map<string, Date>();
  let flushing: Promise<void> | null = null;
  const flushTimer = setInterval(() => void flush(), FLUSH_EVERY_MS);
  flushTimer.unref?.();

  async function flush(): Promise<void> {
    if (flushing) return flushing;
    if (lastUsedKeys.size === 0 && lastSeenSessions.size === 0) return;
    const keysNow = [...lastUsedKeys];
    const sessionsNow = [...lastSeenSessions];
    lastUsedKeys.clear();
    lastSeenSessions.clear();
    flushing = (async () => {
      try {
        for (const [keyId, at] of keysNow) {
          await db.updateTable('iam.api_keys').set({ last_used_at: at }).where('id', '=', keyId).execute();
        }
        for (const [sessionId, at] of sessionsNow) {
          await db
            .updateTable('iam.sessions')
            .set({ last_seen_at: at })
            .where('id', '=', sessionId)
            .execute();
        }
      } catch {
        // Last-used times are advisory; a failed batch is dropped rather than retried forever.
      } finally {
        flushing = null;
      }
    })();
    return flushing;
  }

  /** Runs a change in one transaction with its notification, then drops what it touched here. */
  async function change<T>(work: (trx: Db) => Promise<{ result: T; changes: IamChange[] }>): Promise<T> {
    let nonce = '';
    let changes: IamChange[] = [];
    const result = await db.transaction().execute(async (trx) => {
      const outcome = await work(trx);
      changes = outcome.changes;
      if (changes.length > 0) nonce = await feed.notify(trx, changes);
      return outcome.result;
    });
    if (changes.length > 0) await feed.committed(changes, nonce);
    return result;
  }

  // ---------------------------------------------------------------- tenants

  async function tenantRow(tenantId: string, trx: Db = db): Promise<TenantRow | undefined> {
    return trx.selectFrom('iam.tenants').selectAll().where('id', '=', tenantId).executeTakeFirst();
  }

  async function requireTenant(tenantId: string, trx: Db = db): Promise<TenantRow> {
    const row = isTenantId(tenantId) ? await tenantRow(tenantId, trx) : undefined;
    if (!row || row.state === 'deleted') throw notFound(`tenant ${tenantId}`);
    return row;
  }

  /** Serialises creates that count what a tenant holds (its principals, children). */
  async function lockTenant(tenantId: string, trx: Db): Promise<void> {
    await trx.selectFrom('iam.tenants').select('id').where('id', '=', tenantId).forUpdate().execute();
  }

  async function requireActiveTenant(tenantId: string, trx: Db = db): Promise<TenantRow> {
    const row = await requireTenant(tenantId, trx);
    if (row.state !== 'active') throw new ComputeError('TENANT_SUSPENDED', `tenant ${tenantId} is suspended`);
    return row;
  }

  async function setTenantState(tenantId: string, from: TenantState[], to: TenantState): Promise<Tenant> {
    if (tenantId === ROOT_TENANT)
      throw new ComputeError('INVALID_STATE', 'the root tenant cannot be suspended or deleted');
    return change(async (trx) => {
      const row = await requireTenant(tenantId, trx);
      if (row.state === to) return { result: toTenant(row), changes: [] };
      if (!from.includes(row.state)) {
        throw new ComputeError('INVALID_STATE', `tenant ${tenantId} is ${row.state}`, {
          details: { state: row.state },
        });
      }
      if (to === 'deleted') {
        const child = await trx
          .selectFrom('iam.tenants')
          .select('id')
          .where('parent_id', '=', tenantId)
          .where('state', '<>', 'deleted')
          .executeTakeFirst();
        if (child) {
          throw new ComputeError(
            'INVALID_STATE',
            `tenant ${tenantId} still has tenant ${child.id} under it`,
            {
              hint: `Delete tenant ${child.id} first.`,
            },
          );
        }
      }
      const updated = await trx
        .updateTable('iam.tenants')
        .set({ state: to, updated_at: clock(), version: sql<number>`version + 1` })
        .where('id', '=', tenantId)
        .returningAll()
        .executeTakeFirstOrThrow();
      return { result: toTenant(updated), changes: [{ type: 'tenant', id: tenantId }] };
    });
  }

  async function tenantState(tenantId: string): Promise<TenantState | null> {
    const cached = cache.tenantState(tenantId);
    if (cached !== undefined) return cached;
    if (!isTenantId(tenantId)) return null;
    const generation = cache.generation;
    const row = await tenantRow(tenantId);
    const state = row?.state ?? null;
    cache.setTenantState(tenantId, state, generation);
    return state;
  }

  // ---------------------------------------------------------------- principals

  async function principalRow(principalId: string, trx: Db = db): Promise<PrincipalRow | undefined> {
    return trx
      .selectFrom('iam.principals')
      .select(PRINCIPAL_COLUMNS)
      .where('id', '=', principalId)
      .executeTakeFirst();
  }

  async function requirePrincipal(principalId: string, trx: Db = db): Promise<PrincipalRow> {
    const row = await principalRow(principalId, trx);
    if (!row) throw notFound(`principal ${principalId}`);
    return row;
  }

  async function insertPrincipal(values: {
    tenantId: string;
    kind: PrincipalKind;
    email: string | null;
    displayName: string;
    passwordHash: string | null;
    actingFor: string | null;
  }): Promise<Principal> {
    const kindIds: Record<PrincipalKind, IdKind> = {
      person: 'person',
      'service-account': 'serviceAccount',
      agent: 'agent',
    };
    try {
      return await db.transaction().execute(async (trx) => {
        await requireActiveTenant(values.tenantId, trx);
        await lockTenant(values.tenantId, trx);
        await underLimit('principalsPerTenant', `tenant ${values.tenantId}'s principals`, () =>
          countOf(
            trx
              .selectFrom('iam.principals')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('tenant_id', '=', values.tenantId),
          ),
        );
        if (values.actingFor !== null) {
          const person = await principalRow(values.actingFor, trx);
          if (!person || person.kind !== 'person' || person.tenant_id !== values.tenantId) {
            throw new ComputeError('INVALID_ARGUMENT', 'an agent acts for a person of its own tenant', {
              details: { field: 'actingFor' },
            });
          }
        }
        const row = await trx
          .insertInto('iam.principals')
          .values({
            id: id(kindIds[values.kind]),
            tenant_id: values.tenantId,
            kind: values.kind,
            email: values.email,
            display_name: values.displayName,
            password_hash: values.passwordHash,
            acting_for: values.actingFor,
            created_at: clock(),
          })
          .returning(PRINCIPAL_COLUMNS)
          .executeTakeFirstOrThrow();
        return toPrincipal(row);
      });
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new ComputeError(
          'ALREADY_EXISTS',
          `a person with that email already exists in tenant ${values.tenantId}`,
        );
      }
      throw error;
    }
  }

  function normalEmail(email: string): string {
    return email.trim().toLowerCase();
  }

  /**
   * Spends a second-factor code: a current TOTP code (remembering its counter, so it is not accepted
   * twice) or an unused recovery code (marked used). False when it is neither.
   */
  async function spendSecondFactor(
    trx: Db,
    principalId: string,
    factor: { secret: string; last_counter: number | null },
    code: string,
  ): Promise<boolean> {
    if (/^\d{6}$/.test(code)) {
      const counter = totpCounter(
        sealer.open(factor.secret, `totp:${principalId}`),
        code,
        factor.last_counter,
      );
      if (counter === null) return false;
      await trx
        .updateTable('iam.totp')
        .set({ last_counter: counter })
        .where('principal_id', '=', principalId)
        .execute();
      return true;
    }
    const spent = await trx
      .updateTable('iam.recovery_codes')
      .set({ used_at: clock() })
      .where('principal_id', '=', principalId)
      .where('code_hash', '=', hashToken(code))
      .where('used_at', 'is', null)
      .returning('code_hash')
      .executeTakeFirst();
    return spent !== undefined;
  }

  /** The audit entry of an administrator's recovery action, in the action's own transaction. */
  async function recordRecovery(
    trx: Db,
    tenantId: string,
    action: RecoveryAuditEntry['action'],
    principalId: string,
    audit: RecoveryAudit,
  ): Promise<void> {
    await trx
      .insertInto('iam.recovery_audit')
      .values({
        tenant_id: tenantId,
        actor: audit.actor,
        action,
        principal_id: principalId,
        request_id: audit.requestId,
        occurred_at: clock(),
      })
      .execute();
  }

  /** A person's factor, confirmed or being enrolled, locked until the transaction ends. */
  async function lockedFactor(trx: Db, principalId: string) {
    return trx
      .selectFrom('iam.totp')
      .select(['secret', 'confirmed', 'last_counter'])
      .where('principal_id', '=', principalId)
      .forUpdate()
      .executeTakeFirst();
  }

  /** Drops a person's factor and recovery codes; whether there was a factor. */
  async function dropTotp(trx: Db, principalId: string): Promise<boolean> {
    await trx.deleteFrom('iam.recovery_codes').where('principal_id', '=', principalId).execute();
    const dropped = await trx
      .deleteFrom('iam.totp')
      .where('principal_id', '=', principalId)
      .returning('principal_id')
      .execute();
    return dropped.length > 0;
  }

  /** Ends a person's open sessions but `keep`; the ids it ended. */
  async function endSessions(trx: Db, principalId: string, keep?: string): Promise<string[]> {
    let query = trx
      .updateTable('iam.sessions')
      .set({ revoked_at: clock() })
      .where('principal_id', '=', principalId)
      .where('revoked_at', 'is', null);
    if (keep) query = query.where('id', '<>', keep);
    return (await query.returning('id').execute()).map((r) => r.id);
  }

  /**
   * The platform must keep one way in: an enabled person of the root tenant holding platform-admin.
   * Called inside a change that could remove the last one, it first locks root's platform-admin
   * bindings (so two such changes run one after the other, and the second sees the first), then
   * refuses the change when none would be left.
   */
  async function lockPlatformAdmins(trx: Db): Promise<void> {
    await trx
      .selectFrom('iam.bindings')
      .select('id')
      .where('tenant_id', '=', ROOT_TENANT)
      .where('role_id', '=', BUILT_IN_ROLE_IDS['platform-admin'])
      .where('revoked_at', 'is', null)
      .forUpdate()
      .execute();
  }

  /** Whether an enabled person of the root tenant holds platform-admin. */
  async function rootAdministratorExists(executor: Db): Promise<boolean> {
    const row = await executor
      .selectFrom('iam.bindings as b')
      .innerJoin('iam.principals as p', 'p.id', 'b.principal_id')
      .select('b.id')
      .where('b.tenant_id', '=', ROOT_TENANT)
      .where('b.role_id', '=', BUILT_IN_ROLE_IDS['platform-admin'])
      .where('b.revoked_at', 'is', null)
      .where('p.disabled', '=', false)
      .where('p.kind', '=', 'person')
      .executeTakeFirst();
    return row !== undefined;
  }

  async function assertPlatformKeepsAnAdmin(trx: Db, what: string): Promise<void> {
    if (!(await rootAdministratorExists(trx))) {
      throw new ComputeError('INVALID_STATE', `${what} would leave the platform without an administrator`, {
        details: { reason: 'last-platform-admin' },
        hint: 'Bind platform-admin to another enabled person of the root tenant first (better-iam bindings create --tenant root --role platform-admin).',
      });
    }
  }

  async function setDisabled(principalId: string, disabled: boolean): Promise<Principal> {
    return change(async (trx) => {
      if (disabled) await lockPlatformAdmins(trx);
      const row = await trx
        .updateTable('iam.principals')
        .set({ disabled, version: sql<number>`version + 1` })
        .where('id', '=', principalId)
        .returning(PRINCIPAL_COLUMNS)
        .executeTakeFirst();
      if (!row) throw notFound(`principal ${principalId}`);
      if (disabled && row.tenant_id === ROOT_TENANT)
        await assertPlatformKeepsAnAdmin(trx, `disabling principal ${principalId}`);
      return { result: toPrincipal(row), changes: [{ type: 'principal', id: principalId }] };
    });
  }

  // ---------------------------------------------------------------- authenticate

  function touch(entry: TokenEntry): void {
    if (entry.credentialKind === 'api-key') lastUsedKeys.set(entry.credentialId, clock());
    else lastSeenSessions.set(entry.credentialId, clock());
  }

  function identityOf(
    row: {
      principal_id: string;
      kind: PrincipalKind;
      tenant_id: string;
      display_name: string;
      email: string | null;
      acting_for: string | null;
    },
    credential: { kind: Identity['credentialKind']; id: string; mfa: boolean; expiresAt: Date | null },
  ): Identity {
    const identity: Identity = {
      principalId: row.principal_id,
      principalKind: row.kind,
      tenantId: row.tenant_id,
      credentialKind: credential.kind,
      credentialId: credential.id,
      mfa: credential.mfa,
      expiresAt: credential.expiresAt === null ? null : credential.expiresAt.toISOString(),
      displayName: row.display_name,
    };
    if (row.email !== null) identity.email = row.email;
    if (row.acting_for !== null) identity.actingFor = row.acting_for;
    return identity;
  }

  /** Whether the principal (and the person an agent acts for) may still authenticate. */
  async function principalUsable(row: {
    disabled: boolean;
    state: TenantState;
    acting_for: string | null;
  }): Promise<boolean> {
    if (row.disabled || row.state === 'deleted') return false;
    if (row.acting_for === null) return true;
    const person = await principalRow(row.acting_for);
    return person !== undefined && !person.disabled;
  }

  /** A session with what authenticating it needs of its principal and tenant. */
  function sessionWithPrincipal() {
    return db
      .selectFrom('iam.sessions as s')
      .innerJoin('iam.principals as p', 'p.id', 's.principal_id')
      .innerJoin('iam.tenants as t', 't.id', 'p.tenant_id')
      .select([
        's.id',
        's.token_hash',
        's.mfa',
        's.expires_at',
        's.revoked_at',
        's.principal_id',
        'p.kind',
        'p.tenant_id',
        'p.display_name',
        'p.email',
        'p.disabled',
        'p.acting_for',
        't.state',
      ]);
  }

  async function authenticateToken(credential: string, hash: string): Promise<TokenEntry | null> {
    const isSession = credential.startsWith(SESSION_TOKEN_PREFIX);
    const now = clock();
    if (isSession) {
      const row = await sessionWithPrincipal().where('s.token_hash', '=', hash).executeTakeFirst();
      if (!row || !safeEqual(row.token_hash, hash)) return null;
      if (row.revoked_at !== null || new Date(row.expires_at) <= now || !(await principalUsable(row)))
        return null;
      const expiresAt = new Date(row.expires_at);
      return {
        identity: identityOf(row, { kind: 'session', id: row.id, mfa: row.mfa, expiresAt }),
        principalId: row.principal_id,
        tenantId: row.tenant_id,
        actingFor: row.acting_for,
        credentialId: row.id,
        credentialKind: 'session',
        expiresAtMs: expiresAt.getTime(),
        storedAt: Date.now(),
      };
    }
    const row = await db
      .selectFrom('iam.api_keys as k')
      .innerJoin('iam.principals as p', 'p.id', 'k.principal_id')
      .innerJoin('iam.tenants as t', 't.id', 'p.tenant_id')
      .select([
        'k.id',
        'k.token_hash',
        'k.expires_at',
        'k.revoked_at',
        'k.principal_id',
        'p.kind',
        'p.tenant_id',
        'p.display_name',
        'p.email',
        'p.disabled',
        'p.acting_for',
        't.state',
      ])
      .where('k.token_hash', '=', hash)
      .executeTakeFirst();
    if (!row || !safeEqual(row.token_hash, hash)) return null;
    if (
      row.revoked_at !== null ||
      (row.expires_at !== null && new Date(row.expires_at) <= now) ||
      !(await principalUsable(row))
    ) {
      return null;
    }
    const expiresAt = row.expires_at === null ? null : new Date(row.expires_at);
    return {
      identity: identityOf(row, { kind: 'api-key', id: row.id, mfa: false, expiresAt }),
      principalId: row.principal_id,
      tenantId: row.tenant_id,
      actingFor: row.acting_for,
      credentialId: row.id,
      credentialKind: 'api-key',
      expiresAtMs: expiresAt?.getTime() ?? null,
      storedAt: Date.now(),
    };
  }

  async function authenticateJwt(credential: string): Promise<TokenEntry | null> {
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(credential).kid;
    } catch {
      return null;
    }
    if (typeof kid !== 'string' || kid.length > 100) return null;
    const key = await keys.verifier(kid);
    if (!key) return null;
    let claims: { sub?: string; sid?: unknown; exp?: number };
    try {
      ({ payload: claims } = await jwtVerify(credential, key, {
        issuer: ISSUER,
        algorithms: [JWT_ALG],
        currentDate: clock(),
      }));
    } catch {
      return null;
    }
    if (typeof claims.sid !== 'string' || typeof claims.sub !== 'string' || typeof claims.exp !== 'number')
      return null;
    const row = await sessionWithPrincipal().where('s.id', '=', claims.sid).executeTakeFirst();
    if (
      !row ||
      row.principal_id !== claims.sub ||
      row.revoked_at !== null ||
      new Date(row.expires_at) <= clock()
    )
      return null;
    if (!(await principalUsable(row))) return null;
    const expiresAtMs = Math.min(claims.exp * 1000, new Date(row.expires_at).getTime());
    return {
      identity: identityOf(row, { kind: 'jwt', id: row.id, mfa: row.mfa, expiresAt: new Date(expiresAtMs) }),
      principalId: row.principal_id,
      tenantId: row.tenant_id,
      actingFor: row.acting_for,
      credentialId: row.id,
      credentialKind: 'jwt',
      expiresAtMs,
      storedAt: Date.now(),
    };
  }

  async function authenticate(credential: string): Promise<Identity | null> {
    if (typeof credential !== 'string' || credential.length === 0 || credential.length > 4096) return null;
    const isOpaque =
      hasTokenShape(credential, SESSION_TOKEN_PREFIX) || hasTokenShape(credential, API_KEY_PREFIX);
    if (!isOpaque && !JWT_SHAPE.test(credential)) return null;
    const hash = hashToken(credential);
    const cached = cache.token(hash);
    if (cached !== undefined) {
      // Expiry is checked on every hit: a cached session still ends on time.
      if (cached.expiresAtMs !== null && cached.expiresAtMs <= nowMs()) {
        cache.dropToken(hash);
        return null;
      }
      touch(cached);
      return cached.identity;
    }
    const generation = cache.generation;
    const entry = isOpaque ? await authenticateToken(credential, hash) : await authenticateJwt(credential);
    if (entry === null) return null;
    cache.setToken(hash, entry, generation);
    touch(entry);
    return entry.identity;
  }

  // ---------------------------------------------------------------- authorize

  function compiledRole(row: {
    id: string;
    name: string;
    tenant_id: string | null;
    actions: string[];
  }): PolicyRole {
    const key = `${row.id}\n${row.actions.join('\n')}`;
    let role = rolePatterns.get(key);
    if (!role) {
      role = {
        id: row.id,
        name: row.name,
        tenantId: row.tenant_id,
        patterns: row.actions.map(compilePattern),
      };
      if (rolePatterns.size > 10_000) rolePatterns.clear();
      rolePatterns.set(key, role);
    }
    return role;
  }

  async function loadSnapshot(principalId: string, depth = 0): Promise<PrincipalSnapshot | null> {
    const row = await principalRow(principalId);
    if (!row) return null;
    const rows = await db
      .selectFrom('iam.bindings as b')
      .innerJoin('iam.roles as r', 'r.id', 'b.role_id')
      .select([
        'b.id',
        'b.tenant_id',
        'b.principal_id',
        'b.group_id',
        'b.scope_type',
        'b.scope_id',
        'b.scope_resource_type',
        'r.id as role_id',
        'r.name as role_name',
        'r.tenant_id as role_tenant_id',
        'r.actions',
      ])
      .where('b.revoked_at', 'is', null)
      .where('r.deleted_at', 'is', null)
      .where((eb) =>
        eb.or([
          eb('b.principal_id', '=', principalId),
          eb(
            'b.group_id',
            'in',
            eb.selectFrom('iam.group_members').select('group_id').where('principal_id', '=', principalId),
          ),
        ]),
      )
      .orderBy('b.id')
      .execute();
    const bindings: PolicyBinding[] = rows.map((binding) => ({
      id: binding.id,
      tenantId: binding.tenant_id,
      role: compiledRole({
        id: binding.role_id,
        name: binding.role_name,
        tenant_id: binding.role_tenant_id,
        actions: binding.actions,
      }),
      via: binding.group_id ?? 'principal',
      scopeType: binding.scope_type,
      scopeId: binding.scope_id,
      scopeResourceType: binding.scope_resource_type,
    }));
    const actingFor =
      row.kind === 'agent' && row.acting_for !== null && depth === 0
        ? await loadSnapshot(row.acting_for, 1)
        : null;
    return {
      id: row.id,
      tenantId: row.tenant_id,
      kind: row.kind,
      disabled: row.disabled,
      bindings,
      actingFor,
    };
  }

  async function snapshotOf(principalId: string): Promise<PrincipalSnapshot | null> {
    const cached = cache.snapshot(principalId);
    if (cached !== undefined) return cached;
    const generation = cache.generation;
    const snapshot = await loadSnapshot(principalId);
    if (snapshot) cache.setSnapshot(snapshot, generation);
    return snapshot;
  }

  async function authorize(
    identity: Identity,
    checks: AuthorizationCheck[],
  ): Promise<AuthorizationDecision[]> {
    if (identity.expiresAt !== null && Date.parse(identity.expiresAt) <= nowMs()) {
      return checks.map(() => ({ allowed: false, reason: 'the credential has expired' }));
    }
    const snapshot = await snapshotOf(identity.principalId);
    if (snapshot === null)
      return checks.map(() => ({ allowed: false, reason: `there is no principal ${identity.principalId}` }));
    // Tenant states come from the cache; only the ones it lacks are read, in one query.
    const missing = new Set<string>();
    const wanted = [snapshot.tenantId, ...checks.map((check) => check.resource.tenantId)];
    if (snapshot.actingFor) wanted.push(snapshot.actingFor.tenantId);
    for (const tenantId of wanted)
      if (cache.tenantState(tenantId) === undefined && isTenantId(tenantId)) missing.add(tenantId);
    const states = new Map<string, TenantState | null>();
    if (missing.size > 0) {
      const generation = cache.generation;
      const rows = await db
        .selectFrom('iam.tenants')
        .select(['id', 'state'])
        .where('id', 'in', [...missing])
        .execute();
      const found = new Map(rows.map((row) => [row.id, row.state]));
      for (const tenantId of missing) {
        states.set(tenantId, found.get(tenantId) ?? null);
        cache.setTenantState(tenantId, found.get(tenantId) ?? null, generation);
      }
    }
    const stateOf = (tenantId: string) => {
      const known = states.get(tenantId);
      if (known !== undefined) return known;
      return cache.tenantState(tenantId) ?? null;
    };
    return checks.map((check) => decide(snapshot, check, stateOf));
  }

  // ---------------------------------------------------------------- actions and roles

  async function knownActions(trx: Db = db): Promise<string[]> {
    const rows = await trx.selectFrom('iam.action_catalog').select('action').execute();
    return [...new Set([...rows.map((row) => row.action), ...IAM_ACTIONS])];
  }

  function checkPatterns(actions: string[], known: string[]): void {
    for (const action of actions) {
      if (!isPatternShape(action)) {
        throw new ComputeError('INVALID_ARGUMENT', `${JSON.stringify(action)} is not an action pattern`, {
          details: { field: 'actions', action },
          hint: 'Patterns look like compute:reservations:create, compute:reservations:*, compute:*:read or compute:sandboxes:*@own.',
        });
      }
      const pattern = compilePattern(action);
      if (!known.some((name) => patternMatches(pattern, name))) {
        throw new ComputeError('INVALID_ARGUMENT', `${action} matches no known action`, {
          details: { field: 'actions', action },
          hint: 'List the known actions with `better-compute api --list`.',
        });
      }
    }
  }

  // ---------------------------------------------------------------- sign-in throttling

  /** Refuses a sign-in while the account is locked after repeated failures. */
  async function checkSignInLock(account: string): Promise<void> {
    const row = await db
      .selectFrom('iam.sign_in_attempts')
      .select('locked_until')
      .where('account_hash', '=', account)
      .executeTakeFirst();
    const until = row?.locked_until ? new Date(row.locked_until).getTime() : 0;
    const waitMs = until - nowMs();
    if (waitMs > 0) {
      throw new ComputeError(
        'RATE_LIMITED',
        'too many failed sign-ins for this account; wait before trying again',
        {
          details: { retryAfterMs: waitMs },
          hint: `Try again in ${Math.ceil(waitMs / 1000)} s. Lost the password? An administrator can give you a one-time password (better-iam users reset-password). Lost the authenticator? Sign in with a recovery code, or an administrator can remove the factor (better-iam users reset-totp).`,
        },
      );
    }
  }

  /**
   * Counts a failed sign-in in one statement (concurrent failures all count): failures within
   * SIGN_IN_WINDOW_MS add up, and from the SIGN_IN_FREE_FAILURES-th on the account waits, twice as
   * long each time, up to SIGN_IN_MAX_LOCK_MS.
   */
  async function recordSignInFailure(account: string): Promise<void> {
    const now = clock();
    const windowStart = new Date(now.getTime() - SIGN_IN_WINDOW_MS);
    await sql`
      insert into iam.sign_in_attempts as a (account_hash, failures, first_failed_at, locked_until)
      values (${account}, 1, ${now}, null)
      on conflict (account_hash) do update set
        failures = case when a.first_failed_at < ${windowStart} then 1 else a.failures + 1 end,
        first_failed_at = case when a.first_failed_at < ${windowStart} then ${now} else a.first_failed_at end,
        locked_until = case
          when a.first_failed_at < ${windowStart} or a.failures + 1 < ${SIGN_IN_FREE_FAILURES} then a.locked_until
          else ${now}::timestamptz + make_interval(secs => least(
            ${SIGN_IN_MAX_LOCK_MS / 1000}::float8,
            ${SIGN_IN_FIRST_LOCK_MS / 1000}::float8 * power(2, a.failures + 1 - ${SIGN_IN_FREE_FAILURES})))
        end`.execute(db);
  }

  /**
   * Refuses a binding that would give more than its creator holds (docs/decisions/iam-no-escalation.md):
   * every known action the role names must be allowed to the creator on the binding's scope (for an
   * `@own` pattern, on a resource of the creator's own). compute:fleet:admin counts only where a
   * binding can carry it, a root-tenant binding at tenant scope.
   */
  async function checkGrant(
    granter: Identity,
    role: { name: string; actions: string[] },
    tenantId: string,
    scope: BindingScope,
    known: readonly string[],
  ): Promise<void> {
    const onScope: AuthorizationCheck['resource'] =
      scope.type === 'tenant'
        ? { type: 'tenant', id: tenantId, tenantId }
        : scope.type === 'project'
          ? { type: 'project', id: scope.id, tenantId, projectId: scope.id }
          : { type: scope.resourceType, id: scope.id, tenantId };
    const platform = tenantId === ROOT_TENANT && scope.type === 'tenant';
    const checks = new Map<string, AuthorizationCheck>();
    for (const source of role.actions) {
      const pattern = compilePattern(source);
      for (const action of known) {
        if (!patternMatches(pattern, action)) continue;
        if (RESERVED_ACTIONS.has(action) && !platform) continue;
        const resource = pattern.own ? { ...onScope, ownerId: granter.principalId } : onScope;
        checks.set(`${action}${pattern.own ? '@own' : ''}`, { action, resource });
      }
    }
    const wanted = [...checks.values()];
    const decisions = await authorize(granter, wanted);
    const missing = wanted.filter((_, index) => !decisions[index]?.allowed).map((check) => check.action);
    if (missing.length === 0) return;
    const where = scope.type === 'tenant' ? `tenant ${tenantId}` : `${scope.type} ${scope.id}`;
    throw new ComputeError(
      'ACCESS_DENIED',
      `role ${role.name} grants ${missing.length === 1 ? 'an action' : `${missing.length} actions`} you do not hold on ${where}: ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}`,
      {
        details: { reason: 'escalation', role: role.name, missing },
        hint: 'Bind a role that grants only what you hold there, or ask someone who holds it to bind it.',
      },
    );
  }

  async function installActions(catalog: ActionCatalogEntry[]): Promise<void> {
    for (const entry of catalog) {
      if (!/^[a-z0-9-]+(:[a-z0-9-]+)+$/.test(entry.action)) {
        throw new ComputeError('INVALID_ARGUMENT', `${JSON.stringify(entry.action)} is not an action name`);
      }
    }
    const unique = [...new Map(catalog.map((entry) => [entry.action, entry])).values()];
    await db.transaction().execute(async (trx) => {
      if (unique.length === 0) {
        await trx.deleteFrom('iam.action_catalog').where('source', '=', 'compute').execute();
        return;
      }
      await trx
        .deleteFrom('iam.action_catalog')
        .where('source', '=', 'compute')
        .where(
          'action',
          'not in',
          unique.map((entry) => entry.action),
        )
        .execute();
      await trx
        .insertInto('iam.action_catalog')
        .values(unique.map((entry) => ({ action: entry.action, summary: entry.summary, source: 'compute' })))
        .onConflict((oc) =>
          oc
            .column('action')
            .doUpdateSet((eb) => ({ summary: eb.ref('excluded.summary'), source: 'compute' })),
        )
        .execute();
    });
  }

  async function findRole(tenantId: string, role: string, trx: Db = db): Promise<RoleRow> {
    const row = await trx
      .selectFrom('iam.roles')
      .select(['id', 'tenant_id', 'name', 'description', 'actions'])
      .where(isId('role', role) ? 'id' : 'name', '=', role)
      .where('deleted_at', 'is', null)
      .where((eb) => eb.or([eb('tenant_id', 'is', null), eb('tenant_id', '=', tenantId)]))
      .executeTakeFirst();
    if (!row) throw notFound(`role ${role} in tenant ${tenantId}`);
    return row;
  }

  /** Bindings with their role's name, as the answers show them. */
  function bindingsWithRole(trx: Db = db) {
    return trx
      .selectFrom('iam.bindings as b')
      .innerJoin('iam.roles as r', 'r.id', 'b.role_id')
      .select([
        'b.id',
        'b.tenant_id',
        'b.role_id',
        'r.name as role_name',
        'b.principal_id',
        'b.group_id',
        'b.scope_type',
        'b.scope_id',
        'b.scope_resource_type',
        'b.created_at',
        'b.revoked_at',
      ]);
  }

  async function bindingRow(bindingId: string, trx: Db = db): Promise<BindingRow | undefined> {
    return bindingsWithRole(trx).where('b.id', '=', bindingId).executeTakeFirst();
  }

  // ---------------------------------------------------------------- sessions and TOTP

  async function createSession(
    principalId: string,
    mfa: boolean,
    trx: Db,
  ): Promise<{ token: string; session: Session }> {
    const now = clock();
    await trx.selectFrom('iam.principals').select('id').where('id', '=', principalId).forUpdate().execute();
    await underLimit('sessionsPerPerson', `principal ${principalId}'s open sessions`, () =>
      countOf(
        trx
          .selectFrom('iam.sessions')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('principal_id', '=', principalId)
          .where('revoked_at', 'is', null)
          .where('expires_at', '>', now),
      ),
    );
    const token = newToken(SESSION_TOKEN_PREFIX);
    const row = await trx
      .insertInto('iam.sessions')
      .values({
        id: id('session'),
        principal_id: principalId,
        token_hash: hashToken(token),
        mfa,
        created_at: now,
        expires_at: new Date(now.getTime() + sessionTtlMs),
      })
      .returning(SESSION_COLUMNS)
      .executeTakeFirstOrThrow();
    return { token, session: toSession(row) };
  }

  function totpOf(secret: string, label: string): OTPAuth.TOTP {
    return new OTPAuth.TOTP({
      issuer: 'Better IAM',
      label,
      secret: OTPAuth.Secret.fromBase32(secret),
      digits: 6,
      period: 30,
    });
  }

  /** The time step a code was valid for, or null; codes at or before `lastCounter` are replays. */
  function totpCounter(secret: string, code: string, lastCounter: number | null): number | null {
    const now = nowMs();
    const delta = totpOf(secret, 'check').validate({ token: code, timestamp: now, window: 1 });
    if (delta === null) return null;
    const counter = Math.floor(now / 30_000) + delta;
    if (lastCounter !== null && counter <= lastCounter) return null;
    return counter;
  }

  async function revokeSessionById(sessionId: string): Promise<Session> {
    return change(async (trx) => {
      const row = await trx
        .updateTable('iam.sessions')
        .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${clock()})` })
        .where('id', '=', sessionId)
        .returning(SESSION_COLUMNS)
        .executeTakeFirst();
      if (!row) throw notFound(`session ${sessionId}`);
      return { result: toSession(row), changes: [{ type: 'credential', id: sessionId }] };
    });
  }

  // ---------------------------------------------------------------- the object

  const iam: Iam = {
    bridge: {
      authenticate: (credential) => authenticate(credential),
      tenantState: (tenantId) => tenantState(tenantId),
      authorize: (identity, checks) => authorize(identity, checks),
      installActions: (catalog) => installActions(catalog),
    },
    async handler(request) {
      // The routes load with the first request: the service imports nothing of its HTTP layer, which
      // imports the service's types (no cycle between the two).
      if (!handle) {
        const { createIamHandler } = await import('./handler.js');
        handle ??= createIamHandler(iam, {
          trustedOrigins: options.trustedOrigins,
          limiter: options.limiter,
          limits,
          now: clock,
          log: options.log,
        });
      }
      return handle(request);
    },
    migrations: iamMigrations,
    ready: () => feed.start(),

    authenticate,
    tenantState,
    authorize,
    installActions,

    async createTenant(input) {
      if (!isTenantId(input.id))
        throw new ComputeError('INVALID_ARGUMENT', 'id must be a tenant id such as acme', {
          details: { field: 'id' },
        });
      const parentId = input.parentId ?? ROOT_TENANT;
      if (input.byTenant !== undefined && input.byTenant !== ROOT_TENANT) {
        if (limits.childTenantsPerTenant <= 0)
          throw new ComputeError(
            'ACCESS_DENIED',
            'only platform operators create tenants in this deployment',
            {
              details: { reason: 'tenant-creation-off' },
              hint: 'Ask a platform operator to create the tenant, or have the operator allow child tenants (iamLimits.childTenantsPerTenant).',
            },
          );
        if (parentId !== input.byTenant)
          throw new ComputeError(
            'ACCESS_DENIED',
            `a tenant creates child tenants only under itself (${input.byTenant})`,
            {
              details: { reason: 'not-own-parent' },
              hint: `Pass --parent ${input.byTenant}, or leave it out.`,
            },
          );
      }
      try {
        return await db.transaction().execute(async (trx) => {
          await requireActiveTenant(parentId, trx);
          if (input.byTenant !== undefined && input.byTenant !== ROOT_TENANT) {
            // A tenant's administrators create children only under their own tenant, up to the cap.
            await lockTenant(parentId, trx);
            await underLimit('childTenantsPerTenant', `tenant ${parentId}'s child tenants`, () =>
              countOf(
                trx
                  .selectFrom('iam.tenants')
                  .select((eb) => eb.fn.countAll().as('n'))
                  .where('parent_id', '=', parentId)
                  .where('state', '<>', 'deleted'),
              ),
            );
          }
          const now = clock();
          const row = await trx
            .insertInto('iam.tenants')
            .values({ id: input.id, parent_id: parentId, name: input.name, created_at: now, updated_at: now })
            .returningAll()
            .executeTakeFirstOrThrow();
          return toTenant(row);
        });
      } catch (error) {
        if (isUniqueViolation(error))
          throw new ComputeError('ALREADY_EXISTS', `tenant ${input.id} already exists`);
        throw error;
      }
    },
    async getTenant(tenantId) {
      const row = isTenantId(tenantId) ? await tenantRow(tenantId) : undefined;
      if (!row) throw notFound(`tenant ${tenantId}`);
      return toTenant(row);
    },
    async listTenants(input = {}) {
      const limit = input.limit ?? 50;
      let query = db
        .selectFrom('iam.tenants')
        .selectAll()
        .orderBy('id')
        .limit(limit + 1);
      if (input.parentId !== undefined) query = query.where('parent_id', '=', input.parentId);
      if (input.cursor !== undefined) query = query.where('id', '>', input.cursor);
      return pageOf((await query.execute()).map(toTenant), limit);
    },
    suspendTenant: (tenantId) => setTenantState(tenantId, ['active'], 'suspended'),
    reactivateTenant: (tenantId) => setTenantState(tenantId, ['suspended'], 'active'),
    deleteTenant: (tenantId) => setTenantState(tenantId, ['active', 'suspended'], 'deleted'),

    async createPerson(input) {
      const email = normalEmail(input.email);
      if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254) {
        throw new ComputeError('INVALID_ARGUMENT', 'email must be an email address', {
          details: { field: 'email' },
        });
      }
      if (input.password !== undefined && input.password.length < 8) {
        throw new ComputeError('INVALID_ARGUMENT', 'the password must be at least 8 characters', {
          details: { field: 'password' },
        });
      }
      return insertPrincipal({
        tenantId: input.tenantId,
        kind: 'person',
        email,
        displayName: input.displayName ?? email,
        passwordHash: input.password === undefined ? null : await hashPassword(input.password),
        actingFor: null,
      });
    },
    createServiceAccount: (input) =>
      insertPrincipal({
        tenantId: input.tenantId,
        kind: 'service-account',
        email: null,
        displayName: input.displayName,
        passwordHash: null,
        actingFor: null,
      }),
    createAgent: (input) =>
      insertPrincipal({
        tenantId: input.tenantId,
        kind: 'agent',
        email: null,
        displayName: input.displayName,
        passwordHash: null,
        actingFor: input.actingFor,
      }),
    async getPrincipal(principalId) {
      return toPrincipal(await requirePrincipal(principalId));
    },
    async listPrincipals(input) {
      const limit = input.limit ?? 50;
      let query = db
        .selectFrom('iam.principals')
        .select(PRINCIPAL_COLUMNS)
        .where('tenant_id', '=', input.tenantId)
        .orderBy('id')
        .limit(limit + 1);
      if (input.kind !== undefined) query = query.where('kind', '=', input.kind);
      if (input.cursor !== undefined) query = query.where('id', '>', input.cursor);
      return pageOf((await query.execute()).map(toPrincipal), limit);
    },
    disablePrincipal: (principalId) => setDisabled(principalId, true),
    enablePrincipal: (principalId) => setDisabled(principalId, false),

    async signIn(email, password, tenantId, totp) {
      const account = hashToken(`${tenantId}\n${normalEmail(email)}`);
      await checkSignInLock(account);
      const row = isTenantId(tenantId)
        ? await db
            .selectFrom('iam.principals as p')
            .innerJoin('iam.tenants as t', 't.id', 'p.tenant_id')
            .select(['p.id', 'p.password_hash', 'p.disabled', 't.state'])
            .where('p.tenant_id', '=', tenantId)
            .where('p.email', '=', normalEmail(email))
            .where('p.kind', '=', 'person')
            .executeTakeFirst()
        : undefined;
      // The same check, and the same answer, for an unknown email, a wrong password and a disabled person.
      const passwordOk = await verifyPassword(password, row?.password_hash ?? null);
      if (!row || !passwordOk || row.disabled || row.state === 'deleted') {
        await recordSignInFailure(account);
        throw new ComputeError('UNAUTHENTICATED', SIGN_IN_FAILED);
      }
      if (row.state !== 'active')
        throw new ComputeError('TENANT_SUSPENDED', `tenant ${tenantId} is suspended`);
      try {
        return await db.transaction().execute(async (trx) => {
          const factor = await trx
            .selectFrom('iam.totp')
            .select(['secret', 'last_counter'])
            .where('principal_id', '=', row.id)
            .where('confirmed', '=', true)
            .forUpdate()
            .executeTakeFirst();
          if (factor) {
            if (totp === undefined) {
              throw new ComputeError('UNAUTHENTICATED', 'a TOTP code is required', {
                details: { mfaRequired: true },
                hint: 'Send the current code from your authenticator as totp.',
              });
            }
            if (!(await spendSecondFactor(trx, row.id, factor, totp))) {
              throw new ComputeError('UNAUTHENTICATED', 'invalid TOTP code', {
                details: { mfaRequired: true, codeRejected: true },
                hint: 'Give the current code from your authenticator, or one of your recovery codes.',
              });
            }
          }
          await trx.deleteFrom('iam.sign_in_attempts').where('account_hash', '=', account).execute();
          const { token, session } = await createSession(row.id, factor !== undefined, trx);
          const principal = toPrincipal(await requirePrincipal(row.id, trx));
          return { token, session, principal };
        });
      } catch (error) {
        // A wrong code is a failed attempt like a wrong password; asking for the code is not.
        if (error instanceof ComputeError && error.details?.codeRejected) await recordSignInFailure(account);
        throw error;
      }
    },
    signOut: (sessionId) => revokeSessionById(sessionId),
    async getSession(sessionId) {
      const row = await db
        .selectFrom('iam.sessions')
        .select(SESSION_COLUMNS)
        .where('id', '=', sessionId)
        .executeTakeFirst();
      if (!row) throw notFound(`session ${sessionId}`);
      return toSession(row);
    },
    async listSessions(principalId, page = {}) {
      const limit = page.limit ?? 50;
      let query = db
        .selectFrom('iam.sessions')
        .select(SESSION_COLUMNS)
        .where('principal_id', '=', principalId)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', clock())
        .orderBy('id')
        .limit(limit + 1);
      if (page.cursor !== undefined) query = query.where('id', '>', page.cursor);
      return pageOf((await query.execute()).map(toSession), limit);
    },
    revokeSession: (sessionId) => revokeSessionById(sessionId),
    async enrollTotp(principalId) {
      const principal = await requirePrincipal(principalId);
      if (principal.kind !== 'person')
        throw new ComputeError('INVALID_STATE', 'only people enroll a TOTP second factor');
      const existing = await db
        .selectFrom('iam.totp')
        .select('confirmed')
        .where('principal_id', '=', principalId)
        .executeTakeFirst();
      if (existing?.confirmed) {
        throw new ComputeError('ALREADY_EXISTS', 'a TOTP second factor is already confirmed for this person');
      }
      const secret = new OTPAuth.Secret({ size: 20 }).base32;
      const sealed = sealer.seal(secret, `totp:${principalId}`);
      await db
        .insertInto('iam.totp')
        .values({ principal_id: principalId, secret: sealed, confirmed: false, created_at: clock() })
        .onConflict((oc) =>
          oc.column('principal_id').doUpdateSet({ secret: sealed, confirmed: false, last_counter: null }),
        )
        .execute();
      return { secret, uri: totpOf(secret, principal.email ?? principal.id).toString() };
    },
    async confirmTotp(principalId, code) {
      return db.transaction().execute(async (trx) => {
        const factor = await lockedFactor(trx, principalId);
        if (!factor)
          throw new ComputeError('INVALID_STATE', 'TOTP is not being enrolled', {
            hint: 'Call totp.enroll first.',
          });
        if (factor.confirmed) throw new ComputeError('ALREADY_EXISTS', 'TOTP is already confirmed');
        const counter = totpCounter(
          sealer.open(factor.secret, `totp:${principalId}`),
          code,
          factor.last_counter,
        );
        if (counter === null)
          throw new ComputeError('INVALID_ARGUMENT', 'invalid TOTP code', { details: { field: 'code' } });
        await trx
          .updateTable('iam.totp')
          .set({ confirmed: true, last_counter: counter })
          .where('principal_id', '=', principalId)
          .execute();
        const recoveryCodes = Array.from({ length: RECOVERY_CODES }, newRecoveryCode);
        await trx.deleteFrom('iam.recovery_codes').where('principal_id', '=', principalId).execute();
        await trx
          .insertInto('iam.recovery_codes')
          .values(
            recoveryCodes.map((code) => ({
              principal_id: principalId,
              code_hash: hashToken(code),
              used_at: null,
            })),
          )
          .execute();
        return { confirmed: true as const, recoveryCodes };
      });
    },
    async removeTotp(principalId, code) {
      return db.transaction().execute(async (trx) => {
        const factor = await lockedFactor(trx, principalId);
        if (!factor?.confirmed) return { removed: false };
        if (!(await spendSecondFactor(trx, principalId, factor, code)))
          throw new ComputeError('INVALID_ARGUMENT', 'invalid TOTP or recovery code', {
            details: { field: 'code' },
            hint: 'Give the current code from your authenticator, or one of your unused recovery codes; an administrator can reset a lost factor (totp.reset).',
          });
        return { removed: await dropTotp(trx, principalId) };
      });
    },
    async resetTotp(principalId, audit) {
      const principal = await requirePrincipal(principalId);
      if (principal.kind !== 'person')
        throw new ComputeError('INVALID_STATE', 'only people have a second factor');
      return db.transaction().execute(async (trx) => {
        const removed = await dropTotp(trx, principalId);
        await recordRecovery(trx, principal.tenant_id, 'totp.reset', principalId, audit);
        return { removed };
      });
    },
    async listRecoveryAudit(tenantId) {
      const rows = await db
        .selectFrom('iam.recovery_audit')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .orderBy('occurred_at', 'desc')
        .limit(500)
        .execute();
      return rows.map((row) => ({
        tenantId: row.tenant_id,
        actor: row.actor,
        action: row.action,
        principalId: row.principal_id,
        requestId: row.request_id,
        occurredAt: iso(row.occurred_at),
      }));
    },
    async changePassword(principalId, input) {
      const row = await db
        .selectFrom('iam.principals')
        .select(['kind', 'password_hash'])
        .where('id', '=', principalId)
        .executeTakeFirst();
      if (!row || row.kind !== 'person') throw notFound(`person ${principalId}`);
      if (!(await verifyPassword(input.currentPassword, row.password_hash)))
        throw new ComputeError('UNAUTHENTICATED', 'the current password is wrong', {
          details: { field: 'currentPassword' },
        });
      if (input.newPassword.length < 8)
        throw new ComputeError('INVALID_ARGUMENT', 'the password must be at least 8 characters', {
          details: { field: 'newPassword' },
        });
      const passwordHash = await hashPassword(input.newPassword);
      const sessionsEnded = await change<number>(async (trx) => {
        await trx
          .updateTable('iam.principals')
          .set({ password_hash: passwordHash })
          .where('id', '=', principalId)
          .execute();
        const ended = await endSessions(trx, principalId, input.keepSessionId);
        return { result: ended.length, changes: ended.map((id) => ({ type: 'credential' as const, id })) };
      });
      return { changed: true as const, sessionsEnded };
    },
    async resetPassword(principalId, audit) {
      const row = await principalRow(principalId);
      if (!row || row.kind !== 'person') throw notFound(`person ${principalId}`);
      const oneTimePassword = newToken('otp_').slice(0, 28);
      const passwordHash = await hashPassword(oneTimePassword);
      const sessionsEnded = await change<number>(async (trx) => {
        await trx
          .updateTable('iam.principals')
          .set({ password_hash: passwordHash })
          .where('id', '=', principalId)
          .execute();
        await recordRecovery(trx, row.tenant_id, 'passwords.reset', principalId, audit);
        const ended = await endSessions(trx, principalId);
        return { result: ended.length, changes: ended.map((id) => ({ type: 'credential' as const, id })) };
      });
      return { oneTimePassword, sessionsEnded };
    },

    async createApiKey(principalId, input) {
      const principal = await requirePrincipal(principalId);
      if (principal.disabled) throw new ComputeError('INVALID_STATE', `principal ${principalId} is disabled`);
      let expiresAt: Date | null = null;
      if (input.expiresAt !== undefined) {
        expiresAt = new Date(input.expiresAt);
        if (Number.isNaN(expiresAt.getTime()) || expiresAt <= clock()) {
          throw new ComputeError('INVALID_ARGUMENT', 'expiresAt must be a time in the future', {
            details: { field: 'expiresAt' },
          });
        }
        // A key that outlives every rotation policy is a key nobody remembers to revoke.
        if (expiresAt.getTime() - clock().getTime() > API_KEY_MAX_LIFETIME_MS) {
          throw new ComputeError('INVALID_ARGUMENT', 'expiresAt must be within 10 years from now', {
            details: { field: 'expiresAt' },
            hint: 'Give a time within 10 years, or leave expiresAt out for a key that lasts until it is revoked.',
          });
        }
      }
      const name = input.name.trim();
      if (name.length === 0 || name.length > 100) {
        throw new ComputeError('INVALID_ARGUMENT', 'name must be 1 to 100 characters', {
          details: { field: 'name' },
        });
      }
      const key = newToken(API_KEY_PREFIX);
      const row = await db.transaction().execute(async (trx) => {
        const now = clock();
        await trx
          .selectFrom('iam.principals')
          .select('id')
          .where('id', '=', principalId)
          .forUpdate()
          .execute();
        await underLimit('apiKeysPerPrincipal', `principal ${principalId}'s API keys`, () =>
          countOf(
            trx
              .selectFrom('iam.api_keys')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('principal_id', '=', principalId)
              .where('revoked_at', 'is', null)
              .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)])),
          ),
        );
        return trx
          .insertInto('iam.api_keys')
          .values({
            id: id('apiKey'),
            principal_id: principalId,
            token_hash: hashToken(key),
            name,
            created_at: now,
            expires_at: expiresAt,
          })
          .returning(API_KEY_COLUMNS)
          .executeTakeFirstOrThrow();
      });
      return { key, apiKey: toApiKey(row) };
    },
    async getApiKey(keyId) {
      const row = await db
        .selectFrom('iam.api_keys')
        .select(API_KEY_COLUMNS)
        .where('id', '=', keyId)
        .executeTakeFirst();
      if (!row) throw notFound(`API key ${keyId}`);
      return toApiKey(row);
    },
    async listApiKeys(principalId, input = {}) {
      const limit = input.limit ?? 50;
      let query = db
        .selectFrom('iam.api_keys')
        .select(API_KEY_COLUMNS)
        .where('principal_id', '=', principalId)
        .orderBy('id')
        .limit(limit + 1);
      if (input.cursor !== undefined) query = query.where('id', '>', input.cursor);
      return pageOf((await query.execute()).map(toApiKey), limit);
    },
    async revokeApiKey(keyId) {
      return change(async (trx) => {
        const row = await trx
          .updateTable('iam.api_keys')
          .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${clock()})` })
          .where('id', '=', keyId)
          .returning(API_KEY_COLUMNS)
          .executeTakeFirst();
        if (!row) throw notFound(`API key ${keyId}`);
        return { result: toApiKey(row), changes: [{ type: 'credential', id: keyId }] };
      });
    },

    async createRole(input) {
      await requireActiveTenant(input.tenantId);
      if (!/^[a-z][a-z0-9-]{0,62}$/.test(input.name)) {
        throw new ComputeError('INVALID_ARGUMENT', 'name must be lowercase letters, digits and dashes', {
          details: { field: 'name' },
        });
      }
      if (Object.hasOwn(BUILT_IN_ROLE_IDS, input.name)) {
        throw new ComputeError('ALREADY_EXISTS', `${input.name} is a built-in role`);
      }
      const actions = [...new Set(input.actions)];
      if (actions.length === 0 || actions.length > 100) {
        throw new ComputeError('INVALID_ARGUMENT', 'a role has 1 to 100 action patterns', {
          details: { field: 'actions' },
        });
      }
      checkPatterns(actions, await knownActions());
      await underLimit('rolesPerTenant', `tenant ${input.tenantId}'s roles`, () =>
        countOf(
          db
            .selectFrom('iam.roles')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('tenant_id', '=', input.tenantId),
        ),
      );
      try {
        const row = await db
          .insertInto('iam.roles')
          .values({
            id: id('role'),
            tenant_id: input.tenantId,
            name: input.name,
            description: input.description ?? '',
            actions,
            created_at: clock(),
          })
          .returning(['id', 'tenant_id', 'name', 'description', 'actions'])
          .executeTakeFirstOrThrow();
        return toRole(row);
      } catch (error) {
        if (isUniqueViolation(error))
          throw new ComputeError(
            'ALREADY_EXISTS',
            `role ${input.name} already exists in tenant ${input.tenantId}`,
          );
        throw error;
      }
    },
    async listRoles(tenantId) {
      const rows = await db
        .selectFrom('iam.roles')
        .select(['id', 'tenant_id', 'name', 'description', 'actions'])
        .where('deleted_at', 'is', null)
        .where((eb) => eb.or([eb('tenant_id', 'is', null), eb('tenant_id', '=', tenantId)]))
        .orderBy('id')
        .execute();
      return { items: rows.map(toRole), nextCursor: null };
    },
    async deleteRole(tenantId, roleId) {
      return change(async (trx) => {
        const row = await trx
          .selectFrom('iam.roles')
          .select(['id', 'tenant_id', 'name', 'description', 'actions'])
          .where('id', '=', roleId)
          .where('deleted_at', 'is', null)
          .executeTakeFirst();
        if (!row || (row.tenant_id !== null && row.tenant_id !== tenantId))
          throw notFound(`role ${roleId} in tenant ${tenantId}`);
        if (row.tenant_id === null)
          throw new ComputeError('INVALID_STATE', `${row.name} is a built-in role and cannot be deleted`);
        const used = await trx
          .selectFrom('iam.bindings')
          .select('id')
          .where('role_id', '=', roleId)
          .where('revoked_at', 'is', null)
          .executeTakeFirst();
        if (used)
          throw new ComputeError('INVALID_STATE', `role ${row.name} is used by binding ${used.id}`, {
            hint: `Revoke binding ${used.id} first.`,
          });
        await trx.updateTable('iam.roles').set({ deleted_at: clock() }).where('id', '=', roleId).execute();
        return { result: toRole(row), changes: [{ type: 'policy' }] };
      });
    },
    async createGroup(input) {
      await requireActiveTenant(input.tenantId);
      try {
        const row = await db
          .insertInto('iam.groups')
          .values({ id: id('group'), tenant_id: input.tenantId, name: input.name, created_at: clock() })
          .returningAll()
          .executeTakeFirstOrThrow();
        return { id: row.id, tenantId: row.tenant_id, name: row.name, createdAt: iso(row.created_at) };
      } catch (error) {
        if (isUniqueViolation(error))
          throw new ComputeError('ALREADY_EXISTS', `group ${input.name} already exists`);
        throw error;
      }
    },
    async addGroupMember(groupId, principalId) {
      await change(async (trx) => {
        const group = await trx
          .selectFrom('iam.groups')
          .select('tenant_id')
          .where('id', '=', groupId)
          .executeTakeFirst();
        const principal = await principalRow(principalId, trx);
        if (!group) throw notFound(`group ${groupId}`);
        if (!principal || principal.tenant_id !== group.tenant_id)
          throw notFound(`principal ${principalId} in tenant ${group.tenant_id}`);
        await trx
          .insertInto('iam.group_members')
          .values({ group_id: groupId, principal_id: principalId })
          .onConflict((oc) => oc.doNothing())
          .execute();
        return { result: undefined, changes: [{ type: 'policy' }] };
      });
    },
    async removeGroupMember(groupId, principalId) {
      await change(async (trx) => {
        await trx
          .deleteFrom('iam.group_members')
          .where('group_id', '=', groupId)
          .where('principal_id', '=', principalId)
          .execute();
        return { result: undefined, changes: [{ type: 'policy' }] };
      });
    },
    async createBinding(input) {
      const scope = input.scope ?? { type: 'tenant' };
      if ((input.principalId === undefined) === (input.groupId === undefined)) {
        throw new ComputeError('INVALID_ARGUMENT', 'a binding names exactly one of principalId and groupId');
      }
      return change(async (trx) => {
        await requireActiveTenant(input.tenantId, trx);
        const role = await findRole(input.tenantId, input.role, trx);
        if (role.id === BUILT_IN_ROLE_IDS['platform-admin'] && input.tenantId !== ROOT_TENANT) {
          throw new ComputeError('INVALID_ARGUMENT', 'platform-admin can only be bound in the root tenant');
        }
        // Built-in roles may name actions of modules this deployment does not run; custom ones may not.
        const known = await knownActions(trx);
        if (role.tenant_id !== null) checkPatterns(role.actions, known);
        if (input.grantedBy) await checkGrant(input.grantedBy, role, input.tenantId, scope, known);
        if (input.principalId !== undefined) {
          const principal = await principalRow(input.principalId, trx);
          if (!principal || (principal.tenant_id !== input.tenantId && principal.tenant_id !== ROOT_TENANT)) {
            throw notFound(`principal ${input.principalId} in tenant ${input.tenantId}`);
          }
        } else {
          const group = await trx
            .selectFrom('iam.groups')
            .select('tenant_id')
            .where('id', '=', input.groupId!)
            .executeTakeFirst();
          if (!group || group.tenant_id !== input.tenantId)
            throw notFound(`group ${input.groupId} in tenant ${input.tenantId}`);
        }
        await lockTenant(input.tenantId, trx);
        await underLimit('bindingsPerTenant', `tenant ${input.tenantId}'s bindings`, () =>
          countOf(
            trx
              .selectFrom('iam.bindings')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('tenant_id', '=', input.tenantId)
              .where('revoked_at', 'is', null),
          ),
        );
        const bindingId = id('binding');
        await trx
          .insertInto('iam.bindings')
          .values({
            id: bindingId,
            tenant_id: input.tenantId,
            role_id: role.id,
            principal_id: input.principalId ?? null,
            group_id: input.groupId ?? null,
            scope_type: scope.type,
            scope_id: scope.type === 'tenant' ? null : scope.id,
            scope_resource_type: scope.type === 'resource' ? scope.resourceType : null,
            created_at: clock(),
          })
          .execute();
        const row = await bindingRow(bindingId, trx);
        return { result: toBinding(row!), changes: [{ type: 'policy' }] };
      });
    },
    async getBinding(bindingId) {
      const row = await bindingRow(bindingId);
      if (!row) throw notFound(`binding ${bindingId}`);
      return toBinding(row);
    },
    async listBindings(input) {
      const limit = input.limit ?? 50;
      let query = bindingsWithRole()
        .where('b.tenant_id', '=', input.tenantId)
        .where('b.revoked_at', 'is', null)
        .orderBy('b.id')
        .limit(limit + 1);
      if (input.principalId !== undefined) query = query.where('b.principal_id', '=', input.principalId);
      if (input.cursor !== undefined) query = query.where('b.id', '>', input.cursor);
      return pageOf((await query.execute()).map(toBinding), limit);
    },
    async revokeBinding(bindingId) {
      return change(async (trx) => {
        await lockPlatformAdmins(trx);
        await trx
          .updateTable('iam.bindings')
          .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${clock()})` })
          .where('id', '=', bindingId)
          .execute();
        const row = await bindingRow(bindingId, trx);
        if (!row) throw notFound(`binding ${bindingId}`);
        if (row.tenant_id === ROOT_TENANT && row.role_id === BUILT_IN_ROLE_IDS['platform-admin'])
          await assertPlatformKeepsAnAdmin(trx, `revoking binding ${bindingId}`);
        return { result: toBinding(row), changes: [{ type: 'policy' }] };
      });
    },

    async issueSessionJwt(sessionId) {
      const row = await db
        .selectFrom('iam.sessions as s')
        .innerJoin('iam.principals as p', 'p.id', 's.principal_id')
        .select([
          's.id',
          's.mfa',
          's.expires_at',
          's.revoked_at',
          's.principal_id',
          'p.tenant_id',
          'p.kind',
          'p.disabled',
        ])
        .where('s.id', '=', sessionId)
        .executeTakeFirst();
      const now = clock();
      if (!row || row.revoked_at !== null || new Date(row.expires_at) <= now || row.disabled) {
        throw new ComputeError('UNAUTHENTICATED', 'the session has ended');
      }
      const key = await keys.active();
      const issuedAt = Math.floor(now.getTime() / 1000);
      const expiresAt = Math.min(
        issuedAt + jwtTtlSeconds,
        Math.floor(new Date(row.expires_at).getTime() / 1000),
      );
      const token = await new SignJWT({ tenant: row.tenant_id, kind: row.kind, mfa: row.mfa, sid: row.id })
        .setProtectedHeader({ alg: JWT_ALG, kid: key.kid, typ: 'JWT' })
        .setIssuer(ISSUER)
        .setSubject(row.principal_id)
        .setIssuedAt(issuedAt)
        .setExpirationTime(expiresAt)
        .sign(key.privateKey);
      return { token, expiresAt: new Date(expiresAt * 1000).toISOString() };
    },
    async jwks() {
      return (await keys.jwks()) as { keys: Record<string, unknown>[] };
    },

    secretsSealed: () => sealer.sealed,
    hasRootAdministrator: () => rootAdministratorExists(db),
    async bootstrapRootAdmin(input) {
      if (await iam.hasRootAdministrator()) return { created: false, principal: null };
      const principal = await iam.createPerson({
        tenantId: ROOT_TENANT,
        email: input.email,
        password: input.password,
        displayName: 'Root administrator',
      });
      await iam.createBinding({ tenantId: ROOT_TENANT, role: 'platform-admin', principalId: principal.id });
      return { created: true, principal };
    },
    async bootstrapDev() {
      const account = async (tenantId: string, email: string, role: string): Promise<DevAccount> => {
        const password = newToken('').slice(0, 24);
        const principal = await iam.createPerson({ tenantId, email, password });
        await iam.createBinding({ tenantId, role, principalId: principal.id });
        const { key } = await iam.createApiKey(principal.id, { name: 'dev' });
        return { tenantId, principalId: principal.id, email, password, role, apiKey: key };
      };
      const root = await db
        .selectFrom('iam.principals')
        .select('id')
        .where('tenant_id', '=', ROOT_TENANT)
        .where('kind', '=', 'person')
        .executeTakeFirst();
      if (root) return null;
      const rootAdmin = await account(ROOT_TENANT, 'admin@root.localhost', 'platform-admin');
      if ((await tenantRow('acme')) === undefined) await iam.createTenant({ id: 'acme', name: 'Acme' });
      const acmeAdmin = await account('acme', 'admin@acme.localhost', 'tenant-admin');
      const acmeMember = await account('acme', 'member@acme.localhost', 'member');
      return { rootAdmin, acmeAdmin, acmeMember };
    },
    async close() {
      clearInterval(flushTimer);
      await flush();
      await feed.close();
    },
  };
  return iam;
}
