/**
 * `serve`: runs the API and the background roles of one replica. On the abort signal (SIGINT or
 * SIGTERM from the CLI) it answers not ready, stops accepting connections, lets requests and jobs in
 * flight finish, closes the store and resolves. A replica that listens answers the probes
 * `/healthz` and `/readyz` (health.ts) whatever its roles.
 */
import { ComputeError } from '@better-compute/core';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { actionCatalog } from '../compute.js';
import type { ComputeInstance, WorkerRole } from '../types.js';
import type { AccessEntry } from './access-log.js';
import { createProbes, type RoleState } from './health.js';
import { createMetrics, type Metrics, METRICS_PATH, metricsAnswer } from './metrics.js';
import { createNodeServer, type PageRoutes } from './node-adapter.js';
import { attachNodeRoutes, type NodeRoutes } from './node-routes.js';
import { type CommandSigner, ed25519CommandSigner } from '../gateway/signer.js';
import type { NodeStreams } from '../gateway/node-streams.js';
import type { GatewayTls } from '../gateway/tls.js';
import type { PkiBundle } from '../pki/bundle.js';

export interface ServeOptions {
  compute: ComputeInstance;
  port: number;
  host?: string;
  roles: WorkerRole[];
  signal: AbortSignal;
  log: (line: string) => void;
  /** Where BETTER_COMPUTE_ADMIN_EMAIL and BETTER_COMPUTE_ADMIN_PASSWORD are read from. */
  env?: Record<string, string | undefined>;
  /** Called once the server listens, with its URL (useful with port 0). */
  onListening?: (url: string) => void;
  /**
   * The command root the gateway signs commands with. Without it, BETTER_COMPUTE_COMMAND_ROOT_KEY_FILE
   * (an Ed25519 PKCS#8 PEM file) is read when set, else the command root of the PKI bundle the
   * configuration names (`pki`), opened with the deployment secret.
   */
  commandSigner?: CommandSigner;
  /**
   * This replica's gateway certificate and key (PEM files from `pki issue-gateway`): the server
   * then serves TLS, asks daemons for their node certificates, and links to other replicas with it.
   */
  tls?: { certFile: string; keyFile: string } | undefined;
  /** The address daemons and other replicas reach this replica's gateway at (default: where it listens). */
  gatewayUrl?: string | undefined;
  /** Called once with this process's node streams (for the routes that open tunnels). */
  onNodeStreams?: (streams: NodeStreams) => void;
  /** The streams tunnels relay to; default this process's own (createNodeStreams). */
  nodeStreams?: NodeStreams;
  /** Pages on the API's origin, beside its routes (the web console under `dev`). */
  pages?: PageRoutes | undefined;
  /** Told one entry per API request (access-log.ts's `accessLogger` writes them as lines). */
  accessLog?: ((entry: AccessEntry) => void) | undefined;
  /**
   * `/metrics` (metrics.ts): on a listener of its own at `port` (and `host`, default 127.0.0.1),
   * and/or on the API's port when `token` is set, where a scrape must carry it as a bearer token.
   */
  metrics?: { port?: number | undefined; host?: string | undefined; token?: string | undefined } | undefined;
}

/**
 * The PKI bundle a replica uses, by the rule doctor and audit follow: the configuration's `pki`,
 * else `.better-compute/pki.json` against the working directory. A configured path must exist; the
 * default one is optional (a deployment without a bundle signs nothing and issues nothing).
 */
async function replicaPkiBundle(compute: ComputeInstance): Promise<PkiBundle | undefined> {
  const { readPkiBundle, resolvePkiPath } = await import('../pki/bundle.js');
  const path = resolvePkiPath(process.cwd(), compute.config.pki);
  if (!compute.config.pki && !existsSync(path)) return undefined;
  return readPkiBundle(path);
}

