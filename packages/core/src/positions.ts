/**
 * Outbox positions. Each event has a position: the id of the transaction that wrote it (as a
 * snapshot-safe xid8) and its index within that transaction. `events.list` cursors write it with a
 * colon (`184467:12`), the live stream with a dot (`184467.12`).
 */
import { ComputeError } from './errors.js';

export interface OutboxPosition {
  /** The writing transaction's id, as a decimal string (it can exceed 2^53). */
  tx: string;
  /** The event's index within its transaction. */
  index: number;
}

const POSITION = /^(\d{1,20})([:.])(\d{1,9})$/;

/** `184467:12`, the form of `events.list` cursors. */
export function formatListCursor(position: OutboxPosition): string {
  return `${position.tx}:${position.index}`;
}

/** `184467.12`, the form of the live stream's ids. */
export function formatStreamCursor(position: OutboxPosition): string {
  return `${position.tx}.${position.index}`;
}

/**
 * Parses a position. `accept` says which separators are allowed: `events list --cursor` takes
 * only the colon, `events watch --since` either.
 */
export function parsePosition(
  text: string,
  accept: 'list' | 'stream' | 'either' = 'either',
  field = 'cursor',
): OutboxPosition {
  const match = POSITION.exec(text.trim());
  const separator = match?.[2];
  const allowed = accept === 'either' || (accept === 'list' ? separator === ':' : separator === '.');
  if (!match || !allowed) {
    const form =
      accept === 'list' ? '184467:12' : accept === 'stream' ? '184467.12' : '184467:12 or 184467.12';
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${field} must be an outbox position like ${form} (got "${text}")`,
      {
        details: { field },
      },
    );
  }
  return { tx: BigInt(match[1]!).toString(), index: Number(match[3]) };
}

/** Orders two positions: negative when `a` comes first. */
export function comparePositions(a: OutboxPosition, b: OutboxPosition): number {
  const ta = BigInt(a.tx);
  const tb = BigInt(b.tx);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.index - b.index;
}
