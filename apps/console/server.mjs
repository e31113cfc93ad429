#!/usr/bin/env node
// The console's one process: Better IAM at /api/iam and Better Compute at /api/compute (with the
// event stream at /api/compute/watch), and the Next.js pages for everything else, all on one origin
// so the host-only session cookie authenticates both APIs.
//
//   node server.mjs --dev     secrets made under .console-data/; the root administrator's password
//                             is printed once, on the first start
//   node server.mjs --prod    every secret from the environment (see lib/settings.mjs)
//
// --dev runs Next.js in development mode (pages compiled on demand) unless --built is given, which
// serves the production build (`next build`) as --prod always does. The pages, their security
// headers and the stack's hand-over to them are lib/mount.mjs, which `better-compute dev` mounts too.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
// First, so Next.js's telemetry is off before anything can load it.
import { consoleDir, consoleProblem, mountConsole } from './lib/mount.mjs';
import { parseArgs, resolveSettings, StartError } from './lib/settings.mjs';
import { BodyTooLarge, toRequest, writeError, writeResponse } from './lib/node-bridge.mjs';

const log = (line) => process.stdout.write(`${line}\n`);

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const cwd = process.cwd();
  const settings = resolveSettings(args, process.env, cwd);
  const useBuild = !settings.dev || args.built;
  const problem = consoleProblem({ dev: !useBuild });
  if (problem) throw new StartError(problem);
  if (settings.dev) process.env.CONSOLE_DEV = '1';

  // The stack comes from console.config.mjs in the working directory, else the one beside this file.
  const configPath = existsSync(join(cwd, 'console.config.mjs'))
    ? join(cwd, 'console.config.mjs')
    : join(consoleDir, 'console.config.mjs');
  const { default: createStack } = await import(pathToFileURL(configPath).href);
  if (settings.dev && settings.pki && !existsSync(settings.pki)) await createDevPki(settings);
  // Read and checked before anything starts. With a gateway certificate, a terminal whose node
  // another replica holds goes over the gateways' mutual-TLS link to that replica; without one,
  // only the nodes whose sessions this process holds are reached.
  const { gatewayTlsFromFiles, readPkiBundle } = await import('better-compute');
  const bundle = settings.pki ? await readPkiBundle(settings.pki) : undefined;
  const tls = bundle && settings.gatewayTls ? gatewayTlsFromFiles(bundle, settings.gatewayTls) : undefined;
  const { compute, iam } = await createStack(settings);
  const stopping = [];
  try {
    await compute.migrate();
    const { actionCatalog } = await import('better-compute');
    await compute.iam.installActions(actionCatalog());
    if (!iam)
      throw new StartError(
        'console.config.mjs must build compute with its embedded Better IAM (no config.iam)',
      );
    await ensureRootAdministrator(iam, settings);
  } catch (error) {
    await compute.close().catch(() => {});
    throw error;
  }
  const workers = compute.startWorkers(['controllers', 'sinks']);
  stopping.push(() => workers.stop());

  // The client's address (the socket's peer, or X-Forwarded-For from the configuration's trusted
  // proxies) limits sign-ins and other public calls per address, as under serve and dev.
  const { configuredClientAddress } = await import('better-compute');
  const clientAddressOf = configuredClientAddress(compute.config);
  const pages = mountConsole({ compute, iam, origin: settings.origin, dev: !useBuild, log });
  stopping.push(() => pages.close());
  try {
    await pages.ready;
  } catch (error) {
    for (const step of stopping.reverse()) await step().catch(() => {});
    await compute.close().catch(() => {});
    throw error;
  }

  const server = createServer((incoming, outgoing) => {
    const rawUrl = incoming.url ?? '/';
    const page = pages.route(rawUrl.split('?')[0]);
    if (page) return page(incoming, outgoing);
    const origin = requestOrigin(incoming.headers.host, settings);
    const left = new AbortController();
    outgoing.once('close', () => left.abort());
    void (async () => {
      try {
        const request = await toRequest(incoming, origin, left.signal);
        await writeResponse(
          await compute.handler(request, { clientAddress: clientAddressOf(incoming) }),
          outgoing,
        );
      } catch (error) {
        if (error instanceof BodyTooLarge)
          return writeError(outgoing, 413, 'PAYLOAD_TOO_LARGE', 'the request body is too large');
        if (left.signal.aborted) return void outgoing.end();
        log(
          `console: a request to ${rawUrl.split('?')[0].slice(0, 200)} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
        writeError(outgoing, 500, 'INTERNAL', 'internal error');
      }
    })();
  });
  // The upgrades that reach nodes: the gateway's session route (a node's daemon may join the
  // console's origin) and the tunnel route the browser's terminals open, with the session cookie,
  // from this origin only. Without a PKI bundle there are no tickets, so every upgrade is refused.
  let nodeRoutes;
  if (bundle) {
    const { attachNodeRoutes } = await import('better-compute');
    nodeRoutes = await attachNodeRoutes(server, {
      compute,
      api: true,
      pages,
      gateway: { url: settings.origin },
      bundle,
      tls,
      log,
    });
    stopping.push(() => nodeRoutes.close());
  } else
    server.on('upgrade', (request, socket, head) => {
      if (pages.upgrade(request, socket, head)) return;
      socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    });

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, settings.host, resolve);
  });
  log(
    `console: ${settings.origin} (${settings.dev ? 'dev' : 'prod'}; Next.js ${useBuild ? 'build' : 'dev mode'}; store ${compute.database.description})`,
  );

  if (args.sim > 0) stopping.push(await startSimulation(compute, iam, settings, args.sim));

  const stop = async () => {
    log('console: stopping');
    await compute.live?.close?.();
    await new Promise((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 5_000).unref();
    });
    for (const step of stopping.reverse()) await step().catch(() => {});
    await compute.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

/** The origin a request was addressed to: the console's own in prod; in dev, its loopback Host. */
function requestOrigin(host, settings) {
  if (!settings.dev || !host || /[/?#@\\\s]/.test(host)) return settings.origin;
  try {
    const url = new URL(`http://${host}`);
    return settings.trustedOrigins.includes(url.origin) ? url.origin : settings.origin;
  } catch {
    return settings.origin;
  }
}

/**
 * The first start makes the root administrator: in dev with a password made here and printed once
 * (it is stored nowhere else); in prod with CONSOLE_ADMIN_PASSWORD.
 */
async function ensureRootAdministrator(iam, settings) {
  if (await iam.hasRootAdministrator()) return;
  const password = settings.adminPassword ?? randomBytes(12).toString('base64url');
  await iam.bootstrapRootAdmin({ email: settings.adminEmail, password });
  if (settings.dev) {
    log(`console: created the root administrator ${settings.adminEmail}`);
    log(`console: its password, shown this once: ${password}`);
  } else log(`console: created the root administrator ${settings.adminEmail} from CONSOLE_ADMIN_PASSWORD`);
}

/** dev's own PKI bundle, sealed with its secret, made once beside its other generated secrets. */
async function createDevPki(settings) {
  const { createPkiBundle } = await import('better-compute');
  try {
    await createPkiBundle({ path: settings.pki, secret: settings.secret, trustDomain: 'console.localhost' });
    log(`console: made the PKI bundle ${settings.pki} (SSH CAs, tunnel ticket key, audit key)`);
  } catch (error) {
    // Another console in the same data directory made it first.
    if (error?.code !== 'ALREADY_EXISTS') throw error;
  }
}

/**
 * --sim N: simulated machines join the root tenant's pool sim-gpu, and up to two more its VPS pool
 * sim-vps, and heartbeat until the console stops.
 */
async function startSimulation(compute, iam, settings, count) {
  const { startSimulatedFleet } = await import('better-compute');
  const { items } = await iam.listPrincipals({ tenantId: 'root', kind: 'person' });
  const admin = items.find((principal) => principal.email === settings.adminEmail) ?? items[0];
  const key = await iam.createApiKey(admin.id, {
    name: 'console-sim',
    expiresAt: new Date(Date.now() + 86_400_000),
  });
  const fleet = await startSimulatedFleet(compute, { nodes: count, token: key.key });
  log(`console: ${fleet.nodeIds.length} simulated machine(s) in pool ${fleet.poolId}`);
  // A VPS pool beside it, whose instances run in the simulated runtime (add its flavors to use it).
  const vps = await startSimulatedFleet(compute, {
    nodes: Math.min(count, 2),
    token: key.key,
    seed: 2,
    poolName: 'sim-vps',
    poolClass: 'vps',
    withoutGpus: true,
  });
  log(`console: ${vps.nodeIds.length} simulated VPS machine(s) in pool ${vps.poolId} (sim-vps)`);
  return async () => {
    await vps.stop();
    await fleet.stop();
    await iam.revokeApiKey(key.apiKey.id).catch(() => {});
  };
}

main().catch((error) => {
  const refusals = ['INVALID_CONFIG', 'MISSING_ENV', 'INVALID_ARGUMENT', 'PKI_NOT_FOUND'];
  if (error instanceof StartError || refusals.includes(error?.code)) {
    process.stderr.write(`console: ${error.message}\n${error.hint ? `hint: ${error.hint}\n` : ''}`);
    process.exit(2);
  }
  process.stderr.write(
    `console: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
