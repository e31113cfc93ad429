/**
 * `release.fetch`: the pieces of stored builds a daemon downloads during an update, as the gateway
 * serves them. Any node may read a registered build: it is what the release keys signed, and each
 * node checks it against its own pins; only a build stored whole is served.
 *
 * Pieces served lately are kept, base64 as sent, each read once however many nodes ask at the same
 * moment. A wave's nodes all fetch the same pieces together, and a build stored whole never changes
 * (its bytes are the ones its signed manifest names; each node checks the digest), so reading them
 * from the database for every node only cost the control plane CPU. Kept a minute, and at most
 * PIECE_CACHE_BYTES in all; a refusal is never kept.
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { artifactPiece } from '../modules/releases/index.js';
import type { DaemonMessage } from './protocol.js';

const PIECE_CACHE_MS = 60_000;
const PIECE_CACHE_BYTES = 64 * 1024 * 1024;

type Piece = { size: number; data: string } | { error: string };

/** Answers a node's `release.fetch` with its `release.piece` (or the piece's refusal). */
export function createReleasePieces(db: Kysely<ComputeTables>, log: (line: string) => void) {
  const pieces = new Map<string, { at: number; piece: Promise<Piece>; bytes: number }>();
  let pieceBytes = 0;
  function servedPiece(version: string, platform: string, offset: number): Promise<Piece> {
    const key = `${version}\u0000${platform}\u0000${offset}`;
    const at = Date.now();
    const kept = pieces.get(key);
    if (kept && at - kept.at < PIECE_CACHE_MS) return kept.piece;
    if (kept) {
      pieces.delete(key);
      pieceBytes -= kept.bytes;
    }
    const entry = {
      at,
      bytes: 0,
      piece: artifactPiece(db, version, platform, offset).then((read) =>
        'error' in read ? read : { size: read.size, data: read.data.toString('base64') },
      ),
    };
    pieces.set(key, entry);
    entry.piece.then(
      (read) => {
        if (pieces.get(key) !== entry) return;
        if ('error' in read) return void pieces.delete(key);
        entry.bytes = read.data.length;
        pieceBytes += entry.bytes;
        // Past the bound, start again: a rollout's pieces are read again at most once.
        if (pieceBytes > PIECE_CACHE_BYTES) {
          pieces.clear();
          pieceBytes = 0;
        }
      },
      () => {
        if (pieces.get(key) === entry) pieces.delete(key);
      },
    );
    return entry.piece;
  }
  return async (nodeId: string, message: Extract<DaemonMessage, { t: 'release.fetch' }>) => {
    try {
      const piece = await servedPiece(message.version, message.platform, message.offset);
      return 'error' in piece
        ? { t: 'release.piece', id: message.id, error: piece.error }
        : { t: 'release.piece', id: message.id, size: piece.size, data: piece.data };
    } catch (error) {
      log(`gateway: serving a release piece to ${nodeId} failed: ${(error as Error).message}`);
      return { t: 'release.piece', id: message.id, error: 'the gateway could not read the build' };
    }
  };
}
