/**
 * Event positions for readers of the outbox: `formatCursor` writes the live stream's dotted form
 * (`184467.12`), `parseCursor` reads either form.
 */
import {
  formatListCursor,
  formatStreamCursor,
  type OutboxPosition,
  parsePosition,
} from '@better-compute/core';

export type { OutboxPosition };

/** The stream's form of a position, `184467.12`. */
export function formatCursor(position: OutboxPosition): string {
  return formatStreamCursor(position);
}

/** Reads `184467.12` or `184467:12`. */
export function parseCursor(text: string): OutboxPosition {
  return parsePosition(text, 'either', 'since');
}

export { formatListCursor };
