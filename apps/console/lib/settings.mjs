// What the console runs with, from its flags and the environment. --dev is the only mode that makes
// secrets for itself (under the data directory, mode 0600); --prod takes every one from the
// environment and refuses to start, naming what is missing, rather than guess.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const PROD_ENV = [
  'CONSOLE_ORIGIN',
  'CONSOLE_SECRET',
  'CONSOLE_ADMIN_PASSWORD',
  'BETTER_COMPUTE_DATABASE_URL',
  'CONSOLE_IAM_DATABASE_URL',
];

export const DEFAULT_PORT = 3100;
export const DEFAULT_ADMIN_EMAIL = 'admin@console.local';

/** A refusal to start: the message is for the operator, and never holds a secret's value. */
export class StartError extends Error {
  constructor(message) {
    super(message);
    this.name = 'StartError';
  }
}

export function parseArgs(argv) {
  const args = { mode: undefined, port: undefined, host: undefined, sim: 0, built: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new StartError(`${arg} needs a value`);
      return next;
    };
    if (arg === '--dev' || arg === '--prod') {
      if (args.mode && args.mode !== arg.slice(2))
        throw new StartError('pass either --dev or --prod, not both');
      args.mode = arg.slice(2);
    } else if (arg === '--port') args.port = value();
    else if (arg === '--host') args.host = value();
    else if (arg === '--sim') args.sim = value();
    else if (arg === '--built') args.built = true;
    else
      throw new StartError(
        `unknown option ${arg}; usage: node server.mjs --dev|--prod [--port N] [--host H] [--sim N] [--built]`,
      );
  }
  if (!args.mode)
    throw new StartError(
      'pass --dev (secrets made under .console-data/) or --prod (secrets from the environment)',
    );
  if (args.port !== undefined) {
    const port = Number(args.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new StartError(`--port ${args.port} is not a port number (1 to 65535)`);
    args.port = port;
  }
  const sim = Number(args.sim);
  if (!Number.isInteger(sim) || sim < 0 || sim > 64)
    throw new StartError(`--sim ${args.sim} is not a number of machines from 0 to 64`);
  if (sim > 0 && args.mode !== 'dev')
    throw new StartError('--sim runs simulated machines, which only --dev allows');
  args.sim = sim;
  return args;
}

function originOf(value, name) {
  let url;
  try {
    url = new URL(value);
  } catch {
    throw new StartError(
      `${name} is not a URL; set it to the console's origin, such as https://console.example.com`,
    );
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== value.replace(/\/$/, ''))
    throw new StartError(
      `${name} must be an origin only (scheme, host and port), such as https://console.example.com`,
    );
  return url.origin;
}

function writePrivate(path, content) {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, content, { mode: 0o600 });
  renameSync(temporary, path);
}

/** A secret kept in the data directory, made on first use. */
function devSecret(dataDir, name) {
  const path = join(dataDir, name);
  try {
    const existing = readFileSync(path, 'utf8').trim();
    if (existing) return existing;
  } catch {
    // Not made yet.
  }
  const secret = randomBytes(32).toString('base64url');
  writePrivate(path, `${secret}\n`);
  return secret;
}

/**
 * The release keys the deployment pins (`release` of its configuration, docs/releases.md), from
 * CONSOLE_RELEASE_PINS (key ids or public keys, comma-separated) and CONSOLE_RELEASE_THRESHOLD
 * (default every pin); null without pins. betterCompute checks each pin at start. With pins, the
 * root tenant's navigation shows Rollouts.
 */
export function releaseSettings(env) {
  const pins = (env.CONSOLE_RELEASE_PINS ?? '')
    .split(',')
    .map((pin) => pin.trim())
    .filter(Boolean);
  if (pins.length === 0) {
    if (env.CONSOLE_RELEASE_THRESHOLD)
      throw new StartError(
        'CONSOLE_RELEASE_THRESHOLD is set without CONSOLE_RELEASE_PINS; name the release keys it counts',
      );
    return null;
  }
  if (env.CONSOLE_RELEASE_THRESHOLD === undefined || env.CONSOLE_RELEASE_THRESHOLD === '') return { pins };
  const threshold = Number(env.CONSOLE_RELEASE_THRESHOLD);
  if (!Number.isInteger(threshold) || threshold < 1 || threshold > pins.length)
    throw new StartError(
      `CONSOLE_RELEASE_THRESHOLD must be a whole number from 1 to the ${pins.length} pinned release key(s)`,
    );
  return { pins, threshold };
}

/**
 * The console's gateway certificate (`better-compute pki issue-gateway`), from CONSOLE_GATEWAY_CERT
 * and CONSOLE_GATEWAY_KEY (files, both or neither): with it the console joins the gateways'
 * mutual-TLS link, so a terminal reaches a node whose session another replica holds. It is the
 * bundle's machine CA that must have signed it, so it needs the PKI bundle; null without it.
 */
