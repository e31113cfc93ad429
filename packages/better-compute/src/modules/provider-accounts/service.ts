/**
 * `providerAccounts.*`: list, get, create, update, delete, offers, bootstrap
 * (docs/provider-accounts.md). The schema has checked a document's fields (credentials are secret
 * references, or the call was refused) before any of this runs; here the references are checked
 * against the tenant's secrets, and opened only where a driver uses them (offers, and the bootstrap
 * job). Each mutation is the caller's one transaction; a bootstrap's long work is a job.
 */
import { type AuthorizationCheck, ComputeError, newId } from '@better-compute/core';
import {
  MAX_PROVIDER_ACCOUNTS_PER_TENANT,
  type ProviderAccountConfig,
  SECRETS_USE_ACTION,
} from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { enqueueJob } from '../../workers/jobs.js';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso, isoOrNull } from '../fleet/common.js';
import { ownedPool } from '../fleet/pools.js';
import { findNode } from '../fleet/queries.js';
import { fleetDb } from '../fleet/tables.js';
import {
  checkSecretReferences,
  openSecretEnv,
  parseSecretReference,
  type SecretSealer,
} from '../secrets/index.js';
import { type ProviderDriver, providerDrivers } from './driver.js';
import {
  type BootstrapHost,
  type ProviderAccountRow,
  providerAccountsDb,
  type ProviderAccountsDb,
  type ProviderBootstrapRow,
} from './tables.js';

/** The job that runs a bootstrap's hosts, one after another. */
export const PROVIDER_BOOTSTRAP_JOB = 'provider-account.bootstrap';
/** How many of an account's bootstraps get shows, newest first. */
const BOOTSTRAPS_SHOWN = 10;

export interface ProviderAccountDeps {
  sealer: SecretSealer;
  drivers?: Record<string, ProviderDriver>;
}

function notFound(accountId: string): ComputeError {
  return new ComputeError('NOT_FOUND', `provider account ${accountId} does not exist`, {
    details: { id: accountId },
    hint: 'List the tenant’s accounts with better-compute provider-accounts list.',
  });
}

export function driverOf(deps: ProviderAccountDeps, name: string): ProviderDriver {
  const driver = (deps.drivers ?? providerDrivers)[name];
  if (!driver)
    throw new ComputeError('UNSUPPORTED', `this deployment has no provider driver ${name}`, {
      details: { driver: name },
      hint: 'This release has the ssh driver.',
    });
  return driver;
}

const hostsOf = (config: ProviderAccountConfig) => config.settings.hosts.length;

function accountView(row: ProviderAccountRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    driver: row.driver,
    version: row.version,
    config: JSON.parse(row.config) as ProviderAccountConfig,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

function bootstrapView(row: ProviderBootstrapRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    accountId: row.account_id,
    poolId: row.pool_id,
    state: row.state,
    hosts: JSON.parse(row.hosts) as BootstrapHost[],
    createdAt: iso(row.created_at),
    finishedAt: isoOrNull(row.finished_at),
  };
}

async function find(db: ProviderAccountsDb, tenantId: string, accountId: string, lock = false) {
  let query = db
    .selectFrom('compute.provider_accounts')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', accountId);
  if (lock) query = query.forUpdate();
  return query.executeTakeFirst();
}

/** The account's credential references are the tenant's own secrets, and exist. */
async function checkCredentials(db: Kysely<ComputeTables>, tenantId: string, config: ProviderAccountConfig) {
  const references = Object.entries(config.credentials).map(([name, secretRef]) => ({
    name: `config.credentials.${name}`,
    secretRef,
  }));
  await checkSecretReferences(db, tenantId, references);
}

function nameTaken(name: string): ComputeError {
  return new ComputeError('ALREADY_EXISTS', `a provider account named ${name} already exists`, {
    details: { field: 'config.name', name },
    hint: 'Update it (better-compute provider-accounts update ID --config-file FILE), or name the account otherwise.',
  });
}

