/**
 * A release's builds in the deployment: `releases.upload` stores one platform's bytes piece by
 * piece, in order, and keeps them only once all of them have the size and SHA-256 the signed
 * manifest names; the gateway serves them to nodes over their sessions (`artifactPiece`), so a
 * node needs no other network access to update. What is stored is checked again by every node
 * against its own pinned keys: the server's check only keeps a wrong upload from being served.
 */
import { createHash } from 'node:crypto';
import { ComputeError } from '@better-compute/core';
import type { ReleaseManifest } from '@better-compute/core/release';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { type ReleasesDb, releasesDb } from './tables.js';

/** The most bytes one piece served to a node holds: its base64 fits the session's 1 MiB frames. */
const SERVED_PIECE_BYTES = 262_144;

const releaseByVersion = (db: ReleasesDb, version: string) =>
  db.selectFrom('compute.releases').selectAll().where('version', '=', version).executeTakeFirst();

function notRegistered(version: string) {
  return new ComputeError('NOT_FOUND', `release ${version} is not registered`, {
    details: { version },
    hint: 'Register its signed envelope first: better-compute releases register ENVELOPE --tenant root.',
  });
}

export async function uploadArtifact(
  ctx: CallContext<{ version: string; platform: string; offset: number; data: string }>,
) {
  const db = releasesDb(ctx.db);
  const { version, platform, offset } = ctx.input;
  const data = Buffer.from(ctx.input.data, 'base64');
  if (data.toString('base64') !== ctx.input.data)
    throw new ComputeError('INVALID_ARGUMENT', 'data is not canonical base64', {
      details: { field: 'data' },
      hint: 'Send the piece as standard base64 with its padding.',
    });
  const release = await releaseByVersion(db, version);
  if (!release) throw notRegistered(version);
  const manifest = JSON.parse(release.manifest) as ReleaseManifest;
  const artifact = manifest.artifacts.find((a) => a.platform === platform);
  if (!artifact)
    throw new ComputeError('NOT_FOUND', `release ${version} has no build for ${platform}`, {
      details: { version, platform, platforms: manifest.artifacts.map((a) => a.platform) },
      hint: `Its manifest names ${manifest.artifacts.map((a) => a.platform).join(', ')}.`,
    });
  await db
    .insertInto('compute.release_artifacts')
    .values({ release_id: release.id, platform, size: artifact.size, sha256: artifact.sha256 })
    .onConflict((oc) => oc.columns(['release_id', 'platform']).doNothing())
    .execute();
  const row = await db
    .selectFrom('compute.release_artifacts')
    .selectAll()
    .where('release_id', '=', release.id)
    .where('platform', '=', platform)
    .forUpdate()
    .executeTakeFirstOrThrow();
  let stored = Number(row.stored);
  const answer = (complete: boolean) => ({ version, platform, stored, size: artifact.size, complete });
  if (offset < stored) {
    // A retried piece: the same bytes at the same place change nothing.
    const same = await db
      .selectFrom('compute.release_artifact_chunks')
      .select('data')
      .where('release_id', '=', release.id)
      .where('platform', '=', platform)
      .where('offset', '=', offset as never)
      .executeTakeFirst();
    if (same && Buffer.from(same.data).equals(data)) return answer(row.complete);
    if (offset !== 0 || row.complete)
      throw new ComputeError(
        row.complete ? 'ALREADY_EXISTS' : 'CONFLICT',
        row.complete
          ? `the ${platform} build of release ${version} is stored whole already`
          : `bytes from ${offset} of the ${platform} build of release ${version} are stored already, and differ`,
        {
          details: { version, platform, offset, stored },
          hint: row.complete
            ? 'Nothing to do: nodes fetch it through their gateway.'
            : 'Send the piece at the stored length, or start again from offset 0.',
        },
      );
    // A new upload from the start replaces an unfinished one.
    await db
      .deleteFrom('compute.release_artifact_chunks')
      .where('release_id', '=', release.id)
      .where('platform', '=', platform)
      .execute();
    stored = 0;
  }
  if (offset > stored)
    throw new ComputeError('INVALID_ARGUMENT', `offset ${offset} is past the ${stored} bytes stored`, {
      details: { field: 'offset', stored },
      hint: `Send the piece that starts at ${stored}.`,
    });
  if (stored + data.length > artifact.size)
    throw new ComputeError(
      'DIGEST_MISMATCH',
      `the ${platform} build of release ${version} is ${artifact.size} bytes; this piece ends at ${stored + data.length}`,
      {
        details: { version, platform, size: artifact.size, end: stored + data.length },
        hint: 'Upload the file whose size and SHA-256 the signed manifest names.',
      },
    );
  await db
    .insertInto('compute.release_artifact_chunks')
    .values({ release_id: release.id, platform, offset: stored, data })
    .execute();
  stored += data.length;
  let complete = false;
  if (stored === artifact.size) {
    const hash = createHash('sha256');
    for (const piece of await pieces(db, release.id, platform)) hash.update(piece.data);
    const sha256 = hash.digest('hex');
    if (sha256 !== artifact.sha256)
      throw new ComputeError(
        'DIGEST_MISMATCH',
        `the ${platform} build uploaded for release ${version} has SHA-256 ${sha256}; the manifest names ${artifact.sha256}`,
        {
          details: { version, platform, sha256, expected: artifact.sha256 },
          hint: 'Upload the exact file that was signed, starting again at offset 0.',
        },
      );
    complete = true;
    ctx.emit({
      type: 'release.artifact-stored',
      subject: { type: 'release', id: release.id },
      data: { version, platform, size: artifact.size, sha256 },
    });
  }
  await db
    .updateTable('compute.release_artifacts')
    .set({ stored, complete })
    .where('release_id', '=', release.id)
    .where('platform', '=', platform)
    .execute();
  return answer(complete);
}

