/**
 * The bootstrap job: brings a bootstrap's hosts up as nodes of its pool, one host after another.
 * For each host it asks the driver whether the host is already a node of the tenant (then there is
 * nothing to do), else mints a single-use, pre-approved join token for the pool (joinTokens.create's
 * own service, with its event), has the driver run the project's installer with the token on its
 * standard input, and checks that the node the host reports joined this tenant. Every host's
 * outcome is written with its event in a transaction of its own, so a job claimed again after a
 * crash goes on from the hosts not yet done; the installer keeps a joined host's identity, so a
 * host retried is never joined twice.
 */
import { ComputeError } from '@better-compute/core';
import type { ProviderAccountConfig } from '@better-compute/core/methods';
import type { CatalogEventDraft } from '@better-compute/events';
import type { Kysely } from 'kysely';
import { writeEvents } from '../../db/unit-of-work.js';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext, EventDraft, JobContext } from '../define-module.js';
import { createJoinToken, revokeJoinToken } from '../fleet/join.js';
import { findNode } from '../fleet/queries.js';
import { driverOf, openCredentials, type ProviderAccountDeps } from './service.js';
import { oneLine } from './ssh.js';
import { type BootstrapHost, providerAccountsDb, type ProviderBootstrapRow } from './tables.js';

/** How long a bootstrap's join token lives: the installer uses it within minutes. */
const TOKEN_LIFETIME_SECONDS = 3600;

export interface BootstrapDeps extends ProviderAccountDeps {
  /** The project's installer (`daemon install-script`) with `url` as the server it joins. */
  installer(url: string): Promise<string>;
}

type Emit = (event: CatalogEventDraft) => void;

/** Runs `work` in a transaction and writes the events it emits with it, as a method call would. */
async function inTransaction<T>(
  db: Kysely<ComputeTables>,
  row: ProviderBootstrapRow,
  work: (trx: Kysely<ComputeTables>, emit: Emit) => Promise<T>,
): Promise<T> {
  return db.transaction().execute(async (trx) => {
    const events: EventDraft[] = [];
    const result = await work(trx, (event) => void events.push(event as EventDraft));
    await writeEvents(trx, events, {
      tenantId: row.tenant_id,
      actor: row.created_by,
      requestId: `bootstrap:${row.id}`,
    });
    return result;
  });
}

/** A service's call context for the job's own calls (the join token's mint and revoke). */
function jobCall<Input>(
  trx: Kysely<ComputeTables>,
  row: ProviderBootstrapRow,
  input: Input,
  emit: Emit,
  now: () => Date,
): CallContext<Input> {
  return {
    input,
    identity: null,
    tenantId: row.tenant_id,
    requestId: `bootstrap:${row.id}`,
    db: trx,
    emit,
    now,
    tenantExists: async () => true,
    routes: () => [],
  };
}

function reason(error: unknown): string {
  if (error instanceof ComputeError) return oneLine(`${error.code}: ${error.message}`);
  return oneLine(error instanceof Error ? error.message : String(error));
}

