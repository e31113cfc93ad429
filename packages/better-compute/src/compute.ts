/**
 * betterCompute(config): a deployment. It opens the store, binds every module's methods to the
 * method table (refusing duplicates and methods the table does not know), wires IAM, and returns the
 * web-standard handler with the operator's tools (migrate, doctor, workers).
 */
import {
  type ActionCatalogEntry,
  type AnyMethod,
  ComputeError,
  type IamBridge,
  DEFAULT_RATE_LIMIT,
  RateLimiter,
  methodAction,
  methodKey,
  type ModuleName,
  parseDuration,
  routeInfo,
  type RouteInfo,
} from '@better-compute/core';
import { type MethodName, methodList } from '@better-compute/core/methods';
import {
  type Database,
  databaseNow,
  listenOn,
  migrate,
  migrationStatus,
  type ModuleMigrations,
  openDatabase,
} from '@better-compute/db';
import type { Iam } from 'better-iam';
import type { Kysely } from 'kysely';
import type { ComputeConfig } from './config/define-config.js';
import { pkiMigrations } from './pki/migrations.js';
import { gatewayMigrations } from './gateway/migrations.js';
import { foundationMigrations } from './db/migrations.js';
import type { ComputeTables } from './db/tables.js';
import { type BoundMethod, createHandler, type HandlerLog } from './http/handler.js';
import type { ComputeModule } from './modules/define-module.js';
import { commandsModule } from './modules/commands/module.js';
import { batchesModule, createBatchesModule } from './modules/batches/module.js';
import { confirmationsModule } from './modules/confirmations/module.js';
import { confirmationStore } from './modules/confirmations/index.js';
import { workflowsModule } from './modules/workflows/module.js';
import { vpsModule } from './modules/vps/module.js';
import { eventsModule } from './modules/events/module.js';
import { createFleetModule, fleetModule } from './modules/fleet/module.js';
import { batchProposer, createApproverLoader } from './modules/batches/index.js';
import { systemModule } from './modules/system/module.js';
import { createWebhooksModule, webhooksModule } from './modules/webhooks/module.js';
import { createSecretsModule, secretsModule } from './modules/secrets/module.js';
import { profilesModule } from './modules/profiles/module.js';
import { createProviderAccountsModule, providerAccountsModule } from './modules/provider-accounts/module.js';
import { createMetalModule, metalModule } from './modules/metal/module.js';
import { createSshCertsModule, sshCertsModule } from './modules/ssh-certs/module.js';
import { createTunnelsModule, tunnelsModule } from './modules/tunnels/module.js';
import { createSandboxesModule, sandboxesModule } from './modules/sandboxes/module.js';
import { createReleasesModule, releasesModule } from './modules/releases/module.js';
import { fleetConfigModule } from './modules/fleet-config/module.js';
import { rolloutsModule } from './modules/rollouts/module.js';
import { auditModule } from './audit/module.js';
import type { ComputeInstance, DoctorFinding, DoctorReport, WorkerRole } from './types.js';
import { JOBS_CHANNEL } from './workers/jobs.js';
import { runDueJobs, startWorkerLoop } from './workers/runner.js';
import { collectGauges } from './workers/gauges.js';
import {
  AUDIT_CHECKPOINT_JOB,
  checkpointJob,
  DEFAULT_CHECKPOINT_EVERY_SECONDS,
  queueCheckpoint,
} from './audit/job.js';
import { LiveHub } from './live/hub.js';
import { createWatch } from './live/watch.js';
import { createMcpEndpoint } from './mcp/index.js';

export const DEFAULT_BASE_PATH = '/api/compute';

/** `daemon install-script`'s installer joining `url`, loaded only when a bootstrap runs. */
async function nodeInstaller(url: string): Promise<string> {
  const { dirname } = await import('node:path');
  const { bcdBin } = await import('./host/dev-node.js');
  const { buildInstaller } = await import('./cli/commands/daemon/installer.js');
  return buildInstaller({ daemonDir: dirname(dirname(bcdBin())), url, plugins: false });
}