async function commandSignerFrom(
  options: ServeOptions,
  bundle: PkiBundle | undefined,
): Promise<CommandSigner | undefined> {
  if (options.commandSigner) return options.commandSigner;
  const file = options.env?.BETTER_COMPUTE_COMMAND_ROOT_KEY_FILE;
  if (!file) {
    if (!bundle) return undefined;
    const { bundleCommandSigner } = await import('../pki/command-root.js');
    return bundleCommandSigner(bundle.path, options.compute.config.secret, {
      db: options.compute.database.db,
      log: options.log,
    });
  }
  try {
    return ed25519CommandSigner(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ComputeError(
      'INVALID_CONFIG',
      `BETTER_COMPUTE_COMMAND_ROOT_KEY_FILE is not an Ed25519 private key file`,
      {
        hint: 'Point it at a PKCS#8 PEM Ed25519 key readable by this user (openssl genpkey -algorithm ed25519).',
        cause: error,
      },
    );
  }
}

/** Refuses to run on a schema that is behind or was edited. */
async function assertSchemaCurrent(compute: ComputeInstance): Promise<void> {
  const status = await compute.migrationStatus();
  const behind = status.filter((s) => s.state !== 'applied');
  if (behind.length) {
    throw new ComputeError(
      'INVALID_STATE',
      `the schema is not current: ${behind.map((s) => `${s.module}/${s.name} ${s.state}`).join(', ')}`,
      {
        hint: 'Run better-compute migrate first.',
      },
    );
  }
}

/**
 * A new deployment's first administrator comes only from the environment, so its password never
 * passes through argv or a file the server wrote; without them `serve` refuses to start.
 */
async function ensureRootAdministrator(
  compute: ComputeInstance,
  env: Record<string, string | undefined>,
  log: (line: string) => void,
): Promise<void> {
  const iam = compute.embeddedIam!;
  if (await iam.hasRootAdministrator()) return;
  const email = env.BETTER_COMPUTE_ADMIN_EMAIL;
  const password = env.BETTER_COMPUTE_ADMIN_PASSWORD;
  if (!email || !password) {
    throw new ComputeError('MISSING_ENV', 'this deployment has no administrator yet', {
      hint: 'Set BETTER_COMPUTE_ADMIN_EMAIL and BETTER_COMPUTE_ADMIN_PASSWORD for the first start; the root administrator is created from them.',
    });
  }
  await iam.bootstrapRootAdmin({ email, password });
  log(`created the root administrator ${email}`);
}

export function listen(
  server: Server,
  port: number,
  host: string,
  options: { secure?: boolean } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', (error) => reject(listenError(error, port, host)));
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      const actualPort = typeof address === 'object' && address ? address.port : port;
      const shownHost = host.includes(':') ? `[${host}]` : host;
      resolve(`${options.secure ? 'https' : 'http'}://${shownHost}:${actualPort}`);
    });
  });
}

/** Why a server could not listen, said as the operator can act on it; anything else as it came. */
function listenError(error: unknown, port: number, host: string): unknown {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch ((error as NodeJS.ErrnoException).code) {
    case 'EADDRINUSE':
      return new ComputeError('UNAVAILABLE', `${where} is in use by another program`, {
        hint: 'Stop what listens there, or pass another --port.',
        details: { host, port },
      });
    case 'EACCES':
      return new ComputeError('ACCESS_DENIED', `listening on ${where} is not allowed for this user`, {
        hint: 'Pass a --port above 1023, or run with the right to bind low ports.',
        details: { host, port },
      });
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ComputeError('INVALID_ARGUMENT', `--host ${host} is not an address of this machine`, {
        hint: 'Pass --host an address this machine has, such as 127.0.0.1 or 0.0.0.0.',
        details: { field: 'host', host },
      });
    default:
      return error;
  }
}

/** Stops accepting, waits for requests in flight, then closes idle keep-alive connections. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    // Connections that stay busy are given a moment, then cut.
    setTimeout(() => server.closeAllConnections(), 10_000).unref();
  });
}

/** The listener of `/metrics` on a port of its own: the exposition, and a 404 for anything else. */
function metricsOnly(metrics: Metrics): RequestListener {
  return (request, response) => {
    const url = request.url ?? '/';
    const query = url.indexOf('?');
    if ((query === -1 ? url : url.slice(0, query)) !== METRICS_PATH)
      return void response.writeHead(404).end();
    void metricsAnswer(metrics, { method: request.method ?? 'GET', authorization: null }, null).then(
      ({ status, headers, body }) =>
        response.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) }).end(body),
      () => response.writeHead(503).end('the gauges could not be read\n'),
    );
  };
}

