/** `dev`: a local server on PGlite, optionally with simulated machines. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'dev',
  group: 'Operate',
  summary: 'Run a local server on PGlite, with --sim N simulated machines',
  target: 'none',
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
    memory: { type: 'boolean', description: 'Keep the database in memory instead of .better-compute/dev/' },
    node: { type: 'boolean', description: 'Also run one real bcd on this machine, joined and approved' },
    sim: {
      type: 'number',
      integer: true,
      min: 0,
      default: 0,
      description: 'How many simulated machines to run',
      placeholder: 'N',
    },
  },
  examples: [
    'better-compute dev',
    'better-compute dev --memory --sim 8',
    'better-compute dev --sim 8 --node',
  ],
  async run({ flags, io, log }) {
    const { startDev } = await import('../../../host/dev.js');
    const options = {
      cwd: io.cwd,
      env: io.env,
      port: flags.port,
      memory: flags.memory,
      sim: flags.sim,
      node: flags.node,
      signal: io.signal ?? new AbortController().signal,
      log,
    };
    await startDev(options);
    return undefined;
  },
});