const isUniqueViolation = (error: unknown) =>
  typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';

/** Every account of the tenant, for fleet configuration's export and plan. */
export async function tenantAccounts(db: Kysely<ComputeTables>, tenantId: string) {
  const rows = await providerAccountsDb(db)
    .selectFrom('compute.provider_accounts')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    version: row.version,
    config: JSON.parse(row.config) as ProviderAccountConfig,
  }));
}

/**
 * Naming a secret as an account's credential hands it to the account's driver on every offers and
 * bootstrap, so it is decided on the secret (compute:secrets:use), as a profile's join token is.
 * Another tenant's reference is refused by the method itself.
 */
export async function credentialChecks(
  _db: Kysely<ComputeTables>,
  tenantId: string,
  input: unknown,
): Promise<AuthorizationCheck[]> {
  const credentials =
    (input as { config?: { credentials?: Record<string, string> } }).config?.credentials ?? {};
  return Object.values(credentials).flatMap((reference) => {
    const parsed = typeof reference === 'string' ? parseSecretReference(reference) : null;
    return parsed && parsed.tenantId === tenantId
      ? [{ action: SECRETS_USE_ACTION, resource: { type: 'compute-secret', id: parsed.id, tenantId } }]
      : [];
  });
}

export async function listAccounts(ctx: CallContext<{ limit: number; cursor?: string | undefined }>) {
  let query = providerAccountsDb(ctx.db)
    .selectFrom('compute.provider_accounts')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .orderBy('id')
    .limit(ctx.input.limit + 1);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map((row) => ({
      id: row.id,
      tenantId: row.tenant_id,
      name: row.name,
      driver: row.driver,
      version: row.version,
      hosts: hostsOf(JSON.parse(row.config) as ProviderAccountConfig),
      updatedAt: iso(row.updated_at),
    })),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
}

export async function getAccount(ctx: CallContext<{ accountId: string }>) {
  const db = providerAccountsDb(ctx.db);
  const row = await find(db, ctx.tenantId, ctx.input.accountId);
  if (!row) throw notFound(ctx.input.accountId);
  const bootstraps = await db
    .selectFrom('compute.provider_bootstraps')
    .selectAll()
    .where('account_id', '=', row.id)
    .orderBy('id', 'desc')
    .limit(BOOTSTRAPS_SHOWN)
    .execute();
  return { ...accountView(row), bootstraps: bootstraps.map(bootstrapView) };
}

