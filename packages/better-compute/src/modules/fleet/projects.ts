/** Projects: a tenant's groupings. */
import { ComputeError, newId } from '@better-compute/core';
import type { Selectable } from 'kysely';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso, isoOrNull, notFound, pageOfRows } from './common.js';
import { type ProjectsTable, fleetDb } from './tables.js';

type ProjectRow = Selectable<ProjectsTable>;

function projectView(row: ProjectRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    description: row.description,
    state: row.state,
    version: row.version,
    createdAt: iso(row.created_at),
    archivedAt: isoOrNull(row.archived_at),
  };
}

export async function listProjects(
  ctx: CallContext<{ state?: 'active' | 'archived' | undefined; limit: number; cursor?: string | undefined }>,
) {
  let query = fleetDb(ctx.db)
    .selectFrom('compute.projects')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  return pageOfRows(rows, ctx.input.limit, projectView);
}

async function loadProject(ctx: CallContext, projectId: string, forUpdate = false): Promise<ProjectRow> {
  let query = fleetDb(ctx.db)
    .selectFrom('compute.projects')
    .selectAll()
    .where('id', '=', projectId)
    .where('tenant_id', '=', ctx.tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('project', projectId);
  return row;
}

export async function getProject(ctx: CallContext<{ projectId: string }>) {
  return projectView(await loadProject(ctx, ctx.input.projectId));
}

export async function createProject(ctx: CallContext<{ name: string; description?: string | undefined }>) {
  const db = fleetDb(ctx.db);
  const taken = await db
    .selectFrom('compute.projects')
    .select('id')
    .where('tenant_id', '=', ctx.tenantId)
    .where('name', '=', ctx.input.name)
    .executeTakeFirst();
  if (taken)
    throw new ComputeError('ALREADY_EXISTS', `a project named ${ctx.input.name} exists`, {
      details: { id: taken.id },
    });
  const row = await db
    .insertInto('compute.projects')
    .values({
      id: newId('project'),
      tenant_id: ctx.tenantId,
      name: ctx.input.name,
      description: ctx.input.description ?? '',
      created_at: ctx.now(),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({ type: 'project.created', subject: { type: 'project', id: row.id }, data: { name: row.name } });
  return projectView(row);
}

export async function archiveProject(
  ctx: CallContext<{ projectId: string; ifVersion?: number | undefined }>,
) {
  const current = await loadProject(ctx, ctx.input.projectId, true);
  checkVersion('project', current.id, current.version, ctx.input.ifVersion);
  if (current.state === 'archived') return projectView(current);
  const row = await fleetDb(ctx.db)
    .updateTable('compute.projects')
    .set({ state: 'archived', archived_at: ctx.now(), version: current.version + 1 })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({ type: 'project.archived', subject: { type: 'project', id: row.id } });
  return projectView(row);
}
