/** `serve`: the API and the worker roles of one replica, until SIGINT or SIGTERM. */
import { isatty } from 'node:tty';
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
    tlsCert: {
      type: 'string',
      description:
        'This replica’s gateway certificate (pki issue-gateway): serve TLS, ask daemons for node certificates, link to other replicas',
      placeholder: 'FILE',
    },
    tlsKey: { type: 'string', description: 'The private key of --tls-cert', placeholder: 'FILE' },
    gatewayUrl: {
      type: 'string',
      description: 'The address daemons and other replicas reach this gateway at (default: where it listens)',
      placeholder: 'URL',
    },
    metricsPort: {
      type: 'number',
      integer: true,
      min: 0,
      max: 65535,
      description:
        'Serve /metrics (Prometheus) on this port of its own, without a token; else it is served on the API port only with BETTER_COMPUTE_METRICS_TOKEN',
    },
    metricsHost: {
      type: 'string',
      default: '127.0.0.1',
      description: 'The address the --metrics-port listener binds',
      placeholder: 'ADDRESS',
    },
    logFormat: {
      type: 'string',
      choices: ['json', 'text'],
      description:
        'The access lines on standard output, one per request: json, or text (default json when standard output is not a terminal)',
    },
  },
  examples: [
    'better-compute serve',
    'better-compute serve --port 8080 --host 0.0.0.0 --roles api',
    'better-compute serve --roles controllers,sinks',
    'better-compute serve --roles gateway --port 8081',
    'better-compute serve --host 0.0.0.0 --log-format json',
    'better-compute serve --metrics-port 9464',
    'BETTER_COMPUTE_METRICS_TOKEN=$(cat metrics.token) better-compute serve --host 0.0.0.0',
    'better-compute serve --roles gateway --port 8443 --host 0.0.0.0 --tls-cert gw1.crt --tls-key gw1.key --gateway-url https://gw1.compute.example.com:8443',
  ],
  async run({ flags, compute, io, log }) {
    // `--roles ''` would start a replica that serves nothing and runs nothing.
    if (flags.roles.length === 0)
      throw new CliError('INVALID_ARGUMENT', '--roles names no role', {
        hint: 'Pass --roles with api, controllers, sinks or gateway (comma-separated), or leave it out for all four.',
        details: { field: 'roles' },
      });
    if (Boolean(flags.tlsCert) !== Boolean(flags.tlsKey))
      throw new CliError('INVALID_ARGUMENT', '--tls-cert and --tls-key go together', {
        hint: 'Pass both files better-compute pki issue-gateway wrote, or neither.',
        details: { field: flags.tlsCert ? 'tls-key' : 'tls-cert' },
      });
    if (flags.gatewayUrl !== undefined && !/^https?:\/\/[^\s/?#]+\/?$/.test(flags.gatewayUrl))
      throw new CliError(
        'INVALID_ARGUMENT',
        '--gateway-url is not an http(s) URL with only a host and port',
        {
          hint: 'Pass the address daemons reach this replica at, such as https://gw1.compute.example.com:8443.',
          details: { field: 'gateway-url' },
        },
      );
    // A scrape token comes from the environment only, never argv; short ones are guessable.
    const token = io.env.BETTER_COMPUTE_METRICS_TOKEN || undefined;
    if (token !== undefined && token.length < 16)
      throw new CliError('INVALID_ARGUMENT', 'BETTER_COMPUTE_METRICS_TOKEN is shorter than 16 characters', {
        hint: 'Set it to a long random value, such as the output of openssl rand -hex 32.',
        details: { field: 'BETTER_COMPUTE_METRICS_TOKEN' },
      });
    const { serve } = await import('../../../host/serve.js');
    const { accessLogger, lineBatch } = await import('../../../host/access-log.js');
    // Standard output is the process's own descriptor here: io.outBytes writes to it (cli/io.ts), one
    // write per batch of lines rather than per request (access-log.ts's lineBatch).
    const format = flags.logFormat ?? (isatty(1) ? 'text' : 'json');
    const accessLines = lineBatch(
      io.outBytes
        ? (bytes) => io.outBytes!(bytes)
        : (bytes) => io.out(Buffer.from(bytes).toString('utf8').replace(/\n$/, '')),
    );
    const instance = await compute();
    try {
      await serve({
        compute: instance,
        port: flags.port,
        host: flags.host,
        roles: flags.roles,
        signal: io.signal ?? new AbortController().signal,
        log,
        env: io.env,
        tls: flags.tlsCert && flags.tlsKey ? { certFile: flags.tlsCert, keyFile: flags.tlsKey } : undefined,
        gatewayUrl: flags.gatewayUrl?.replace(/\/$/, ''),
        accessLog: accessLogger(format, accessLines.line),
        metrics:
          flags.metricsPort !== undefined || token
            ? { port: flags.metricsPort, host: flags.metricsHost, token }
            : undefined,
      });
    } finally {
      accessLines.close();
    }
    return undefined;
  },
});