/** Every built-in module, in migration order. */
const builtins = [
  systemModule,
  eventsModule,
  fleetModule,
  commandsModule,
  batchesModule,
  confirmationsModule,
  workflowsModule,
  webhooksModule,
  secretsModule,
  vpsModule,
  profilesModule,
  metalModule,
  sshCertsModule,
  tunnelsModule,
  sandboxesModule,
  releasesModule,
  fleetConfigModule,
  rolloutsModule,
  providerAccountsModule,
  auditModule,
] as const;
export const builtinModules: readonly ComputeModule[] = builtins;

type NoneMissing<Missing extends never> = Missing;
/**
 * Compile time: every method of the table is implemented by a built-in module. A method no module
 * implements fails here, named: "Type '"widgets.list"' does not satisfy the constraint 'never'".
 * Exported only so that the compiler keeps it; nothing imports it (knip.jsonc: `lintignore`).
 * @lintignore
 */
export type BuiltinCoverage = NoneMissing<
  Exclude<MethodName, NonNullable<(typeof builtins)[number]['implemented']>>
>;

export interface BetterComputeOptions {
  /** Extra modules (plugins), after the built-in ones. */
  modules?: readonly ComputeModule[];
  log?: HandlerLog;
  now?: () => Date;
}

const defaultLog: HandlerLog = ({ level, message, requestId, error }) => {
  const detail = error instanceof Error ? ` ${error.stack ?? error.message}` : '';
  console.error(`[better-compute] ${level}: ${message}${requestId ? ` (${requestId})` : ''}${detail}`);
};

function bindModules(
  modules: readonly ComputeModule[],
  enabled: readonly ModuleName[] | undefined,
): Map<string, BoundMethod> {
  const known = new Map(methodList.map((method) => [methodKey(method), method]));
  const bound = new Map<string, BoundMethod>();
  for (const module of modules) {
    for (const binding of module.methods) {
      const { method } = binding;
      const key = methodKey(method);
      if (!known.has(key) && !key.startsWith('plugins.')) {
        throw new ComputeError(
          'INVALID_CONFIG',
          `module ${module.name} binds ${key}, which is not in the method table`,
        );
      }
      if (bound.has(key)) throw new ComputeError('INVALID_CONFIG', `${key} is bound by two modules`);
      if (enabled && !enabled.includes(method.module)) continue;
      bound.set(key, binding);
    }
  }
  return bound;
}

/** The IAM actions compute asks about, from the method table. */
export function actionCatalog(methods: readonly AnyMethod[] = methodList): ActionCatalogEntry[] {
  const seen = new Map<string, string>();
  for (const method of methods) {
    for (const action of [methodAction(method), ...(method.alsoActions ?? [])])
      if (action && !seen.has(action)) seen.set(action, method.summary);
  }
  return [...seen].map(([action, summary]) => ({ action, summary }));
}

/** `events.retention` in milliseconds; undefined (keep forever) when absent. */
function retentionMs(retention: string | number | undefined): number | undefined {
  if (retention === undefined) return undefined;
  let seconds: number | undefined;
  try {
    seconds = typeof retention === 'number' ? retention : parseDuration(retention, 'events.retention');
  } catch {
    seconds = undefined;
  }
  if (seconds === undefined || !Number.isSafeInteger(seconds) || seconds <= 0) {
    throw new ComputeError(
      'INVALID_CONFIG',
      `events.retention must be a positive duration (got ${String(retention)})`,
      {
        hint: 'Write it as 30d, 12h or a number of seconds, or leave it out to keep events forever.',
      },
    );
  }
  return seconds * 1000;
}

