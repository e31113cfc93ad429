/** Sites: a tenant's places. */
import { ComputeError, newId } from '@better-compute/core';
import type { Selectable } from 'kysely';
import type { CallContext } from '../define-module.js';
import { checkVersion, invalidState, iso, nextLabels, notFound, pageOfRows, sameLabels } from './common.js';
import { type SitesTable, fleetDb } from './tables.js';

type SiteRow = Selectable<SitesTable>;

function siteView(row: SiteRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    region: row.region,
    description: row.description,
    labels: row.labels,
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';
}

async function loadSite(ctx: CallContext, siteId: string, forUpdate = false): Promise<SiteRow> {
  let query = fleetDb(ctx.db)
    .selectFrom('compute.sites')
    .selectAll()
    .where('id', '=', siteId)
    .where('tenant_id', '=', ctx.tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('site', siteId);
  return row;
}

export async function listSites(ctx: CallContext<{ limit: number; cursor?: string | undefined }>) {
  let query = fleetDb(ctx.db).selectFrom('compute.sites').selectAll().where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  return pageOfRows(rows, ctx.input.limit, siteView);
}

export async function getSite(ctx: CallContext<{ siteId: string }>) {
  return siteView(await loadSite(ctx, ctx.input.siteId));
}

export async function createSite(
  ctx: CallContext<{
    name: string;
    region?: string | undefined;
    description?: string | undefined;
    labels?: Record<string, string> | undefined;
  }>,
) {
  const now = ctx.now();
  const id = newId('site');
  const db = fleetDb(ctx.db);
  const taken = await db
    .selectFrom('compute.sites')
    .select('id')
    .where('tenant_id', '=', ctx.tenantId)
    .where('name', '=', ctx.input.name)
    .executeTakeFirst();
  if (taken)
    throw new ComputeError('ALREADY_EXISTS', `a site named ${ctx.input.name} exists`, {
      details: { id: taken.id },
    });
  const row = await db
    .insertInto('compute.sites')
    .values({
      id,
      tenant_id: ctx.tenantId,
      name: ctx.input.name,
      region: ctx.input.region ?? null,
      description: ctx.input.description ?? '',
      labels: JSON.stringify(ctx.input.labels ?? {}),
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
    .catch((error: unknown) => {
      if (isUniqueViolation(error))
        throw new ComputeError('ALREADY_EXISTS', `a site named ${ctx.input.name} exists`);
      throw error;
    });
  ctx.emit({ type: 'site.created', subject: { type: 'site', id }, data: { name: row.name } });
  return siteView(row);
}

export async function updateSite(
  ctx: CallContext<{
    siteId: string;
    name?: string | undefined;
    region?: string | null | undefined;
    description?: string | undefined;
    labels?: Record<string, string> | undefined;
    removeLabels?: string[] | undefined;
    ifVersion?: number | undefined;
  }>,
) {
  const { input } = ctx;
  const current = await loadSite(ctx, input.siteId, true);
  checkVersion('site', current.id, current.version, input.ifVersion);
  const labels = nextLabels(current.labels, input.labels, input.removeLabels);
  const set = {
    ...(input.name !== undefined && input.name !== current.name ? { name: input.name } : {}),
    ...(input.region !== undefined && input.region !== current.region ? { region: input.region } : {}),
    ...(input.description !== undefined && input.description !== current.description
      ? { description: input.description }
      : {}),
    ...(!sameLabels(labels, current.labels) ? { labels: JSON.stringify(labels) } : {}),
  };
  // Nothing changes: no version, no event, so an --if-version writer is not sent a CONFLICT for it.
  if (Object.keys(set).length === 0) return siteView(current);
  const row = await fleetDb(ctx.db)
    .updateTable('compute.sites')
    .set({ ...set, version: current.version + 1, updated_at: ctx.now() })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow()
    .catch((error: unknown) => {
      if (isUniqueViolation(error))
        throw new ComputeError('ALREADY_EXISTS', `a site named ${input.name} exists`);
      throw error;
    });
  ctx.emit({ type: 'site.updated', subject: { type: 'site', id: row.id }, data: { version: row.version } });
  return siteView(row);
}

/**
 * Deletes a site that never had a pool. Pools are archived, never deleted (reservations, usage and
 * retired nodes name them, and each names its site), so a site that had one stays as their record.
 */
export async function deleteSite(ctx: CallContext<{ siteId: string; ifVersion?: number | undefined }>) {
  const current = await loadSite(ctx, ctx.input.siteId, true);
  checkVersion('site', current.id, current.version, ctx.input.ifVersion);
  const db = fleetDb(ctx.db);
  const pools = await db
    .selectFrom('compute.pools')
    .select(['id', 'state'])
    .where('site_id', '=', current.id)
    .orderBy('id')
    .execute();
  if (pools.length > 0) {
    const active = pools.filter((p) => p.state === 'active');
    throw invalidState(
      `site ${current.id} has ${pools.length} pool(s), ${active.length} of them active; a site that has had a pool is kept`,
      { pools: pools.length, activePools: active.length, poolId: (active[0] ?? pools[0])!.id },
      'Pools are archived, never deleted or moved, so this site stays as their record: archive its active pools (better-compute pools archive POOL) so they take no new work, and rename or relabel the site with better-compute sites update.',
    );
  }
  await db.deleteFrom('compute.sites').where('id', '=', current.id).execute();
  ctx.emit({ type: 'site.deleted', subject: { type: 'site', id: current.id } });
  return { id: current.id, deleted: true as const };
}
