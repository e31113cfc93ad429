/**
 * The `releases` group's service: `register` accepts an envelope only when a threshold of the
 * deployment's pinned release keys signed its manifest (the configuration's `release`), and stores
 * it once per version: the same manifest again changes nothing, another manifest under a taken
 * version is ALREADY_EXISTS. `list` and `get` read them back with their envelopes, so a machine can
 * verify a release against its own pins. The handler lets only the root tenant call any of them.
 */
import { ComputeError, newId } from '@better-compute/core';
import {
  canonicalJson,
  type ReleaseManifest,
  type ReleaseSignature,
  readReleaseTrust,
  type ReleaseTrust,
  verifyRelease,
} from '@better-compute/core/release';
import type { CallContext } from '../define-module.js';
import { storedPlatforms } from './artifacts.js';
import { type ReleaseRow, type ReleasesDb, releasesDb } from './tables.js';

/** The configuration's `release`: the keys that may sign releases, and how many must. */
export interface ReleaseSettings {
  /** Release key ids (`sha256/…`, as `release keygen` prints them) or their public keys. */
  pins?: string[];
  /** How many distinct pinned keys must sign a release; default every pin. */
  threshold?: number;
}

/** The deployment's release trust, or null when it pins no key; a mistake is INVALID_CONFIG at start. */
export function releaseTrustOf(settings: ReleaseSettings | undefined): ReleaseTrust | null {
  if (settings === undefined || (settings.pins === undefined && settings.threshold === undefined))
    return null;
  return readReleaseTrust(settings.pins ?? [], settings.threshold, 'INVALID_CONFIG', 'release.pins');
}

function releaseView(row: ReleaseRow, stored: ReadonlySet<string> = new Set()) {
  const manifest = JSON.parse(row.manifest) as ReleaseManifest;
  return {
    id: row.id,
    version: row.version,
    minimumVersion: row.minimum_version,
    digest: row.digest,
    artifacts: manifest.artifacts.map((artifact) => ({
      ...artifact,
      url: artifact.url ?? null,
      stored: stored.has(artifact.platform),
    })),
    signers: row.signers,
    manifest,
    signatures: row.signatures,
    registeredAt: new Date(row.registered_at).toISOString(),
    registeredBy: row.registered_by,
  };
}

const byVersion = (db: ReleasesDb, version: string) =>
  db.selectFrom('compute.releases').selectAll().where('version', '=', version).executeTakeFirst();

export async function registerRelease(
  trust: ReleaseTrust | null,
  ctx: CallContext<{ manifest: ReleaseManifest; signatures: ReleaseSignature[] }>,
) {
  if (!trust)
    throw new ComputeError(
      'INVALID_STATE',
      'this deployment pins no release keys, so it registers no release',
      {
        hint: 'Set release.pins (the key ids "better-compute release keygen" printed) and release.threshold in the configuration, then restart the server.',
      },
    );
  const release = verifyRelease(
    { manifest: ctx.input.manifest, signatures: ctx.input.signatures },
    { pins: trust },
  );
  const { manifest } = release;
  const db = releasesDb(ctx.db);
  const inserted = await db
    .insertInto('compute.releases')
    .values({
      id: newId('release'),
      version: manifest.version,
      minimum_version: manifest.minimumVersion,
      digest: release.digest,
      manifest: canonicalJson(manifest),
      signatures: JSON.stringify(ctx.input.signatures),
      signers: JSON.stringify(release.signers),
      registered_at: ctx.now(),
      registered_by: ctx.identity!.principalId,
    })
    .onConflict((oc) => oc.column('version').doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!inserted) {
    // Taken, by this manifest (a retry: nothing changes) or by another one.
    const existing = (await byVersion(db, manifest.version))!;
    if (existing.digest !== release.digest)
      throw new ComputeError(
        'ALREADY_EXISTS',
        `release ${manifest.version} is registered already, with another manifest (digest ${existing.digest})`,
        {
          details: { version: manifest.version, id: existing.id, digest: existing.digest },
          hint: 'A version is registered once: give the new build a new version, sign it, and register that.',
        },
      );
    const stored = (await storedPlatforms(ctx.db, [existing.id])).get(existing.id);
    return { ...releaseView(existing, stored), created: false };
  }
  ctx.emit({
    type: 'release.registered',
    subject: { type: 'release', id: inserted.id },
    data: {
      version: manifest.version,
      minimumVersion: manifest.minimumVersion,
      digest: release.digest,
      platforms: manifest.artifacts.map((artifact) => artifact.platform),
      signers: release.signers,
    },
  });
  return { ...releaseView(inserted), created: true };
}

export async function listReleases(ctx: CallContext<{ limit: number; cursor?: string | undefined }>) {
  const db = releasesDb(ctx.db);
  let query = db
    .selectFrom('compute.releases')
    .selectAll()
    .orderBy('seq', 'desc')
    .limit(ctx.input.limit + 1);
  if (ctx.input.cursor) {
    const after = await db
      .selectFrom('compute.releases')
      .select('seq')
      .where('id', '=', ctx.input.cursor)
      .executeTakeFirst();
    if (!after)
      throw new ComputeError('INVALID_ARGUMENT', 'the cursor names no release', {
        details: { field: 'cursor' },
        hint: 'Pass the nextCursor of the previous page, or leave --cursor out.',
      });
    query = query.where('seq', '<', after.seq);
  }
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  const stored = await storedPlatforms(
    ctx.db,
    page.map((row) => row.id),
  );
  return {
    items: page.map((row) => releaseView(row, stored.get(row.id))),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
}

export async function getRelease(
  ctx: CallContext<{ releaseId?: string | undefined; version?: string | undefined }>,
) {
  const db = releasesDb(ctx.db);
  const { releaseId, version } = ctx.input;
  const row = releaseId
    ? await db.selectFrom('compute.releases').selectAll().where('id', '=', releaseId).executeTakeFirst()
    : await byVersion(db, version!);
  if (!row)
    throw new ComputeError('NOT_FOUND', `release ${releaseId ?? version} does not exist`, {
      details: releaseId ? { id: releaseId } : { version },
      hint: 'List the registered releases with "better-compute releases list".',
    });
  return releaseView(row, (await storedPlatforms(ctx.db, [row.id])).get(row.id));
}
