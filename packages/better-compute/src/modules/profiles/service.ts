/**
 * `profiles.*`: list, get, validate, render, create, update, delete (docs/profiles.md). The schema
 * has checked a document's fields before any of this runs; here a document is checked against the
 * tenant's world: its pool is one the tenant owns and has not archived, its image is one the tenant
 * can boot (by id, or by name with the catalog's digest), and its join token reference names a
 * secret of the tenant. Each mutation is the caller's transaction.
 */
import { ComputeError, newId } from '@better-compute/core';
import { MAX_PROFILES_PER_TENANT, type ProfileDocument } from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso } from '../fleet/common.js';
import { visiblePool } from '../fleet/pools.js';
import { fleetDb } from '../fleet/tables.js';
import { checkSecretReferences, parseSecretReference } from '../secrets/index.js';
import { visibleImages } from '../vps/queries.js';
import type { ImageRow } from '../vps/tables.js';
import { documentDigest, renderProfile } from './render.js';
import { type ProfileRow, profilesDb, type ProfilesDb } from './tables.js';

/**
 * The seam the metal module fills: whether a machine that is deploying or active uses a profile.
 * A profile in use is not deleted. It runs in the delete's transaction after the profile's row is
 * locked, so a deploy that locks the row too (profileForDeploy) cannot start in between.
 */
export type ProfileInUse = (
  db: Kysely<ComputeTables>,
  tenantId: string,
  profileId: string,
) => Promise<{ machineId: string; state: string } | null>;

/** Until the metal module lands no machine uses a profile. */
export const noProfileInUse: ProfileInUse = async () => null;

interface Named {
  profileId?: string | undefined;
  name?: string | undefined;
}

const label = (input: Named) => input.profileId ?? input.name ?? '?';

function notFound(input: Named): ComputeError {
  return new ComputeError('NOT_FOUND', `profile ${label(input)} does not exist`, {
    details: { id: label(input) },
    hint: 'List the tenant’s profiles with better-compute profiles list.',
  });
}

/** A refusal of one field of the document, named by its path (document.node.poolId). */
function fieldError(code: string, field: string, message: string, hint: string): ComputeError {
  return new ComputeError(code, `${field}: ${message}`, { details: { field }, hint });
}

const imageLabel = (document: ProfileDocument) =>
  document.image.imageId ?? `${document.image.name}@${document.image.digest}`;

function profileView(row: ProfileRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    version: row.version,
    documentSha256: row.document_sha256,
    document: JSON.parse(row.document) as ProfileDocument,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

function summaryView(row: ProfileRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    version: row.version,
    poolId: row.pool_id,
    image: row.image,
    documentSha256: row.document_sha256,
    updatedAt: iso(row.updated_at),
  };
}

async function find(db: ProfilesDb, tenantId: string, input: Named, lock?: 'update' | 'share') {
  let query = db.selectFrom('compute.profiles').selectAll().where('tenant_id', '=', tenantId);
  query =
    input.profileId !== undefined
      ? query.where('id', '=', input.profileId)
      : query.where('name', '=', input.name!);
  if (lock === 'update') query = query.forUpdate();
  if (lock === 'share') query = query.forShare();
  return query.executeTakeFirst();
}

interface Resolved {
  pool: { id: string; name: string };
  image: ImageRow;
  secretId: string;
}

async function resolvePool(db: Kysely<ComputeTables>, tenantId: string, poolId: string) {
  const field = 'document.node.poolId';
  let seen: Awaited<ReturnType<typeof visiblePool>>;
  try {
    seen = await visiblePool(fleetDb(db), tenantId, poolId);
  } catch (error) {
    if (error instanceof ComputeError && error.code === 'NOT_FOUND')
      throw fieldError(
        'NOT_FOUND',
        field,
        `pool ${poolId} does not exist`,
        'better-compute pools list shows your pools.',
      );
    throw error;
  }
  // A machine joins a pool as its owner's node: a pool only offered to the tenant is not one to add machines to.
  if (!seen.owner)
    throw fieldError(
      'ACCESS_DENIED',
      field,
      `pool ${poolId} is offered to ${tenantId}, not owned by it; machines join pools their own tenant owns`,
      'Name one of your own pools (better-compute pools list).',
    );
  if (seen.pool.state !== 'active')
    throw fieldError(
      'INVALID_STATE',
      field,
      `pool ${poolId} is archived; no machine joins it`,
      'Name an active pool of your tenant.',
    );
  return { id: seen.pool.id, name: seen.pool.name };
}