export function bootstrapJob(deps: BootstrapDeps) {
  return async (context: JobContext): Promise<void> => {
    const db = providerAccountsDb(context.db);
    const id = String(context.payload.bootstrapId ?? '');
    const row = await db
      .selectFrom('compute.provider_bootstraps')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row || row.state !== 'running') return;
    const subject = { type: 'providerAccount' as const, id: row.account_id };
    const hosts = JSON.parse(row.hosts) as BootstrapHost[];

    const save = (host: BootstrapHost, event: CatalogEventDraft | null) =>
      inTransaction(context.db, row, async (trx, emit) => {
        await providerAccountsDb(trx)
          .updateTable('compute.provider_bootstraps')
          .set({ hosts: JSON.stringify(hosts) })
          .where('id', '=', row.id)
          .execute();
        if (event) emit(event);
        return host;
      });
    const fail = (host: BootstrapHost, error: unknown) => {
      host.state = 'failed';
      host.error = reason(error);
      return save(host, {
        type: 'providerAccount.host-failed',
        subject,
        data: { bootstrapId: row.id, poolId: row.pool_id, host: host.host, error: host.error },
      });
    };

    const account = await db
      .selectFrom('compute.provider_accounts')
      .selectAll()
      .where('id', '=', row.account_id)
      .executeTakeFirst();
    let prepared: {
      config: ProviderAccountConfig;
      credentials: Record<string, string>;
      installer: string;
    } | null = null;
    let setupError: unknown = null;
    try {
      if (!account) throw new Error(`provider account ${row.account_id} is gone`);
      const config = JSON.parse(account.config) as ProviderAccountConfig;
      driverOf(deps, account.driver);
      const credentials = await openCredentials(context.db, deps.sealer, row.tenant_id, config);
      prepared = { config, credentials, installer: await deps.installer(config.settings.joinUrl) };
    } catch (error) {
      setupError = error;
    }

    for (const host of hosts) {
      if (host.state !== 'pending' && host.state !== 'running') continue;
      if (!prepared || !account) {
        await fail(host, setupError);
        continue;
      }
      const driver = driverOf(deps, account.driver);
      host.state = 'running';
      await save(host, null);
      try {
        const [offer] = await driver.offers(prepared.config, prepared.credentials, [{ address: host.host }]);
        if (!offer?.reachable) throw new Error(offer?.error ?? `${host.host} did not answer`);
        const existing = offer.nodeId ? await findNode(context.db, offer.nodeId, row.tenant_id) : undefined;
        if (offer.nodeId && !existing)
          throw new Error(
            `${host.host} holds node ${offer.nodeId}, which tenant ${row.tenant_id} does not have; remove /var/lib/bcd on the host to join it afresh`,
          );
        if (existing) {
          host.state = 'already-node';
          host.nodeId = existing.id;
          host.error = null;
          await save(host, {
            type: 'providerAccount.host-joined',
            subject,
            data: {
              bootstrapId: row.id,
              poolId: row.pool_id,
              host: host.host,
              nodeId: existing.id,
              alreadyNode: true,
            },
          });
          continue;
        }
        const minted = await inTransaction(context.db, row, (trx, emit) =>
          createJoinToken(
            jobCall(
              trx,
              row,
              {
                poolId: row.pool_id,
                uses: 1,
                lifetimeSeconds: TOKEN_LIFETIME_SECONDS,
                preApproved: true,
                description: `bootstrap ${row.id}: ${host.host}`.slice(0, 200),
              },
              emit,
              context.now,
            ),
          ),
        );
        let nodeId: string;
        try {
          ({ nodeId } = await driver.bootstrap(prepared.config, prepared.credentials, {
            machine: { address: host.host },
            installer: prepared.installer,
            joinToken: minted.token,
          }));
        } catch (error) {
          // A token the host did not use is of no use to anyone: revoke it.
          await inTransaction(context.db, row, (trx, emit) =>
            revokeJoinToken(jobCall(trx, row, { joinTokenId: minted.joinToken.id }, emit, context.now)),
          ).catch(() => {});
          throw error;
        }
        const node = await findNode(context.db, nodeId, row.tenant_id);
        if (!node)
          throw new Error(`${host.host} reports node ${nodeId}, which tenant ${row.tenant_id} does not have`);
        host.state = 'joined';
        host.nodeId = node.id;
        host.error = null;
        await save(host, {
          type: 'providerAccount.host-joined',
          subject,
          data: {
            bootstrapId: row.id,
            poolId: row.pool_id,
            host: host.host,
            nodeId: node.id,
            alreadyNode: false,
          },
        });
      } catch (error) {
        await fail(host, error);
      }
    }

    const failed = hosts.filter((host) => host.state === 'failed').length;
    const state = failed === 0 ? 'succeeded' : 'failed';
    await inTransaction(context.db, row, async (trx, emit) => {
      await providerAccountsDb(trx)
        .updateTable('compute.provider_bootstraps')
        .set({ state, finished_at: context.now(), hosts: JSON.stringify(hosts) })
        .where('id', '=', row.id)
        .execute();
      emit({
        type: 'providerAccount.bootstrap-finished',
        subject,
        data: { bootstrapId: row.id, poolId: row.pool_id, state, joined: hosts.length - failed, failed },
      });
    });
  };
}
