/**
 * The probes a load balancer or an orchestrator asks a replica (docs/operations.md,
 * docs/decisions/health-probes.md). `/healthz` answers while the process does and touches nothing;
 * `/readyz` answers 200 only while the database answers a query in time, the schema is the one this
 * build expects, and this replica's roles run, else 503 naming the checks that failed.
 *
 * Both are public and cheap: no credential, no IAM call, and at most one database query at a time
 * whose answer is kept for a second, so a flood of probes costs one query a second.
 */
import { type Answer, ComputeError, errorAnswer, hideSecrets, requestIdFrom } from '@better-compute/core';
import type { ComputeInstance, WorkerRole } from '../types.js';

/** How long the database has to answer a readiness query before the replica counts as not ready. */
const DATABASE_PROBE_TIMEOUT_MS = 1000;
/** How long a database answer is reused by the probes that follow it. */
const DATABASE_PROBE_CACHE_MS = 1000;
/**
 * A query that never settles (a connection to a host that stopped answering) holds its place this
 * long; then a new one may go out, so readiness can come back without a restart.
 */
const ABANDON_PROBE_AFTER_MS = 10_000;

const HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

/** What a replica runs, as `serve` starts and stops it; readiness reads it. */
export interface RoleState {
  readonly wanted: readonly WorkerRole[];
  readonly running: Set<WorkerRole>;
  /** Set once the replica is told to stop: it drains, and says so to the load balancer. */
  stopping: boolean;
}

interface DatabaseAnswer {
  database: string;
  schema: string;
  at: number;
}

export interface Probes {
  /** The answer for a probe's path, or null for any other path (left to the API). */
  answer(httpMethod: string, pathname: string): Promise<Answer> | null;
}

function json(status: number, body: unknown): Answer {
  return { status, headers: { ...HEADERS }, body: JSON.stringify(body) };
}

/** The schema's state in a few words: which migrations this build has that the database lacks. */
function schemaState(status: Awaited<ReturnType<ComputeInstance['migrationStatus']>>): string {
  const changed = status.filter((s) => s.state === 'changed').length;
  const pending = status.filter((s) => s.state === 'pending').length;
  if (changed) return `${changed} migration(s) edited after being applied`;
  if (pending) return `${pending} migration(s) pending: run better-compute migrate`;
  return 'ok';
}

export function createProbes(options: {
  compute: Pick<ComputeInstance, 'migrationStatus'>;
  roles: RoleState;
  /** Told when the database check changes state, with the driver's reason (the answer gives none). */
  log?: (line: string) => void;
  timeoutMs?: number;
  cacheMs?: number;
}): Probes {
  const { compute, roles, log } = options;
  const timeoutMs = options.timeoutMs ?? DATABASE_PROBE_TIMEOUT_MS;
  const cacheMs = options.cacheMs ?? DATABASE_PROBE_CACHE_MS;
  let last: DatabaseAnswer | undefined;
  let inFlight: { settled: Promise<DatabaseAnswer>; since: number } | undefined;

  function record(answer: DatabaseAnswer, reason?: string): DatabaseAnswer {
    // The first answer is news only when it is bad.
    if (log && answer.database !== (last?.database ?? 'ok'))
      log(`readiness: database ${answer.database}${reason ? ` (${hideSecrets(reason)})` : ''}`);
    last = answer;
    return answer;
  }

  /** One query at a time: the ledger read that also proves the database answers. */
  function query(): Promise<DatabaseAnswer> {
    const now = Date.now();
    if (inFlight && now - inFlight.since < ABANDON_PROBE_AFTER_MS) return inFlight.settled;
    const settled = compute.migrationStatus().then(
      (status) => record({ database: 'ok', schema: schemaState(status), at: Date.now() }),
      (error: unknown) => {
        const reason = error instanceof Error ? error.message : String(error);
        return record({ database: 'unreachable', schema: 'unknown', at: Date.now() }, reason);
      },
    );
    const mine = { settled, since: now };
    inFlight = mine;
    void settled.finally(() => {
      if (inFlight === mine) inFlight = undefined;
    });
    return settled;
  }

  async function database(): Promise<DatabaseAnswer> {
    if (last && Date.now() - last.at < cacheMs) return last;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<DatabaseAnswer>((resolve) => {
      // A late answer is kept too: the probes that follow within the second do not wait for it.
      timer = setTimeout(
        () =>
          resolve(
            record({ database: `no answer within ${timeoutMs} ms`, schema: 'unknown', at: Date.now() }),
          ),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([query(), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  function rolesState(): string {
    if (roles.stopping) return 'stopping';
    const missing = roles.wanted.filter((role) => !roles.running.has(role));
    return missing.length ? `not running yet: ${missing.join(',')}` : 'ok';
  }

  async function readiness(): Promise<Answer> {
    const checks = { ...(await database()), roles: rolesState() } as Record<string, string | number>;
    delete checks.at;
    const failed = Object.keys(checks).filter((name) => checks[name] !== 'ok');
    return failed.length ? json(503, { ok: false, failed, checks }) : json(200, { ok: true, checks });
  }

  return {
    answer(httpMethod, pathname) {
      if (pathname !== '/healthz' && pathname !== '/readyz') return null;
      if (httpMethod !== 'GET' && httpMethod !== 'HEAD')
        return Promise.resolve(
          errorAnswer(
            new ComputeError('NOT_FOUND', `no route ${httpMethod} ${pathname}; probes are called with GET`),
            requestIdFrom(null),
          ),
        );
      if (pathname === '/healthz') return Promise.resolve(json(200, { ok: true }));
      // Whatever goes wrong in a probe is a 503 answer, never a 500.
      return readiness().catch(() => json(503, { ok: false, failed: ['probe'], checks: {} }));
    },
  };
}
