/**
 * `forward --instance ID --port N [--local-port N] [--bind ADDRESS]`: like ssh -L. Listens locally
 * and carries each accepted connection to that port of the instance through a tcp tunnel of its
 * own (a fresh tunnels.open per connection), until Ctrl-C, with bridgeSocket's bounded memory.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { bridgeSocket } from '../../tunnel-socket.js';

export default defineCommand({
  name: 'forward',
  group: 'Access',
  summary: 'Forward a local port to a port of a running instance, a tunnel per connection (tunnels.open)',
  target: 'token',
  output: false,
  calls: ['tunnels.open'],
  flags: {
    instance: {
      type: 'id',
      kind: 'instance',
      required: true,
      description: 'The running instance',
      placeholder: 'ID',
    },
    port: {
      type: 'number',
      integer: true,
      min: 1,
      max: 65_535,
      required: true,
      description: 'The instance’s port',
    },
    localPort: {
      type: 'number',
      integer: true,
      min: 0,
      max: 65_535,
      description: 'The local port (default the same as --port; 0 picks a free one)',
    },
    bind: {
      type: 'string',
      default: '127.0.0.1',
      description:
        'The local address to listen on; another than loopback lets anyone who reaches it use your access',
      placeholder: 'ADDRESS',
    },
  },
  examples: [
    'better-compute forward --url https://compute.example.com --tenant acme --instance inst_01k5w… --port 5432',
    'better-compute forward --url https://compute.example.com --instance inst_01k5w… --port 22 --local-port 2222',
  ],
  async run({ flags, global, io, api, log }) {
    if (!global.url)
      throw new CliError('UNSUPPORTED', 'forward opens WebSockets on a running server, and needs --url', {
        hint: 'Pass --url https://compute.example.com (or set BETTER_COMPUTE_URL).',
      });
    // The credential is resolved before anything listens.
    const client = await api();
    if (!client.credential)
      throw new ComputeError(
        'MISSING_ENV',
        'forward needs a credential: BETTER_COMPUTE_TOKEN is not set and no saved session applies',
        {
          hint: 'Set BETTER_COMPUTE_TOKEN, or run better-compute auth login.',
        },
      );
    const { createServer } = await import('node:net');
    const server = createServer((socket) => {
      socket.pause();
      void (async () => {
        try {
          const opened = await client.call('tunnels.open', {
            instanceId: flags.instance,
            op: 'tcp',
            port: flags.port,
          });
          const ws = await client.tunnel(opened.ticket);
          bridgeSocket(ws, socket, log);
        } catch (error) {
          const failure = error instanceof ComputeError ? `${error.code}: ${error.message}` : String(error);
          log(`a connection could not be forwarded (${failure}); it was closed`);
          socket.destroy();
        }
      })();
    });
    const localPort = flags.localPort ?? flags.port;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new CliError(
            error.code === 'EADDRINUSE' ? 'UNAVAILABLE' : 'INVALID_ARGUMENT',
            `cannot listen on ${flags.bind}:${localPort} (${error.code ?? error.message})`,
            {
              hint: 'Pick another --local-port (0 picks a free one) or --bind address.',
              details: { field: 'localPort' },
            },
          ),
        ),
      );
      server.listen(localPort, flags.bind, () => resolve());
    });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : localPort;
    log(`forwarding ${flags.bind}:${port} to port ${flags.port} of ${flags.instance}; Ctrl-C stops`);
    const signal = io.signal;
    // Until Ctrl-C (the signal); a program that gives no signal forwards until it exits.
    await new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      signal?.addEventListener('abort', () => resolve(), { once: true });
    });
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return undefined;
  },
});