export function createAccount(deps: ProviderAccountDeps) {
  return async (ctx: CallContext<{ config: ProviderAccountConfig }>) => {
    const db = providerAccountsDb(ctx.db);
    const { config } = ctx.input;
    driverOf(deps, config.driver);
    await checkCredentials(ctx.db, ctx.tenantId, config);
    const { count } = await db
      .selectFrom('compute.provider_accounts')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirstOrThrow();
    if (Number(count) >= MAX_PROVIDER_ACCOUNTS_PER_TENANT)
      throw new ComputeError(
        'QUOTA_EXCEEDED',
        `tenant ${ctx.tenantId} keeps ${MAX_PROVIDER_ACCOUNTS_PER_TENANT} provider accounts, the most a tenant keeps`,
        { details: { limit: MAX_PROVIDER_ACCOUNTS_PER_TENANT }, hint: 'Delete accounts you no longer use.' },
      );
    const now = ctx.now();
    const row = await db
      .insertInto('compute.provider_accounts')
      .values({
        id: newId('providerAccount'),
        tenant_id: ctx.tenantId,
        name: config.name,
        driver: config.driver,
        version: 1,
        config: JSON.stringify(config),
        created_by: ctx.identity?.principalId ?? null,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) throw nameTaken(config.name);
    ctx.emit({
      type: 'providerAccount.created',
      subject: { type: 'providerAccount', id: row.id },
      data: { name: row.name, driver: row.driver, version: 1, hosts: hostsOf(config) },
    });
    return accountView(row);
  };
}

export function updateAccount(deps: ProviderAccountDeps) {
  return async (
    ctx: CallContext<{ accountId: string; config: ProviderAccountConfig; ifVersion?: number | undefined }>,
  ) => {
    const db = providerAccountsDb(ctx.db);
    const { config, ifVersion } = ctx.input;
    const row = await find(db, ctx.tenantId, ctx.input.accountId, true);
    if (!row) throw notFound(ctx.input.accountId);
    checkVersion('provider account', row.id, row.version, ifVersion);
    if (config.driver !== row.driver)
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `config.driver: account ${row.id} uses the ${row.driver} driver; an account's driver never changes`,
        { details: { field: 'config.driver' }, hint: 'Create another account for the other driver.' },
      );
    driverOf(deps, config.driver);
    await checkCredentials(ctx.db, ctx.tenantId, config);
    let updated: ProviderAccountRow;
    try {
      updated = await db
        .updateTable('compute.provider_accounts')
        .set({
          name: config.name,
          version: row.version + 1,
          config: JSON.stringify(config),
          updated_at: ctx.now(),
        })
        .where('id', '=', row.id)
        .returningAll()
        .executeTakeFirstOrThrow();
    } catch (error) {
      if (isUniqueViolation(error)) throw nameTaken(config.name);
      throw error;
    }
    ctx.emit({
      type: 'providerAccount.updated',
      subject: { type: 'providerAccount', id: row.id },
      data: { name: updated.name, driver: updated.driver, version: updated.version, hosts: hostsOf(config) },
    });
    return accountView(updated);
  };
}

async function runningBootstrap(db: ProviderAccountsDb, accountId: string) {
  return db
    .selectFrom('compute.provider_bootstraps')
    .select(['id'])
    .where('account_id', '=', accountId)
    .where('state', '=', 'running')
    .executeTakeFirst();
}

export async function deleteAccount(ctx: CallContext<{ accountId: string; ifVersion?: number | undefined }>) {
  const db = providerAccountsDb(ctx.db);
  const row = await find(db, ctx.tenantId, ctx.input.accountId, true);
  if (!row) throw notFound(ctx.input.accountId);
  checkVersion('provider account', row.id, row.version, ctx.input.ifVersion);
  const running = await runningBootstrap(db, row.id);
  if (running)
    throw new ComputeError(
      'INVALID_STATE',
      `provider account ${row.id} has bootstrap ${running.id} running`,
      {
        details: { id: row.id, bootstrapId: running.id },
        hint: `Wait for it to finish (better-compute provider-accounts get ${row.id}), then delete.`,
      },
    );
  await db.deleteFrom('compute.provider_accounts').where('id', '=', row.id).execute();
  const config = JSON.parse(row.config) as ProviderAccountConfig;
  ctx.emit({
    type: 'providerAccount.deleted',
    subject: { type: 'providerAccount', id: row.id },
    data: { name: row.name, driver: row.driver, version: row.version, hosts: hostsOf(config) },
  });
  return { id: row.id, name: row.name, deleted: true as const };
}

/** The hosts a call names, each one of the account's; all of them when it names none. */
function chosenHosts(config: ProviderAccountConfig, hosts: readonly string[] | undefined): string[] {
  const all = config.settings.hosts.map((host) => host.address);
  if (hosts === undefined) return all;
  const unknown = hosts.filter((host) => !all.includes(host));
  if (unknown.length > 0)
    throw new ComputeError('INVALID_ARGUMENT', `hosts: ${unknown.join(', ')} is not a host of the account`, {
      details: { field: 'hosts', hosts: unknown },
      hint: `The account's hosts are: ${all.join(', ')}.`,
    });
  return [...new Set(hosts)];
}

