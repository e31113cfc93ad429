/**
 * The provider accounts module: `providerAccounts.*` (docs/provider-accounts.md). Built per
 * deployment: it opens account credentials with the deployment's secret, and runs the project's
 * installer, which compute.ts hands it (modules do not reach into the command line).
 */
import type { AuthorizationCheck } from '@better-compute/core';
import { providerAccountsGroup } from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { defineModule, implement, type MethodBinding } from '../define-module.js';
import { createSecretSealer } from '../secrets/index.js';
import { bootstrapJob, type BootstrapDeps } from './bootstrap.js';
import { providerAccountsMigrations } from './migrations.js';
import {
  accountOffers,
  createAccount,
  credentialChecks,
  deleteAccount,
  getAccount,
  listAccounts,
  PROVIDER_BOOTSTRAP_JOB,
  startBootstrap,
  updateAccount,
} from './service.js';

/** A bootstrap mints a join token for the pool per host: decided as joinTokens.create is. */
async function bootstrapChecks(
  _db: Kysely<ComputeTables>,
  tenantId: string,
  input: unknown,
): Promise<AuthorizationCheck[]> {
  void input;
  return [{ action: 'compute:join-tokens:create', resource: { type: 'tenant', id: tenantId, tenantId } }];
}

const noInstaller = async (): Promise<string> => {
  throw new Error('this server was built without the node installer');
};

export function createProviderAccountsModule(
  options: { secret?: string | undefined; installer?: BootstrapDeps['installer'] } = {},
) {
  const deps: BootstrapDeps = {
    sealer: createSecretSealer(options.secret),
    installer: options.installer ?? noInstaller,
  };
  const accounts = implement(providerAccountsGroup, {
    list: listAccounts,
    get: getAccount,
    create: createAccount(deps),
    update: updateAccount(deps),
    delete: deleteAccount,
    offers: accountOffers(deps),
    bootstrap: startBootstrap(deps),
  });
  for (const binding of accounts.bindings as MethodBinding[]) {
    if (binding.method.name === 'create' || binding.method.name === 'update')
      binding.checks = credentialChecks;
    if (binding.method.name === 'bootstrap') binding.checks = bootstrapChecks;
  }
  return defineModule({
    name: 'provider-accounts',
    migrations: providerAccountsMigrations,
    methods: [accounts],
    jobs: { [PROVIDER_BOOTSTRAP_JOB]: bootstrapJob(deps) },
  });
}

/** The module without a secret or installer: what the method table's coverage is checked against. */
export const providerAccountsModule = createProviderAccountsModule();
