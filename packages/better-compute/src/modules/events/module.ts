/** The events module: `events.list` over the outbox, and the notification the live stream wakes on. */
import { eventsGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { eventsMigrations } from './migrations.js';
import { listEvents } from './service.js';

export const eventsModule = defineModule({
  name: 'events',
  migrations: eventsMigrations,
  methods: [
    implement(eventsGroup, {
      list: ({ db, tenantId, input }) =>
        listEvents(db, { tenantId, type: input.type, limit: input.limit, cursor: input.cursor }),
    }),
  ],
});
