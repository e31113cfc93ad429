/**
 * What other modules read of the VPS module's tables: the flavor and image a sandbox launches
 * with, and the instance a tunnel opens to. Nobody else queries compute.flavors, compute.images or
 * compute.instances (docs/architecture.md, "Who queries which table"), but placement's shared
 * kernel, which counts instances on a node.
 */
import { ROOT_TENANT } from '@better-compute/core';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { type FlavorRow, type ImageRow, vpsDb } from './tables.js';

/**
 * A flavor as a launch reads it, share-locked until the caller's transaction ends so it cannot be
 * deleted under the launch; deleted ones included (the caller says what that means).
 */
export async function flavorForLaunch(
  db: Kysely<ComputeTables>,
  flavorId: string,
): Promise<FlavorRow | undefined> {
  return vpsDb(db)
    .selectFrom('compute.flavors')
    .selectAll()
    .where('id', '=', flavorId)
    .forShare()
    .executeTakeFirst();
}

/** An image the caller knows exists (a template's, checked when it was made); it throws otherwise. */
export async function imageById(db: Kysely<ComputeTables>, imageId: string): Promise<ImageRow> {
  return vpsDb(db)
    .selectFrom('compute.images')
    .selectAll()
    .where('id', '=', imageId)
    .executeTakeFirstOrThrow();
}

/**
 * The tenant's instance a tunnel names: its node, its state and the sandbox that manages it, if
 * any (read from the row as JSON, as instances have no such column today: a sandbox is its own row,
 * and the refusal the guide asks for holds should one ever carry it). Undefined when there is none.
 */
export async function instanceForTunnel(
  db: Kysely<ComputeTables>,
  tenantId: string,
  instanceId: string,
): Promise<{ node_id: string | null; state: string; sandbox_id: string | null } | undefined> {
  const found = await sql<{ node_id: string | null; state: string; sandbox_id: string | null }>`
    select node_id, state, to_jsonb(i) ->> 'sandbox_id' as sandbox_id
      from compute.instances i where id = ${instanceId} and tenant_id = ${tenantId}`.execute(db);
  return found.rows[0];
}

/** The flavors of a tenant's pools that are not deleted, by id: what fleet configuration reads. */
export async function tenantFlavors(db: Kysely<ComputeTables>, tenantId: string): Promise<FlavorRow[]> {
  return vpsDb(db)
    .selectFrom('compute.flavors')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('deleted_at', 'is', null)
    .orderBy('id')
    .execute();
}

/**
 * The images a tenant can boot (its own and the platform's, ROOT_TENANT's) with an id or a name:
 * what a provision profile names. At most two rows (a name is unique in its tenant), the tenant's
 * own first.
 */
export async function visibleImages(
  db: Kysely<ComputeTables>,
  tenantId: string,
  by: { imageId: string } | { name: string },
): Promise<ImageRow[]> {
  let query = vpsDb(db)
    .selectFrom('compute.images')
    .selectAll()
    .where('tenant_id', 'in', [tenantId, ROOT_TENANT]);
  query = 'imageId' in by ? query.where('id', '=', by.imageId) : query.where('name', '=', by.name);
  const rows = await query.execute();
  return rows.sort((a, b) => Number(b.tenant_id === tenantId) - Number(a.tenant_id === tenantId));
}
