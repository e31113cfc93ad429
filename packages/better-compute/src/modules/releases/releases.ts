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
  followReleasePinStatements,
  type HeldReleasePins,
  type ReleaseManifest,
  type ReleasePinStatement,
  type ReleasePinStatementBody,
  type ReleaseSignature,
  readReleaseTrust,
  type ReleaseTrust,
  verifyRelease,
  verifyReleasePinStatement,
} from '@better-compute/core/release';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { cursorRow, pageOf } from '../../db/pages.js';
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

/** The pin statements accepted so far, oldest first, as a daemon reads them (a welcome's `releasePinStatements`). */
export async function releasePinStatements(db: Kysely<ComputeTables>): Promise<ReleasePinStatement[]> {
  const rows = await releasesDb(db)
    .selectFrom('compute.release_pin_statements')
    .select(['statement', 'signatures'])
    .orderBy('epoch')
    .execute();
  return rows.map((row) => ({ statement: row.statement, signatures: row.signatures }));
}

/**
 * The release keys the deployment holds now: its configuration's (epoch 0), moved along the
 * statements it accepted, each verified again here. A chain that no longer follows from the
 * configuration (its pins were edited since) is INVALID_STATE: nothing verifies until it is mended.
 */
async function currentReleasePins(
  db: Kysely<ComputeTables>,
  trust: ReleaseTrust,
): Promise<{ held: HeldReleasePins; statements: ReleasePinStatement[] }> {
  const statements = await releasePinStatements(db);
  const configured = { pins: trust.pins.map((pin) => pin.keyId), threshold: trust.threshold, epoch: 0 };
  try {
    return { held: followReleasePinStatements(configured, statements), statements };
  } catch (error) {
    throw new ComputeError(
      'INVALID_STATE',
      `the accepted release-pin statements do not follow from the configuration's release.pins: ${(error as Error).message}`,
      {
        hint: 'Put back the release.pins and threshold the first statement was signed under (epoch 0), then restart the server.',
      },
    );
  }
}

/**
 * `releases.rotatePins`: a new release-pin set, accepted only when a threshold of the keys held now
 * signed it and its epoch is the next one (so two statements never race to one epoch: the second
 * conflicts on the row). The same statement again changes nothing. Releases registered before keep
 * their signers; what is registered from now on is verified under the new keys.
 */
export async function rotateReleasePins(
  trust: ReleaseTrust | null,
  ctx: CallContext<{ statement: ReleasePinStatementBody; signatures: ReleaseSignature[] }>,
) {
  if (!trust)
    throw new ComputeError(
      'INVALID_STATE',
      'this deployment pins no release keys, so it has none to change',
      {
        hint: 'Set release.pins and release.threshold in the configuration, then restart the server.',
      },
    );
  const db = releasesDb(ctx.db);
  const document = { statement: ctx.input.statement, signatures: ctx.input.signatures };
  const existing = await db
    .selectFrom('compute.release_pin_statements')
    .selectAll()
    .where('epoch', '=', ctx.input.statement.epoch)
    .executeTakeFirst();
  if (existing) {
    if (canonicalJson(existing.statement) !== canonicalJson(ctx.input.statement))
      throw new ComputeError(
        'ALREADY_EXISTS',
        `a release-pin statement of epoch ${existing.epoch} was accepted already, naming other keys`,
        {
          details: { epoch: existing.epoch },
          hint: `Sign the change with the next epoch (release sign-pins --epoch ${existing.epoch + 1}) by the keys of epoch ${existing.epoch}.`,
        },
      );
    return pinsView(existing, false);
  }
  const { held } = await currentReleasePins(ctx.db, trust);
  if (ctx.input.statement.epoch !== held.epoch + 1)
    throw new ComputeError(
      'INVALID_STATE',
      `the statement's epoch is ${ctx.input.statement.epoch}; the next one is ${held.epoch + 1}`,
      {
        details: { epoch: ctx.input.statement.epoch, currentEpoch: held.epoch },
        hint: `Sign it again with --epoch ${held.epoch + 1}, by the keys of epoch ${held.epoch}.`,
      },
    );
  const verified = verifyReleasePinStatement(document, held);
  const inserted = await db
    .insertInto('compute.release_pin_statements')
    .values({
      epoch: verified.epoch,
      statement: JSON.stringify(ctx.input.statement),
      signatures: JSON.stringify(ctx.input.signatures),
      signers: JSON.stringify(verified.signers),
      registered_at: ctx.now(),
      registered_by: ctx.identity!.principalId,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'release.pins-rotated',
    subject: { type: 'release', id: `epoch-${verified.epoch}` },
    data: {
      epoch: verified.epoch,
      pins: verified.pins,
      threshold: verified.threshold,
      signers: verified.signers,
    },
  });
  return pinsView(inserted, true);
}

function pinsView(
  row: {
    epoch: number;
    statement: ReleasePinStatementBody;
    signers: string[];
    registered_at: Date;
  },
  created: boolean,
) {
  return {
    epoch: row.epoch,
    pins: row.statement.pins,
    threshold: row.statement.threshold,
    signers: row.signers,
    registeredAt: new Date(row.registered_at).toISOString(),
    created,
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
  // The keys of now: the configuration's, moved along the accepted pin statements.
  const held = (await currentReleasePins(ctx.db, trust)).held;
  const release = verifyRelease(
    { manifest: ctx.input.manifest, signatures: ctx.input.signatures },
    { pins: held.pins, threshold: held.threshold },
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
  const after = await cursorRow(ctx.input.cursor, 'release', (id) =>
    db.selectFrom('compute.releases').select('seq').where('id', '=', id).executeTakeFirst(),
  );
  if (after) query = query.where('seq', '<', after.seq);
  const rows = await query.execute();
  const stored = await storedPlatforms(
    ctx.db,
    rows.slice(0, ctx.input.limit).map((row) => row.id),
  );
  return pageOf(rows, ctx.input.limit, (row) => releaseView(row, stored.get(row.id)));
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
