/** Kysely's view of the releases module's table. */
import type { ColumnType, Generated, Kysely, Selectable } from 'kysely';
import type { ReleasePinStatementBody, ReleaseSignature } from '@better-compute/core/release';
import type { ComputeTables } from '../../db/tables.js';

interface ReleasesTable {
  id: string;
  seq: Generated<string>;
  version: string;
  minimum_version: string;
  /** SHA-256 of the manifest's canonical JSON, 64 lowercase hex digits. */
  digest: string;
  /** The manifest's canonical JSON. */
  manifest: string;
  signatures: ColumnType<ReleaseSignature[], string, never>;
  signers: ColumnType<string[], string, never>;
  registered_at: ColumnType<Date, Date | string, never>;
  registered_by: string;
}

interface ReleaseArtifactsTable {
  release_id: string;
  platform: string;
  size: ColumnType<string, number, never>;
  sha256: string;
  /** Bytes stored so far (bigint, read as a string). */
  stored: ColumnType<string, number | undefined, number>;
  complete: ColumnType<boolean, boolean | undefined, boolean>;
}

interface ReleaseArtifactChunksTable {
  release_id: string;
  platform: string;
  offset: ColumnType<string, number, never>;
  data: ColumnType<Uint8Array, Uint8Array, never>;
}

interface ReleasePinStatementsTable {
  epoch: number;
  statement: ColumnType<ReleasePinStatementBody, string, never>;
  signatures: ColumnType<ReleaseSignature[], string, never>;
  signers: ColumnType<string[], string, never>;
  registered_at: ColumnType<Date, Date | string, never>;
  registered_by: string;
}

interface ReleaseTables extends ComputeTables {
  'compute.release_pin_statements': ReleasePinStatementsTable;
  'compute.releases': ReleasesTable;
  'compute.release_artifacts': ReleaseArtifactsTable;
  'compute.release_artifact_chunks': ReleaseArtifactChunksTable;
}

export type ReleaseRow = Selectable<ReleasesTable>;
export type ReleasesDb = Kysely<ReleaseTables>;
export const releasesDb = (db: Kysely<ComputeTables>): ReleasesDb => db as unknown as ReleasesDb;
