/**
 * Event positions for readers of the outbox: `formatCursor` writes the live stream's dotted form
 * (`184467.12`), `parseCursor` reads either form. The catalog of event types: catalog.ts.
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

export {
  eventTypes,
  eventTypeList,
  isEventType,
  type CatalogEventDraft,
  type EventData,
  type EventDraftOf,
  type EventType,
  type EventTypeSpec,
  type SubjectKind,
} from './catalog.js';