/** The listener of a replica without the API: the probes, and a 404 for anything else. */
function probesOnly(probes: ReturnType<typeof createProbes>): RequestListener {
  return (request, response) => {
    const url = request.url ?? '/';
    const query = url.indexOf('?');
    const answer = probes.answer(request.method ?? 'GET', query === -1 ? url : url.slice(0, query));
    if (!answer) return void response.writeHead(404).end();
    void answer.then(({ status, headers, body }) =>
      response.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) }).end(body),
    );
  };
}

export async function serve(options: ServeOptions): Promise<void> {
  const { compute, signal, log } = options;
  let server: Server | undefined;
  let workers: { stop(): Promise<void> } | undefined;
  let routes: NodeRoutes | undefined;
  let metricsServer: Server | undefined;
  const roles: RoleState = { wanted: options.roles, running: new Set(), stopping: false };
  signal.addEventListener('abort', () => (roles.stopping = true), { once: true });
  try {
    await assertSchemaCurrent(compute);
    await compute.iam.installActions(actionCatalog());
    if (compute.embeddedIam) await ensureRootAdministrator(compute, options.env ?? {}, log);
    workers = compute.startWorkers(options.roles);
    for (const role of options.roles) if (role === 'controllers' || role === 'sinks') roles.running.add(role);
    const serving = options.roles.includes('api') || options.roles.includes('gateway');
    const bundle = serving ? await replicaPkiBundle(compute) : undefined;
    let tls: GatewayTls | undefined;
    if (options.tls) {
      if (!bundle)
        throw new ComputeError(
          'PKI_NOT_FOUND',
          '--tls-cert needs the PKI bundle whose machine CA signed it',
          {
            hint: 'Set pki in the configuration or keep the bundle at .better-compute/pki.json.',
          },
        );
      const { gatewayTlsFromFiles } = await import('../gateway/tls.js');
      tls = gatewayTlsFromFiles(bundle, options.tls);
    }
    const commandSigner = options.roles.includes('gateway')
      ? await commandSignerFrom(options, bundle)
      : undefined;
    const metrics = options.metrics ? createMetrics(() => compute.gauges()) : undefined;
    if (metrics && options.metrics?.port !== undefined) {
      metricsServer = createServer(metricsOnly(metrics));
      const at = await listen(metricsServer, options.metrics.port, options.metrics.host ?? '127.0.0.1');
      log(`better-compute metrics at ${at}${METRICS_PATH}`);
    }
    if (serving) {
      const probes = createProbes({ compute, roles, log });
      const accessLog = metrics
        ? (entry: AccessEntry) => {
            options.accessLog?.(entry);
            metrics.observe(entry);
          }
        : options.accessLog;
      const token = options.metrics?.token;
      // A gateway-only replica answers nothing but the probes and the session upgrade.
      const listener: RequestListener = options.roles.includes('api')
        ? (createNodeServer(compute, {
            pages: options.pages,
            probes,
            accessLog,
            metrics: metrics && token ? { metrics, token } : undefined,
          }).listeners('request')[0] as RequestListener)
        : probesOnly(probes);
      if (tls) {
        const { tlsServerOptions } = await import('../gateway/tls.js');
        server = createTlsServer(tlsServerOptions(tls), listener);
      } else server = createServer(listener);
      const bound = await listen(server, options.port, options.host ?? '127.0.0.1', {
        secure: Boolean(tls),
      });
      routes = await attachNodeRoutes(server, {
        compute,
        api: options.roles.includes('api'),
        gateway: options.roles.includes('gateway')
          ? { url: options.gatewayUrl ?? bound, commandSigner }
          : false,
        bundle,
        tls,
        nodeStreams: options.nodeStreams,
        onNodeStreams: options.onNodeStreams,
        pages: options.pages,
        log,
      });
      for (const role of options.roles) if (role === 'api' || role === 'gateway') roles.running.add(role);
      log(`better-compute serving ${bound}${compute.config.basePath} (roles: ${options.roles.join(',')})`);
      options.onListening?.(bound);
    } else {
      log(`better-compute running roles: ${options.roles.join(',')}`);
    }
    if (!signal.aborted)
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    log('better-compute stopping: finishing requests and jobs in flight');
  } finally {
    await routes?.close();
    if (server) await closeServer(server);
    if (metricsServer) await closeServer(metricsServer);
    await workers?.stop();
    await compute.close();
  }
}