async function resolveImage(db: Kysely<ComputeTables>, tenantId: string, document: ProfileDocument) {
  const { imageId, name, digest } = document.image;
  if (imageId !== undefined) {
    const [row] = await visibleImages(db, tenantId, { imageId });
    if (!row)
      throw fieldError(
        'NOT_FOUND',
        'document.image.imageId',
        `image ${imageId} does not exist`,
        'better-compute images list shows the images your tenant can boot.',
      );
    return row;
  }
  const rows = await visibleImages(db, tenantId, { name: name! });
  const hex = digest!.slice('sha256:'.length);
  const match = rows.find((row) => row.sha256 === hex);
  if (match) return match;
  if (rows.length === 0)
    throw fieldError(
      'NOT_FOUND',
      'document.image.name',
      `no image named ${name} exists for tenant ${tenantId}`,
      'better-compute images list shows the images your tenant can boot.',
    );
  throw fieldError(
    'INVALID_ARGUMENT',
    'document.image.digest',
    `image ${name} has digest sha256:${rows[0]!.sha256}, not ${digest}`,
    `Pin the digest the catalog has (better-compute images get ${rows[0]!.id}), or register the image you meant.`,
  );
}

async function resolveSecret(db: Kysely<ComputeTables>, tenantId: string, reference: string) {
  const field = 'document.joinTokenRef';
  const parsed = parseSecretReference(reference);
  if (!parsed || parsed.tenantId !== tenantId)
    throw fieldError(
      'INVALID_ARGUMENT',
      field,
      `names a secret of another tenant; a profile of ${tenantId} uses ${tenantId}'s secrets only`,
      `Put the join token in ${tenantId} (better-compute secrets put NAME --stdin) and name secret://${tenantId}/sec_….`,
    );
  try {
    await checkSecretReferences(db, tenantId, [{ name: 'joinTokenRef', secretRef: reference }]);
  } catch (error) {
    if (error instanceof ComputeError && error.code === 'NOT_FOUND')
      throw fieldError(
        'NOT_FOUND',
        field,
        `secret ${parsed.id} does not exist in tenant ${tenantId}`,
        'Put the join token (better-compute secrets put NAME --stdin) and name the reference it answers.',
      );
    throw error;
  }
  return parsed.id;
}

/** Checks what a document names against the tenant's pools, images and secrets. */
async function resolveDocument(
  db: Kysely<ComputeTables>,
  tenantId: string,
  document: ProfileDocument,
): Promise<Resolved> {
  const pool = await resolvePool(db, tenantId, document.node.poolId);
  const image = await resolveImage(db, tenantId, document);
  const secretId = await resolveSecret(db, tenantId, document.joinTokenRef);
  return { pool, image, secretId };
}

export async function listProfiles(
  ctx: CallContext<{ poolId?: string | undefined; limit: number; cursor?: string | undefined }>,
) {
  let query = profilesDb(ctx.db)
    .selectFrom('compute.profiles')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .orderBy('id')
    .limit(ctx.input.limit + 1);
  if (ctx.input.poolId !== undefined) query = query.where('pool_id', '=', ctx.input.poolId);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  return { items: page.map(summaryView), nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null };
}

export async function getProfile(ctx: CallContext<Named>) {
  const row = await find(profilesDb(ctx.db), ctx.tenantId, ctx.input);
  if (!row) throw notFound(ctx.input);
  return profileView(row);
}

export async function validateProfile(ctx: CallContext<{ document: ProfileDocument }>) {
  const { document } = ctx.input;
  const resolved = await resolveDocument(ctx.db, ctx.tenantId, document);
  const existing = await find(profilesDb(ctx.db), ctx.tenantId, { name: document.name });
  return {
    valid: true as const,
    name: document.name,
    documentSha256: documentDigest(document),
    pool: resolved.pool,
    image: { id: resolved.image.id, name: resolved.image.name, sha256: resolved.image.sha256 },
    joinTokenSecret: { id: resolved.secretId },
    existing: existing ? { id: existing.id, version: existing.version } : null,
  };
}

export async function renderStoredOrGiven(
  ctx: CallContext<Named & { document?: ProfileDocument | undefined }>,
) {
  let document = ctx.input.document;
  let profile: { id: string; version: number } | null = null;
  if (document === undefined) {
    const row = await find(profilesDb(ctx.db), ctx.tenantId, ctx.input);
    if (!row) throw notFound(ctx.input);
    document = JSON.parse(row.document) as ProfileDocument;
    profile = { id: row.id, version: row.version };
  }
  const { image } = await resolveDocument(ctx.db, ctx.tenantId, document);
  return renderProfile({ tenantId: ctx.tenantId, document, profile, image });
}

function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';
}