export function gatewayTlsSettings(env, cwd, pki) {
  const certFile = env.CONSOLE_GATEWAY_CERT || '';
  const keyFile = env.CONSOLE_GATEWAY_KEY || '';
  if (!certFile && !keyFile) return null;
  if (!certFile || !keyFile)
    throw new StartError(
      `${certFile ? 'CONSOLE_GATEWAY_KEY' : 'CONSOLE_GATEWAY_CERT'} is not set: the gateway certificate needs both files (better-compute pki issue-gateway --out-cert … --out-key …)`,
    );
  if (!pki)
    throw new StartError(
      'CONSOLE_GATEWAY_CERT needs the PKI bundle whose machine CA signed it; set CONSOLE_PKI',
    );
  return { certFile: resolve(cwd, certFile), keyFile: resolve(cwd, keyFile) };
}

/**
 * The settings of a run: { dev, port, host, origin, trustedOrigins, secret, databaseUrl,
 * adminEmail, adminPassword (prod only), dataDir, pki, gatewayTls, release }. `gatewayTls` is
 * gatewayTlsSettings'. `release` is releaseSettings'. `pki` is the deployment's PKI bundle (the
 * break-glass and sandbox SSH CAs, the exec ticket key, the audit key): CONSOLE_PKI in production,
 * where it is optional and the capabilities needing it answer INVALID_CONFIG without it; in dev, a
 * bundle of its own under the data directory, made on the first start.
 */
export function resolveSettings(args, env, cwd) {
  const dev = args.mode === 'dev';
  const port = args.port ?? (env.PORT ? Number(env.PORT) : DEFAULT_PORT);
  const host = args.host ?? (dev ? '127.0.0.1' : '0.0.0.0');
  const adminEmail = env.CONSOLE_ADMIN_EMAIL || DEFAULT_ADMIN_EMAIL;
  if (!dev) {
    const missing = PROD_ENV.filter((name) => !env[name]);
    if (missing.length)
      throw new StartError(
        `--prod takes every secret from the environment, and ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not set (it needs ${PROD_ENV.join(', ')}); use --dev to run locally with generated secrets`,
      );
    if (env.CONSOLE_SECRET.length < 32)
      throw new StartError('CONSOLE_SECRET must be at least 32 characters (openssl rand -base64 32)');
    if (env.CONSOLE_ADMIN_PASSWORD.length < 12)
      throw new StartError('CONSOLE_ADMIN_PASSWORD must be at least 12 characters');
    if (env.CONSOLE_IAM_DATABASE_URL !== env.BETTER_COMPUTE_DATABASE_URL)
      throw new StartError(
        'CONSOLE_IAM_DATABASE_URL must name the same database as BETTER_COMPUTE_DATABASE_URL: the embedded Better IAM shares compute’s database, so its changes reach open streams at once (docs/decisions/console-one-database.md)',
      );
    const origin = originOf(env.CONSOLE_ORIGIN, 'CONSOLE_ORIGIN');
    const pki = env.CONSOLE_PKI ? resolve(cwd, env.CONSOLE_PKI) : null;
    return {
      dev,
      port,
      host,
      origin,
      trustedOrigins: [origin],
      secret: env.CONSOLE_SECRET,
      databaseUrl: env.BETTER_COMPUTE_DATABASE_URL,
      adminEmail,
      adminPassword: env.CONSOLE_ADMIN_PASSWORD,
      dataDir: null,
      pki,
      gatewayTls: gatewayTlsSettings(env, cwd, pki),
      release: releaseSettings(env),
    };
  }
  const dataDir = resolve(cwd, env.CONSOLE_DATA_DIR || '.console-data');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const origin = env.CONSOLE_ORIGIN
    ? originOf(env.CONSOLE_ORIGIN, 'CONSOLE_ORIGIN')
    : `http://localhost:${port}`;
  // The page may be opened by name or by address; both are this console's own origin.
  const trustedOrigins = [...new Set([origin, `http://localhost:${port}`, `http://127.0.0.1:${port}`])];
  const pki = env.CONSOLE_PKI ? resolve(cwd, env.CONSOLE_PKI) : join(dataDir, 'pki.json');
  return {
    dev,
    port,
    host,
    origin,
    trustedOrigins,
    secret: env.CONSOLE_SECRET || devSecret(dataDir, 'secret'),
    databaseUrl: env.BETTER_COMPUTE_DATABASE_URL || `pglite:${join(dataDir, 'db')}`,
    adminEmail,
    adminPassword: undefined,
    dataDir,
    pki,
    gatewayTls: gatewayTlsSettings(env, cwd, pki),
    release: releaseSettings(env),
  };
}