const pieces = (db: ReleasesDb, releaseId: string, platform: string) =>
  db
    .selectFrom('compute.release_artifact_chunks')
    .select(['offset', 'data'])
    .where('release_id', '=', releaseId)
    .where('platform', '=', platform)
    .orderBy('offset')
    .execute();

/** The platforms each release stores whole: release id → platforms. */
export async function storedPlatforms(
  db: Kysely<ComputeTables>,
  releaseIds: readonly string[],
): Promise<Map<string, Set<string>>> {
  const found = new Map<string, Set<string>>();
  if (releaseIds.length === 0) return found;
  const rows = await releasesDb(db)
    .selectFrom('compute.release_artifacts')
    .select(['release_id', 'platform'])
    .where('release_id', 'in', releaseIds)
    .where('complete', '=', true)
    .execute();
  for (const row of rows) {
    const set = found.get(row.release_id) ?? new Set<string>();
    set.add(row.platform);
    found.set(row.release_id, set);
  }
  return found;
}

/**
 * A piece of a stored build for a node's daemon (the gateway's `release.fetch`): the bytes from
 * `offset`, at most SERVED_PIECE_BYTES, and the whole size. Only a build stored whole is served.
 */
export async function artifactPiece(
  db: Kysely<ComputeTables>,
  version: string,
  platform: string,
  offset: number,
): Promise<{ size: number; data: Buffer } | { error: string }> {
  const rdb = releasesDb(db);
  const release = await releaseByVersion(rdb, version);
  if (!release) return { error: `release ${version} is not registered` };
  const artifact = await rdb
    .selectFrom('compute.release_artifacts')
    .select(['size', 'complete'])
    .where('release_id', '=', release.id)
    .where('platform', '=', platform)
    .executeTakeFirst();
  if (!artifact?.complete)
    return { error: `the deployment holds no ${platform} build of release ${version}` };
  const size = Number(artifact.size);
  if (!Number.isSafeInteger(offset) || offset < 0 || offset > size)
    return { error: `offset ${offset} is outside the ${size} bytes of the build` };
  // The piece holding `offset` and those after it, up to the served size.
  const rows = await rdb
    .selectFrom('compute.release_artifact_chunks')
    .select(['offset', 'data'])
    .where('release_id', '=', release.id)
    .where('platform', '=', platform)
    .where('offset', '>', (offset - 65_536) as never)
    .where('offset', '<', (offset + SERVED_PIECE_BYTES) as never)
    .orderBy('offset')
    .execute();
  const parts: Buffer[] = [];
  let length = 0;
  for (const row of rows) {
    const start = Number(row.offset);
    const bytes = Buffer.from(row.data);
    const from = Math.max(0, offset - start);
    if (from >= bytes.length) continue;
    const slice = bytes.subarray(from, from + SERVED_PIECE_BYTES - length);
    parts.push(slice);
    length += slice.length;
    if (length >= SERVED_PIECE_BYTES) break;
  }
  return { size, data: Buffer.concat(parts) };
}

/**
 * A registered release's signed envelope, for a rollout to carry to its nodes, with the platforms
 * it stores; null when the version is not registered.
 */
export async function releaseForRollout(
  db: Kysely<ComputeTables>,
  version: string,
): Promise<{
  id: string;
  version: string;
  envelope: { manifest: ReleaseManifest; signatures: unknown[] };
  stored: string[];
} | null> {
  const release = await releaseByVersion(releasesDb(db), version);
  if (!release) return null;
  const stored = (await storedPlatforms(db, [release.id])).get(release.id) ?? new Set<string>();
  return {
    id: release.id,
    version: release.version,
    envelope: { manifest: JSON.parse(release.manifest) as ReleaseManifest, signatures: release.signatures },
    stored: [...stored],
  };
}
