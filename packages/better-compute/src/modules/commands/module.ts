/** The commands module: `commands.list/get/cancel/run`; the gateway delivers what it queues. */
import { commandsGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { commandGauges } from './gauges.js';
import { commandsMigrations } from './migrations.js';
import { cancelCommand, getCommand, listCommands, runCommand } from './service.js';

export const commandsModule = defineModule({
  name: 'commands',
  migrations: commandsMigrations,
  gauges: commandGauges,
  methods: [
    implement(commandsGroup, {
      list: listCommands,
      get: getCommand,
      cancel: cancelCommand,
      run: runCommand,
    }),
  ],
});
