/**
 * What the parts of the server outside modules/ use of the events module: the live stream reads
 * the outbox with its reader, wakes on its notification and keeps the tenants it watches marked.
 */
export { EVENTS_CHANNEL } from './migrations.js';
export { type EventRecord, listEvents, typeMatcher } from './service.js';
export { markWatched } from './watches.js';
