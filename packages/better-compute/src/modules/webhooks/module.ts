/**
 * The webhooks module: subscriptions (`webhooks.*`), and the fan-out and delivery loops a `sinks`
 * replica runs. Built per deployment, since its handlers and loops follow the deployment's
 * webhook settings and seal secrets under its secret.
 */
import { webhooksGroup } from '@better-compute/core/methods';
import type { WebhookSettings } from '../../config/define-config.js';
import { defineModule, implement } from '../define-module.js';
import { startWebhookLoops } from './controller.js';
import { webhookGauges } from './gauges.js';
import { listDeliveries, ping, redeliver } from './deliveries.js';
import { webhooksMigrations } from './migrations.js';
import { webhookRuntime } from './settings.js';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listEventTypes,
  listWebhooks,
  rotateWebhookSecret,
  updateWebhook,
} from './subscriptions.js';

export function createWebhooksModule(settings?: WebhookSettings, secret?: string) {
  const runtime = webhookRuntime(settings, secret);
  return {
    ...defineModule({
      name: 'webhooks',
      migrations: webhooksMigrations,
      methods: [
        implement(webhooksGroup, {
          list: listWebhooks,
          get: getWebhook,
          create: (ctx) => createWebhook(runtime, ctx),
          update: (ctx) => updateWebhook(runtime, ctx),
          delete: deleteWebhook,
          ping,
          rotateSecret: (ctx) => rotateWebhookSecret(runtime, ctx),
          deliveries: listDeliveries,
          redeliver,
          eventTypes: listEventTypes,
        }),
      ],
      gauges: webhookGauges,
    }),
    loops: [{ role: 'sinks' as const, start: (context) => startWebhookLoops(context, runtime) }],
  } satisfies import('../define-module.js').ComputeModule;
}

/** The module with the default settings: what the method table's coverage is checked against. */
export const webhooksModule = createWebhooksModule();
