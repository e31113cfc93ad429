/** `dev`: a local server on PGlite, optionally with simulated machines. */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';

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
    stateDir: {
      type: 'string',
      description:
        "Where dev keeps its store, accounts, PKI bundle and its node's state (default .better-compute in the working directory)",
      placeholder: 'DIR',
    },
    node: { type: 'boolean', description: 'Also run one real bcd on this machine, joined and approved' },
    console: {
      type: 'boolean',
      default: true,
      description: 'Serve the web console on the same origin (--no-console: the API alone)',
    },
    consoleDev: {
      type: 'boolean',
      description: "Run the console in Next.js's development mode (hot reload) instead of its build",
    },
    logFormat: {
      type: 'string',
      choices: ['text', 'json'],
      description:
        'Print an access line per API request on standard output, as text or json (off by default: the simulated machines’ heartbeats are API requests too)',
    },
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
    'better-compute dev --node --state-dir /srv/dev-state',
    'better-compute dev --sim 2 --console-dev',
  ],
  async run({ flags, io, log }) {
    if (flags.consoleDev && !flags.console)
      throw new CliError('INVALID_ARGUMENT', '--console-dev runs the console, which --no-console turns off', {
        hint: 'Pass one of them: --console-dev for hot reload, or --no-console for the API alone.',
        details: { field: 'console-dev' },
      });
    const { startDev } = await import('../../../host/dev.js');
    const { accessLogger } = await import('../../../host/access-log.js');
    const options = {
      cwd: io.cwd,
      env: io.env,
      port: flags.port,
      memory: flags.memory,
      stateDir: flags.stateDir,
      sim: flags.sim,
      node: flags.node,
      console: flags.console,
      consoleDev: flags.consoleDev,
      signal: io.signal ?? new AbortController().signal,
      log,
      accessLog: flags.logFormat ? accessLogger(flags.logFormat, (line: string) => io.out(line)) : undefined,
    };
    await startDev(options);
    return undefined;
  },
});