function nameTaken(name: string): ComputeError {
  return new ComputeError('ALREADY_EXISTS', `a profile named ${name} already exists`, {
    details: { field: 'document.name', name },
    hint: `Update it (better-compute profiles update ${name} --file FILE), or give the document another name.`,
  });
}

export async function createProfile(ctx: CallContext<{ document: ProfileDocument }>) {
  const db = profilesDb(ctx.db);
  const { document } = ctx.input;
  await resolveDocument(ctx.db, ctx.tenantId, document);
  const { count } = await db
    .selectFrom('compute.profiles')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirstOrThrow();
  if (Number(count) >= MAX_PROFILES_PER_TENANT)
    throw new ComputeError(
      'QUOTA_EXCEEDED',
      `tenant ${ctx.tenantId} keeps ${MAX_PROFILES_PER_TENANT} profiles, the most a tenant keeps`,
      { details: { limit: MAX_PROFILES_PER_TENANT }, hint: 'Delete profiles no machine uses.' },
    );
  const now = ctx.now();
  const row = await db
    .insertInto('compute.profiles')
    .values({
      id: newId('profile'),
      tenant_id: ctx.tenantId,
      name: document.name,
      version: 1,
      pool_id: document.node.poolId,
      image: imageLabel(document),
      document: JSON.stringify(document),
      document_sha256: documentDigest(document),
      created_by: ctx.identity?.principalId ?? null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!row) throw nameTaken(document.name);
  ctx.emit({
    type: 'profile.created',
    subject: { type: 'profile', id: row.id },
    data: { name: row.name, version: row.version, documentSha256: row.document_sha256 },
  });
  return profileView(row);
}

export async function updateProfile(
  ctx: CallContext<Named & { document: ProfileDocument; ifVersion?: number | undefined }>,
) {
  const db = profilesDb(ctx.db);
  const { document, ifVersion } = ctx.input;
  const row = await find(db, ctx.tenantId, ctx.input, 'update');
  if (!row) throw notFound(ctx.input);
  checkVersion('profile', row.id, row.version, ifVersion);
  await resolveDocument(ctx.db, ctx.tenantId, document);
  let updated: ProfileRow;
  try {
    updated = await db
      .updateTable('compute.profiles')
      .set({
        name: document.name,
        version: row.version + 1,
        pool_id: document.node.poolId,
        image: imageLabel(document),
        document: JSON.stringify(document),
        document_sha256: documentDigest(document),
        updated_at: ctx.now(),
      })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  } catch (error) {
    if (isUniqueViolation(error)) throw nameTaken(document.name);
    throw error;
  }
  ctx.emit({
    type: 'profile.updated',
    subject: { type: 'profile', id: updated.id },
    data: { name: updated.name, version: updated.version, documentSha256: updated.document_sha256 },
  });
  return profileView(updated);
}

export function deleteProfile(inUse: ProfileInUse) {
  return async (ctx: CallContext<Named & { ifVersion?: number | undefined }>) => {
    const db = profilesDb(ctx.db);
    const row = await find(db, ctx.tenantId, ctx.input, 'update');
    if (!row) throw notFound(ctx.input);
    checkVersion('profile', row.id, row.version, ctx.input.ifVersion);
    const user = await inUse(ctx.db, ctx.tenantId, row.id);
    if (user)
      throw new ComputeError(
        'INVALID_STATE',
        `profile ${row.name} is in use: machine ${user.machineId} is ${user.state} with it`,
        {
          details: { id: row.id, machineId: user.machineId, state: user.state },
          hint: `Undeploy machine ${user.machineId} first (better-compute metal undeploy), or keep the profile.`,
        },
      );
    await db.deleteFrom('compute.profiles').where('id', '=', row.id).execute();
    ctx.emit({
      type: 'profile.deleted',
      subject: { type: 'profile', id: row.id },
      data: { name: row.name, version: row.version, documentSha256: row.document_sha256 },
    });
    return { id: row.id, name: row.name, deleted: true as const };
  };
}

/**
 * What the metal module reads when it deploys a machine with a profile: the stored document and its
 * version, share-locked until the deploy's transaction ends, so the profile is neither deleted nor
 * changed under it; NOT_FOUND when the tenant has no such profile.
 */
export async function profileForDeploy(
  db: Kysely<ComputeTables>,
  tenantId: string,
  profile: Named,
): Promise<{ id: string; version: number; document: ProfileDocument; documentSha256: string }> {
  const row = await find(profilesDb(db), tenantId, profile, 'share');
  if (!row) throw notFound(profile);
  return {
    id: row.id,
    version: row.version,
    document: JSON.parse(row.document) as ProfileDocument,
    documentSha256: row.document_sha256,
  };
}
