/** The commands module: `commands.list/get/cancel/run`; the gateway delivers what it queues. */
import { methods } from '@better-compute/core/methods';
import { bindMethod, defineModule } from '../define-module.js';
import { commandsMigrations } from './migrations.js';
import { cancelCommand, getCommand, listCommands, queueCommand } from './service.js';

export const commandsModule = defineModule({
  name: 'commands',
  migrations: commandsMigrations,
  methods: [
    bindMethod(methods['commands.list'], listCommands),
    bindMethod(methods['commands.get'], getCommand),
    bindMethod(methods['commands.cancel'], cancelCommand),
    bindMethod(methods['commands.run'], (ctx) =>
      queueCommand(
        ctx.db,
        {
          tenantId: ctx.tenantId,
          nodeId: ctx.input.nodeId,
          kind: ctx.input.kind,
          payload: ctx.input.payload ?? {},
          ttlSeconds: ctx.input.ttlSeconds,
          now: ctx.now(),
        },
        ctx.emit,
      ),
    ),
  ],
});
