/** `serve`: the API and the worker roles of one replica, until SIGINT or SIGTERM. */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';

export default defineCommand({
  name: 'serve',
  group: 'Operate',
  summary: 'Run the API and the worker roles until SIGINT or SIGTERM',
  target: 'config',
  output: false,
  flags: {
    port: {
      type: 'number',
      integer: true,
      min: 0,
      max: 65535,
      default: 8080,
      description: 'The port to listen on',
    },
    host: {
      type: 'string',
      default: '127.0.0.1',
      description: 'The address to listen on',
      placeholder: 'ADDRESS',
    },
    roles: {
      type: 'string',
      repeated: true,
      choices: ['api', 'controllers', 'sinks', 'gateway'],
      default: 'api,controllers,sinks,gateway',
      description: 'What this replica runs',
    },
  },
  examples: [
    'better-compute serve',
    'better-compute serve --port 8080 --host 0.0.0.0 --roles api',
    'better-compute serve --roles controllers,sinks',
    'better-compute serve --roles gateway --port 8081',
  ],
  async run({ flags, compute, io, log }) {
    // `--roles ''` would start a replica that serves nothing and runs nothing.
    if (flags.roles.length === 0)
      throw new CliError('INVALID_ARGUMENT', '--roles names no role', {
        hint: 'Pass --roles with api, controllers, sinks or gateway (comma-separated), or leave it out for all four.',
        details: { field: 'roles' },
      });
    const { serve } = await import('../../../host/serve.js');
    const instance = await compute();
    await serve({
      compute: instance,
      port: flags.port,
      host: flags.host,
      roles: flags.roles,
      signal: io.signal ?? new AbortController().signal,
      log,
      env: io.env,
    });
    return undefined;
  },
});
