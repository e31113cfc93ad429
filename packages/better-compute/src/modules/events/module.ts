/** The events module: `events.list` over the outbox. */
import { methods } from '@better-compute/core/methods';
import { bindMethod, defineModule } from '../define-module.js';
import { listEvents } from './service.js';

export const eventsModule = defineModule({
  name: 'events',
  methods: [
    bindMethod(methods['events.list'], ({ db, tenantId, input }) =>
      listEvents(db, { tenantId, type: input.type, limit: input.limit, cursor: input.cursor }),
    ),
  ],
});
