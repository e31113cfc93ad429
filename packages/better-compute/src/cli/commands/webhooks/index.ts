/** The webhooks commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import webhooksList from './list.js';
import webhooksGet from './get.js';
import webhooksCreate from './create.js';
import webhooksUpdate from './update.js';
import webhooksDelete from './delete.js';
import webhooksPing from './ping.js';
import webhooksRotateSecret from './rotate-secret.js';
import webhooksDeliveries from './deliveries.js';
import webhooksRedeliver from './redeliver.js';
import webhooksEventTypes from './event-types.js';

export const webhooksCommands: readonly AnyCommand[] = [
  webhooksList,
  webhooksGet,
  webhooksCreate,
  webhooksUpdate,
  webhooksDelete,
  webhooksPing,
  webhooksRotateSecret,
  webhooksDeliveries,
  webhooksRedeliver,
  webhooksEventTypes,
] as readonly AnyCommand[];