export async function betterCompute(
  config: ComputeConfig,
  options: BetterComputeOptions = {},
): Promise<ComputeInstance> {
  const log = options.log ?? defaultLog;
  const now = options.now ?? (() => new Date());
  const basePath = (config.basePath ?? DEFAULT_BASE_PATH).replace(/\/+$/, '');
  if (!basePath.startsWith('/') || basePath === '/api/iam') {
    throw new ComputeError('INVALID_CONFIG', 'basePath must be an absolute path other than /api/iam');
  }
  if (config.database === undefined) {
    throw new ComputeError('INVALID_CONFIG', 'the configuration names no database', {
      hint: 'Set database in better-compute.config.ts, or BETTER_COMPUTE_DATABASE_URL.',
    });
  }
  const ownsDatabase = typeof config.database === 'string';
  const database: Database =
    typeof config.database === 'string' ? await openDatabase({ url: config.database }) : config.database;

  // The webhooks module follows the deployment's webhook settings and seals under its secret.
  const webhooks = createWebhooksModule(config.webhooks, config.secret);
  // Break-glass SSH and tunnels sign with the deployment's PKI bundle, opened with its secret.
  const keySettings = { pki: config.pki, secret: config.secret };
  const configured = new Map<ComputeModule, ComputeModule>([
    [webhooksModule, webhooks],
    // Secrets are sealed under the deployment's secret; without one, put refuses.
    [secretsModule, createSecretsModule(config.secret)],
    [sshCertsModule, createSshCertsModule({ ...keySettings, requireMfa: config.breakGlassSsh?.requireMfa })],
    [tunnelsModule, createTunnelsModule(keySettings)],
    [sandboxesModule, createSandboxesModule(keySettings, config.sandboxes)],
    // The destructive-batch quorum reads its approver set from the same bundle (public keys only).
    [batchesModule, createBatchesModule({ pki: config.pki })],
    // While the quorum is on, a node is deleted only as an approved batch's member.
    [fleetModule, createFleetModule({ quorumOn: quorumOn(config.pki) })],
    // Releases verify against the pinned release keys (a malformed pin stops the start here).
    [releasesModule, createReleasesModule(config.release)],
    // BMC passwords are sealed under the deployment's secret; power off and reset follow the quorum,
    // and bulk makes its batch as commandBatches.create does.
    [
      metalModule,
      createMetalModule({
        secret: config.secret,
        quorumOn: quorumOn(config.pki),
        proposeBatch: batchProposer({ pki: config.pki }),
      }),
    ],
    // Provider accounts open their credentials under the deployment's secret and bootstrap hosts
    // with the project's own installer, built from the daemon package this server runs beside.
    [
      providerAccountsModule,
      createProviderAccountsModule({ secret: config.secret, installer: nodeInstaller }),
    ],
  ]);
  const modules = [...builtinModules.map((m) => configured.get(m) ?? m), ...(options.modules ?? [])];
  const methods = bindModules(modules, config.modules);
  const routes = (): RouteInfo[] => [...methods.values()].map(({ method }) => routeInfo(method));

  // One budget per identity across compute's routes and the embedded IAM's (docs/decisions/0006-rate-limit.md).
  // Per identity and per tenant, by method cost (docs/rate-limits.md); what the configuration sets
  // replaces the default it names.
  const limiter =
    config.rateLimit === false ? undefined : new RateLimiter({ ...DEFAULT_RATE_LIMIT, ...config.rateLimit });
  let iam: IamBridge;
  let iamHandler: ((request: Request) => Promise<Response>) | undefined;
  let iamMigrations: ModuleMigrations | undefined;
  let embeddedIam: Iam | undefined;
  if (config.iam) {
    iam = config.iam;
  } else {
    const { createIam } = await import('better-iam');
    embeddedIam = createIam({
      database,
      ...(limiter ? { limiter } : {}),
      ...(config.iamLimits ? { limits: config.iamLimits } : {}),
      ...(config.secret ? { secret: config.secret } : {}),
      ...(config.trustedOrigins ? { trustedOrigins: config.trustedOrigins } : {}),
      log,
    });
    iam = embeddedIam.bridge;
    iamHandler = embeddedIam.handler.bind(embeddedIam);
    iamMigrations = embeddedIam.migrations;
  }

  const allMigrations: ModuleMigrations[] = [
    foundationMigrations,
    pkiMigrations,
    gatewayMigrations,
    ...(iamMigrations ? [iamMigrations] : []),
    ...modules
      .filter((m) => m.migrations?.length)
      .map((m) => ({ module: m.name, migrations: m.migrations! })),
  ];
  const db = database.db as Kysely<ComputeTables>;
  const live = config.live ?? {};
  const hub = new LiveHub({
    db: () => db,
    database,
    pollMs: live.pollMs,
    reauthorizeMs: live.reauthorizeMs,
    // A configured IAM decides elsewhere; its changes reach open streams through the periodic check.
    iamFeed: !config.iam,
    log: (message, error) => log({ level: 'warn', message, error }),
  });
  const watch = createWatch({
    hub,
    iam,
    trustedOrigins: config.trustedOrigins,
    limiter,
    db: () => db,
    log,
    heartbeatMs: live.heartbeatMs,
    retryMs: live.retryMs,
  });
  for (const path of live.paths ?? [])
    if (!/^\/[A-Za-z0-9._~\/-]*$/.test(path) || path.startsWith('/api/iam'))
      throw new ComputeError(
        'INVALID_CONFIG',
        `live.paths: ${JSON.stringify(path)} is not a path to serve the stream at`,
      );
  // The MCP endpoint calls each method through the handler's own dispatch, made just below.
  const boundMethods = [...methods.values()].map((bound) => bound.method);
  const mcp = createMcpEndpoint({
    basePath,
    iam,
    trustedOrigins: config.trustedOrigins,
    limiter,
    dispatch: (call) => dispatch(call),
    methods: () => boundMethods,
    log,
  });
  const { handler, dispatch } = createHandler({
    beside: [{ serve: watch, paths: [`${basePath}/watch`, ...(live.paths ?? ['/watch'])] }, mcp],
    basePath,
    methods,
    routes,
    iam,
    confirmations: confirmationStore,
    ...(iamHandler ? { iamHandler } : {}),
    db: () => db,
    trustedOrigins: config.trustedOrigins,
    limiter,
    now,
    log,
  });
  const eventRetentionMs = retentionMs(config.events?.retention);
  // The audit log's seal runs beside the modules' jobs: it signs with the deployment's audit key,
  // which it loads from the PKI bundle at each run (docs/audit.md).
  const checkpointEveryMs = 1000 * (config.audit?.checkpointEverySeconds ?? DEFAULT_CHECKPOINT_EVERY_SECONDS);
  const jobs: NonNullable<ComputeModule['jobs']> = {
    ...Object.fromEntries(modules.flatMap((m) => Object.entries(m.jobs ?? {}))),
    [AUDIT_CHECKPOINT_JOB]: checkpointJob({
      everyMs: checkpointEveryMs,
      log,
      signer: async () => {
        const { loadAuditSigner } = await import('./audit/keys.js');
        return loadAuditSigner({ cwd: process.cwd(), pki: config.pki, secret: config.secret });
      },
    }),
  };

  async function doctor(options: { pkiPath?: string } = {}): Promise<DoctorReport> {
    const findings: DoctorFinding[] = [];
    try {
      const dbNow = await databaseNow(database);
      findings.push({
        check: 'database.reachable',
        severity: 'ok',
        message: `${database.description} answers`,
      });
      const skewMs = Math.abs(dbNow.getTime() - now().getTime());
      findings.push(
        skewMs > 5000
          ? {
              check: 'clock.skew',
              severity: 'warning',
              message: `this machine's clock is ${Math.round(skewMs / 1000)} s off the database's`,
            }
          : { check: 'clock.skew', severity: 'ok', message: `clock within ${skewMs} ms of the database` },
      );
      const status = await migrationStatus(database.db, allMigrations);
      const changed = status.filter((s) => s.state === 'changed');
      const pending = status.filter((s) => s.state === 'pending');
      findings.push(
        changed.length
          ? {
              check: 'schema.current',
              severity: 'error',
              message: `edited after being applied: ${changed.map((s) => `${s.module}/${s.name}`).join(', ')}`,
            }
          : pending.length
            ? {
                check: 'schema.current',
                severity: 'error',
                message: `${pending.length} migration(s) pending: run better-compute migrate`,
              }
            : { check: 'schema.current', severity: 'ok', message: `${status.length} migration(s) applied` },
      );
      if (!changed.length && !pending.length) {
        const { auditSealFinding } = await import('./audit/doctor.js');
        findings.push(await auditSealFinding(db, dbNow, checkpointEveryMs));
      }
    } catch (error) {
      findings.push({
        check: 'database.reachable',
        severity: 'error',
        message: `${database.description} does not answer: ${error instanceof Error ? error.message : String(error)}`,
      });
    }
    const tableKeys = new Set(methodList.map(methodKey));
    const unbound = methodList.filter(
      (m) => !methods.has(methodKey(m)) && (!config.modules || config.modules.includes(m.module)),
    );
    const stray = [...methods.keys()].filter((k) => !tableKeys.has(k) && !k.startsWith('plugins.'));
    findings.push(
      unbound.length || stray.length
        ? {
            check: 'registry.consistent',
            severity: 'error',
            message: [
              unbound.length ? `unbound: ${unbound.map(methodKey).join(', ')}` : '',
              stray.length ? `not in the table: ${stray.join(', ')}` : '',
            ]
              .filter(Boolean)
              .join('; '),
          }
        : { check: 'registry.consistent', severity: 'ok', message: `${methods.size} method(s) bound` },
    );
    try {
      await iam.tenantState('root');
      findings.push({
        check: 'iam.wired',
        severity: 'ok',
        message: config.iam ? 'the configured IAM answers' : 'the embedded Better IAM answers',
      });
    } catch (error) {
      findings.push({
        check: 'iam.wired',
        severity: 'error',
        message: `IAM does not answer: ${error instanceof Error ? error.message : String(error)}`,
      });
    }
    if (embeddedIam)
      findings.push(
        embeddedIam.secretsSealed()
          ? {
              check: 'secrets.sealed',
              severity: 'ok',
              message: 'TOTP seeds are sealed under the deployment’s secret',
            }
          : {
              check: 'secrets.sealed',
              severity: 'warning',
              message:
                'no BETTER_COMPUTE_SECRET: TOTP seeds are stored unsealed; set it (and keep it) before people enrol',
            },
      );
    findings.push({
      check: 'cookies.origins',
      severity: 'ok',
      message: config.trustedOrigins
        ? `session cookies are accepted from ${config.trustedOrigins.join(', ')}`
        : 'no trustedOrigins: session cookies are accepted only from loopback origins (set trustedOrigins to serve a console by name)',
    });
    const pkiPath = options.pkiPath ?? config.pki;
    if (pkiPath) {
      const { pkiFindings } = await import('./pki/doctor.js');
      const { resolvePkiPath } = await import('./pki/bundle.js');
      const { readRecordedPins } = await import('./pki/pins.js');
      const recorded = await readRecordedPins(db).catch(() => undefined);
      findings.push(
        ...(await pkiFindings({
          path: resolvePkiPath(process.cwd(), pkiPath),
          secret: config.secret,
          recorded,
        })),
      );
    }
    return { ok: findings.every((f) => f.severity === 'ok'), findings };
  }

  return {
    handler,
    dispatch,
    watch,
    live: hub,
    config: { ...config, basePath },
    database,
    iam,
    embeddedIam,
    routes,
    async migrate() {
      const result = await migrate(database.db, allMigrations);
      await iam.installActions(actionCatalog([...methods.values()].map((b) => b.method)));
      return result;
    },
    migrationStatus: () => migrationStatus(database.db, allMigrations),
    doctor,
    startWorkers(roles: WorkerRole[]) {
      const background = roles.includes('controllers') || roles.includes('sinks');
      if (!background) return { stop: async () => {} };
      if (roles.includes('controllers')) {
        queueCheckpoint(db, now()).catch((error: unknown) =>
          log({ level: 'warn', message: 'could not queue the audit checkpoint', error }),
        );
      }
      const running = [
        startWorkerLoop({
          db,
          jobs,
          listen: (wake) => listenOn(database, [JOBS_CHANNEL], { notification: wake }),
          maintenance: roles.includes('controllers'),
          eventRetentionMs,
          vacuum: database.kind === 'pglite',
          now,
          log,
        }),
        ...modules
          .flatMap((m) => m.loops ?? [])
          .filter((loop) => roles.includes(loop.role))
          .map((loop) => loop.start({ db, now, log })),
      ];
      return { stop: async () => void (await Promise.all(running.map((r) => r.stop()))) };
    },
    runDueJobs: (kinds?: readonly string[]) =>
      runDueJobs(
        { db, jobs, now, log },
        kinds?.filter((kind) => kind in jobs),
      ),
    gauges: () => collectGauges(modules, db, database, now()),
    async close() {
      await hub.close();
      await embeddedIam?.close();
      if (ownsDatabase) await database.close();
    },
  };
}

/** Whether the deployment's destructive-batch quorum is on: its bundle holds an approver chain. */
function quorumOn(pki: string | undefined): () => Promise<boolean> {
  const approvers = createApproverLoader({ pki });
  return async () => (await approvers.current()) !== null;
}