/** The account's credentials, opened for one driver call; never kept, logged or answered. */
export async function openCredentials(
  db: Kysely<ComputeTables>,
  sealer: SecretSealer,
  tenantId: string,
  config: ProviderAccountConfig,
): Promise<Record<string, string>> {
  const references = Object.entries(config.credentials).map(([name, secretRef]) => ({ name, secretRef }));
  const opened = await openSecretEnv(db, sealer, tenantId, references);
  return Object.fromEntries(opened.map(({ name, value }) => [name, value]));
}

export function accountOffers(deps: ProviderAccountDeps) {
  return async (ctx: CallContext<{ accountId: string; hosts?: string[] | undefined }>) => {
    const row = await find(providerAccountsDb(ctx.db), ctx.tenantId, ctx.input.accountId);
    if (!row) throw notFound(ctx.input.accountId);
    const config = JSON.parse(row.config) as ProviderAccountConfig;
    const driver = driverOf(deps, row.driver);
    const hosts = chosenHosts(config, ctx.input.hosts);
    const credentials = await openCredentials(ctx.db, deps.sealer, ctx.tenantId, config);
    const offers = await driver.offers(
      config,
      credentials,
      hosts.map((address) => ({ address })),
    );
    // A host's word that it is a node counts only for a node of this tenant.
    for (const offer of offers)
      if (offer.nodeId !== null && !(await findNode(ctx.db, offer.nodeId, ctx.tenantId))) offer.nodeId = null;
    return { accountId: row.id, driver: row.driver, offers };
  };
}

export function startBootstrap(deps: ProviderAccountDeps) {
  return async (ctx: CallContext<{ accountId: string; poolId: string; hosts?: string[] | undefined }>) => {
    const db = providerAccountsDb(ctx.db);
    const row = await find(db, ctx.tenantId, ctx.input.accountId, true);
    if (!row) throw notFound(ctx.input.accountId);
    const config = JSON.parse(row.config) as ProviderAccountConfig;
    driverOf(deps, row.driver);
    const pool = await ownedPool(fleetDb(ctx.db), ctx.tenantId, ctx.input.poolId);
    if (pool.state !== 'active')
      throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived; no machine joins it`, {
        details: { field: 'poolId', poolId: pool.id },
        hint: 'Name an active pool of your tenant (better-compute pools list).',
      });
    const hosts = chosenHosts(config, ctx.input.hosts);
    await checkCredentials(ctx.db, ctx.tenantId, config);
    const running = await runningBootstrap(db, row.id);
    if (running)
      throw new ComputeError(
        'INVALID_STATE',
        `provider account ${row.id} has bootstrap ${running.id} running`,
        {
          details: { id: row.id, bootstrapId: running.id },
          hint: `Follow it with better-compute provider-accounts get ${row.id}; start another when it ends.`,
        },
      );
    const now = ctx.now();
    const inserted = await db
      .insertInto('compute.provider_bootstraps')
      .values({
        id: newId('providerBootstrap'),
        tenant_id: ctx.tenantId,
        account_id: row.id,
        pool_id: pool.id,
        state: 'running',
        hosts: JSON.stringify(
          hosts.map((host): BootstrapHost => ({ host, state: 'pending', nodeId: null, error: null })),
        ),
        created_by: ctx.identity?.principalId ?? null,
        created_at: now,
        finished_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await enqueueJob(ctx.db, {
      kind: PROVIDER_BOOTSTRAP_JOB,
      payload: { bootstrapId: inserted.id },
      wake: true,
      // A crashed runner's claim expires and the job runs again, from the hosts not yet done.
      maxAttempts: 5,
    });
    ctx.emit({
      type: 'providerAccount.bootstrap-started',
      subject: { type: 'providerAccount', id: row.id },
      data: { bootstrapId: inserted.id, poolId: pool.id, hosts },
    });
    return bootstrapView(inserted);
  };
}
