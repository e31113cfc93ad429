/**
 * The deterministic fleet simulator (DESIGN section 9): the real control plane on PGlite with a
 * virtual clock, a seeded fleet that joins through join tokens, join requests, claims and
 * heartbeats, simulated tenants that reserve, extend and release through `compute.handler`, the
 * real controller, and faults (a node goes silent, is cordoned, drained or retired). After every
 * step it checks the invariants; it returns a report with a hash of the final state, which the
 * same seed reproduces.
 */
import { createHash } from 'node:crypto';
import {
  type AuthorizationCheck,
  type AuthorizationDecision,
  type IamBridge,
  type Identity,
  ROOT_TENANT,
  type TenantState,
} from '@better-compute/core';
import { type Database, openDatabase } from '@better-compute/db';
import { sql, type Kysely } from 'kysely';
import { betterCompute } from '../compute.js';
import type { ComputeTables } from '../db/tables.js';
import { runFleetController } from '../modules/fleet/index.js';
import { SIM_RUNTIME_JOB } from '../modules/vps/index.js';
import { WORKFLOW_JOB } from '../modules/workflows/index.js';
import { checkAll, checkStep, EventReplay, type Violation } from './invariants.js';
import { createRandom, seedFleet, type SimNodeSpec } from './fleet.js';
import { checkInstances, INSTANCE_REFUSALS, setUpInstancePool } from './instances.js';
import { type MetalSite, setUpMetal } from './metal.js';

export interface SimulationOptions {
  seed: number;
  nodes: number;
  steps: number;
  /** Simulated tenants (default 3). */
  tenants?: number;
  /** Whether nodes go silent, are cordoned, drained and retired, and BMCs and PXE fail (default false). */
  faults?: boolean;
  /**
   * Bare-metal machines at the site, run through a simulated site agent (metal.ts); default 0, and
   * with 0 the run is the one without them, hash included.
   */
  metal?: number;
  /** Virtual seconds per step (default 60). */
  stepSeconds?: number;
  /** How often all invariants (and the event replay) are checked; the cheap ones run every step. Default 100. */
  fullCheckEvery?: number;
  /** A database to run on; a fresh in-memory PGlite by default. */
  database?: Database;
  /** Called every `progressEvery` steps. */
  onProgress?: (
    step: number,
    elapsedMs: number,
    phasesMs: Readonly<Record<string, number>>,
    violations: number,
  ) => void;
  progressEvery?: number;
  /** Called at the end of every step, checks included: a test plants a fault in the store here. */
  afterStep?: (step: number, db: Kysely<ComputeTables>) => Promise<void>;
}

export interface SimulationReport {
  ok: boolean;
  seed: number;
  /** The GPU pool's machines (`nodes` asked for). */
  nodes: number;
  /** The instance pool's machines, one for every twenty of the GPU pool's (at least two). */
  instanceNodes: number;
  gpus: number;
  steps: number;
  tenants: number;
  faults: boolean;
  /** Bare-metal machines (`metal` asked for). */
  metal: number;
  /**
   * SHA-256 of the final state (nodes by name, reservations by order, bindings, event types, and
   * the bare-metal machines by name when metal > 0).
   */
  stateHash: string;
  counts: Record<string, number>;
  violations: Violation[];
  timing: { setupMs: number; runMs: number; stepsPerSecond: number; phasesMs: Record<string, number> };
}

/** Tokens are `sim:<tenant>`; every simulated identity may do everything in its tenant. */
class SimBridge implements IamBridge {
  async authenticate(credential: string): Promise<Identity | null> {
    const match = /^sim:([a-z][a-z0-9-]*)$/.exec(credential);
    if (!match) return null;
    return {
      principalId: `sa_sim_${match[1]}`,
      principalKind: 'service-account',
      tenantId: match[1]!,
      credentialKind: 'api-key',
      credentialId: `key_sim_${match[1]}`,
      mfa: false,
      expiresAt: null,
    };
  }
  async tenantState(tenantId: string): Promise<TenantState | null> {
    return tenantId === ROOT_TENANT || tenantId.startsWith('sim-') ? 'active' : null;
  }
  async authorize(_identity: Identity, checks: AuthorizationCheck[]): Promise<AuthorizationDecision[]> {
    return checks.map(() => ({ allowed: true, reason: 'simulated tenant' }));
  }
  async installActions(): Promise<void> {}
}

interface SimNode {
  spec: SimNodeSpec;
  id: string;
  credential: string;
  /** Heartbeats stop until this step (a silent node). */
  silentUntil: number;
  retired: boolean;
  phase: number;
}

interface Held {
  id: string;
  tenant: string;
  ended: boolean;
}

class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/** Runs a simulation and returns its report; it never throws for a violation. */
export async function runSimulation(options: SimulationOptions): Promise<SimulationReport> {
  const started = performance.now();
  const random = createRandom(options.seed);
  const tenantCount = options.tenants ?? 3;
  const stepSeconds = options.stepSeconds ?? 60;
  const fullCheckEvery = options.fullCheckEvery ?? 100;
  /** Steps between the simulator's own VACUUM ANALYZE (see the loop). */
  const VACUUM_EVERY = 500;
  /** Steps between replays compared with every reservation ever made (and at the end). */
  const FULL_REPLAY_EVERY = 10_000;
  let nowMs = Date.UTC(2026, 0, 1);
  const now = () => new Date(nowMs);
  const metalCount = options.metal ?? 0;
  const database = options.database ?? (await openDatabase({ pglite: {} }));
  const compute = await betterCompute(
    {
      database,
      iam: new SimBridge(),
      rateLimit: false,
      trustedOrigins: [],
      // Enrolment seals BMC passwords under the deployment's secret; a run without machines has none.
      ...(metalCount > 0 ? { secret: 'sim-deployment-secret-for-bmc-passwords' } : {}),
    },
    { now, log: () => {} },
  );
  const db = database.db as Kysely<ComputeTables>;
  const counts: Record<string, number> = {};
  const bump = (key: string) => void (counts[key] = (counts[key] ?? 0) + 1);

  async function api<T = Record<string, any>>(
    method: string,
    body: Record<string, unknown>,
    token?: string,
  ): Promise<T> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    const response = await compute.handler(
      new Request(`http://sim/api/compute/${method.replaceAll('.', '/')}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      }),
    );
    const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
    if (answer.error) throw new ApiError(answer.error.code, answer.error.message);
    return answer.data as T;
  }

  try {
    await compute.migrate();
    const ops = 'sim:root';
    const tenants = Array.from({ length: tenantCount }, (_, i) => `sim-t${i + 1}`);
    const site = await api<{ id: string }>('sites.create', { name: 'sim-site', region: 'sim-1' }, ops);
    const pool = await api(
      'pools.create',
      { siteId: site.id, name: 'sim-gpu', class: 'gpu', driver: 'sim' },
      ops,
    );
    const poolId = pool.id as string;
    const specs = seedFleet(options.nodes, random);
    const totalGpus = specs.reduce((s, n) => s + n.inventory.gpus.length, 0);
    const quotas = new Map<string, number>();
    for (const tenant of tenants) {
      await api('pools.offer', { poolId, offerTenantId: tenant }, ops);
      const limit = Math.max(8, Math.floor((totalGpus * 0.6) / Math.max(1, tenantCount - 1)));
      await api('quotas.set', { poolId, subjectTenantId: tenant, resource: 'gpus', limit }, ops);
      quotas.set(tenant, limit);
    }
    // Each node heartbeats about once per `heartbeatEvery` steps: one heartbeat a step on average,
    // so the simulation's cost does not grow with the fleet; offline comes after three missed.
    const instancePool = await setUpInstancePool(api, {
      ops,
      siteId: site.id,
      tenants,
      seed: options.seed,
      nodes: Math.max(2, Math.ceil(options.nodes / 20)),
    });
    const heartbeatEvery = Math.max(5, specs.length + instancePool.specs.length);
    const offlineAfterSeconds = heartbeatEvery * stepSeconds * 3;
    const nodes: SimNode[] = [];
    // Nodes join as a daemon would: the token, a join request, an approval, a claim, a heartbeat.
    const join = async (joinPoolId: string, joining: readonly SimNodeSpec[], phases: () => number) => {
      const minted = await api<{ token: string }>(
        'joinTokens.create',
        { poolId: joinPoolId, uses: joining.length, lifetimeSeconds: 86_400 },
        ops,
      );
      for (const spec of joining) {
        const asked = await api<{ joinRequestId: string; claimSecret: string }>('nodes.join', {
          joinToken: minted.token,
          hostname: spec.hostname,
          inventory: spec.inventory,
          labels: spec.labels,
        });
        await api('joinRequests.approve', { joinRequestId: asked.joinRequestId }, ops);
        const claimed = await api<{ nodeId: string; nodeCredential: string }>('nodes.claim', {
          joinRequestId: asked.joinRequestId,
          claimSecret: asked.claimSecret,
        });
        await api('nodes.heartbeat', { nodeCredential: claimed.nodeCredential });
        nodes.push({
          spec,
          id: claimed.nodeId,
          credential: claimed.nodeCredential,
          silentUntil: 0,
          retired: false,
          phase: phases(),
        });
      }
    };
    await join(poolId, specs, () => Math.floor(random() * heartbeatEvery));
    // The GPU pool's nodes take their faults from `nodes`; the instance pool's are kept apart.
    const gpuNodes = nodes.length;
    await join(instancePool.poolId, instancePool.specs, () => nodes.length % heartbeatEvery);
    const names = new Map(nodes.map((n) => [n.id, n.spec.hostname]));
    // The machines and their site agent come last, so everything before is set up as without them.
    let metal: MetalSite | null = null;
    if (metalCount > 0) {
      metal = await setUpMetal(api, db, {
        ops,
        siteId: site.id,
        seed: options.seed,
        machines: metalCount,
        faults: options.faults ?? false,
        stepSeconds,
        heartbeatEvery,
        now,
        bump,
      });
      names.set(metal.agent.id, metal.agent.hostname);
    }
    const jobKinds = [WORKFLOW_JOB, SIM_RUNTIME_JOB, ...(metal?.jobKinds ?? [])];
    const setupMs = performance.now() - started;

    const load = Math.max(1, specs.length / 40);
    const held: Held[] = [];
    const live = () => held.filter((h) => !h.ended);
    const replay = new EventReplay();
    const violations: Violation[] = [];
    let lastBindingId = 0;
    const runStart = performance.now();
    const phasesMs: Record<string, number> = {
      heartbeats: 0,
      faults: 0,
      tenants: 0,
      controller: 0,
      checks: 0,
    };
    let mark = performance.now();
    const phase = (name: string) => {
      const at = performance.now();
      phasesMs[name] = (phasesMs[name] ?? 0) + (at - mark);
      mark = at;
    };

    for (let step = 1; step <= options.steps && violations.length < 50; step++) {
      nowMs += stepSeconds * 1000;
      // Heartbeats of the nodes whose turn it is.
      for (const node of nodes) {
        if (node.retired || node.silentUntil > step || (step + node.phase) % heartbeatEvery !== 0) continue;
        await api('nodes.heartbeat', { nodeCredential: node.credential });
        bump('heartbeats');
      }
      phase('heartbeats');
      // Faults.
      if (options.faults && random() < 0.02) {
        const node = nodes[Math.floor(random() * gpuNodes)]!;
        const roll = random();
        try {
          if (node.retired) {
            // nothing
          } else if (roll < 0.35) {
            node.silentUntil = step + Math.floor(heartbeatEvery * (2 + random() * 6));
            bump('fault.silent');
          } else if (roll < 0.6) {
            await api('nodes.cordon', { nodeId: node.id, reason: 'sim fault' }, ops);
            bump('fault.cordon');
          } else if (roll < 0.85) {
            await api('nodes.drain', { nodeId: node.id, reason: 'sim fault' }, ops);
            bump('fault.drain');
          } else if (roll < 0.97) {
            await api('nodes.uncordon', { nodeId: node.id }, ops);
            bump('fault.uncordon');
          } else if (nodes.filter((n) => n.retired).length < Math.max(1, gpuNodes * 0.02)) {
            await api('nodes.retire', { nodeId: node.id, force: true, reason: 'sim fault' }, ops);
            node.retired = true;
            bump('fault.retire');
          }
        } catch (error) {
          if (!(error instanceof ApiError) || error.code !== 'INVALID_STATE') throw error;
          bump('refused.INVALID_STATE');
        }
      }
      phase('faults');
      // What may take new work from here to the end of the step, as the nodes' events tell it (the
      // replay reads only the events since its last read; the full checks hold the events to the table).
      await replay.catchUp(db);
      const notReady = new Set([...replay.nodes].filter(([, state]) => state !== 'ready').map(([id]) => id));
      phase('checks');
      // One tenant acts.
      const tenant = tenants[Math.floor(random() * tenants.length)]!;
      const token = `sim:${tenant}`;
      const mine = live().filter((h) => h.tenant === tenant);
      const roll = random();
      try {
        if (roll < 0.5) {
          const sizes = [1, 1, 2, 2, 4, 4, 8, 8, 16, 32];
          const gpus = sizes[Math.floor(random() * sizes.length)]!;
          const nvlink = gpus > 1 && random() < 0.4;
          const selector =
            random() < 0.15
              ? ['vramGiB >= 80', 'gpuModel in (A100, L40S)', 'zone = zone-1'][Math.floor(random() * 3)]
              : undefined;
          // Longer reservations on larger fleets keep the pool busy enough to queue.
          const durationSeconds = stepSeconds * (5 + Math.floor(random() * 240 * load));
          const r = await api<{ id: string; state: string }>(
            'reservations.create',
            {
              poolId,
              gpus,
              durationSeconds,
              nvlink,
              ...(selector ? { selector } : {}),
              idempotencyKey: `sim-${options.seed}-${step}`,
            },
            token,
          );
          held.push({ id: r.id, tenant, ended: false });
          bump(`reserve.${r.state}`);
        } else if (roll < 0.62 && mine.length) {
          const target = mine[Math.floor(random() * mine.length)]!;
          await api(
            'reservations.extend',
            { reservationId: target.id, bySeconds: stepSeconds * (1 + Math.floor(random() * 60)) },
            token,
          );
          bump('extend');
        } else if (roll < 0.85 && mine.length) {
          const target = mine[Math.floor(random() * mine.length)]!;
          await api('reservations.release', { reservationId: target.id }, token);
          target.ended = true;
          bump('release');
        } else {
          bump('idle');
        }
      } catch (error) {
        if (
          !(error instanceof ApiError) ||
          !['QUOTA_EXCEEDED', 'INVALID_STATE', 'INVALID_ARGUMENT'].includes(error.code)
        )
          throw error;
        bump(`refused.${error.code}`);
      }
      try {
        bump(await instancePool.act(step));
      } catch (error) {
        if (!(error instanceof ApiError) || !INSTANCE_REFUSALS.includes(error.code)) throw error;
        bump(`instance.refused.${error.code}`);
      }
      // The site agent answers what it took, the ramdisks report, and the operator runs verbs.
      if (metal) {
        phase('tenants');
        await metal.step(step, now());
        phase('metal');
      }
      // The workflows' jobs due now, and the sim runtime completing the instance pool's commands;
      // the controllers' own jobs are left queued, since the simulator runs its controller itself.
      counts.jobs = (counts.jobs ?? 0) + (await compute.runDueJobs(jobKinds));
      phase('tenants');
      // The controller: offline nodes, expiry, the queue.
      await runFleetController(db, now(), { offlineAfterSeconds, activateQueues: step % 10 === 0 });
      phase('controller');
      // Invariants of the step: bindings made on nodes that were not ready at its start, twice-bound GPUs, quotas.
      const checked = await checkStep(db, step, { lastBindingId, notReady, quotas, poolId });
      violations.push(...checked.violations);
      lastBindingId = checked.lastBindingId;
      // PGlite has no autovacuum: without this, every row a step rewrites (heartbeats, counters,
      // bindings) stays behind as a dead version, tables and indexes grow with the run, statistics
      // go stale and each step gets slower than the last. A server's autovacuum does this for it.
      if (step % VACUUM_EVERY === 0) await sql`vacuum analyze`.execute(db);
      if (step % fullCheckEvery === 0 || step === options.steps) {
        violations.push(...(await checkAll(db, step, quotas, poolId)));
        violations.push(...(await checkInstances(db, step, instancePool.poolId)));
        if (metal) violations.push(...(await metal.check(step, now())));
        await replay.catchUp(db);
        const full = step % FULL_REPLAY_EVERY === 0 || step === options.steps;
        violations.push(...(await replay.compare(db, step, full)));
        // The tenants forget what ended (expired, or ended with its node), so a step's work follows
        // what runs now and not the length of the run.
        const open = held.filter((h) => !h.ended);
        const ended = new Set(
          (
            await sql<{ id: string }>`
              select id from compute.reservations
              where state = 'ended' and id = any(${open.map((h) => h.id)}::text[])`.execute(db)
          ).rows.map((r) => r.id),
        );
        held.splice(0, held.length, ...open.filter((h) => !ended.has(h.id)));
      }
      phase('checks');
      await options.afterStep?.(step, db);
      if (options.onProgress && options.progressEvery && step % options.progressEvery === 0)
        options.onProgress(step, performance.now() - runStart, phasesMs, violations.length);
    }
    const runMs = performance.now() - runStart;

    const stateHash = await hashState(db, names, metal ? await metal.hashRows() : null);
    if (metal) Object.assign(counts, await metal.summary());
    const summary = (
      await sql<{
        state: string;
        n: number;
      }>`select state, count(*)::int as n from compute.reservations group by state order by state`.execute(db)
    ).rows;
    for (const row of summary) counts[`reservations.${row.state}`] = row.n;
    counts.events = replay.eventCount;
    return {
      ok: violations.length === 0,
      seed: options.seed,
      nodes: gpuNodes,
      instanceNodes: nodes.length - gpuNodes,
      gpus: totalGpus,
      steps: options.steps,
      tenants: tenantCount,
      faults: options.faults ?? false,
      metal: metalCount,
      stateHash,
      counts: Object.fromEntries(Object.entries(counts).sort(([a], [b]) => (a < b ? -1 : 1))),
      violations,
      timing: {
        setupMs: Math.round(setupMs),
        runMs: Math.round(runMs),
        stepsPerSecond: Math.round((options.steps / runMs) * 1000),
        phasesMs: Object.fromEntries(Object.entries(phasesMs).map(([k, v]) => [k, Math.round(v)])),
      },
    };
  } finally {
    await compute.close();
    if (!options.database) await database.close();
  }
}

/**
 * The final state with random ids replaced by what the seed decides: node names and reservation
 * order; the bare-metal machines by name when the run has them (and nothing of them when not).
 */
async function hashState(
  db: Kysely<ComputeTables>,
  names: ReadonlyMap<string, string>,
  metal: unknown[] | null,
): Promise<string> {
  const name = (id: string) => names.get(id) ?? id;
  const nodeRows = (
    await sql<{
      id: string;
      state: string;
      free_gpus: number;
      version: number;
    }>`select id, state, free_gpus, version from compute.nodes`.execute(db)
  ).rows
    .map((r) => [name(r.id), r.state, r.free_gpus, r.version])
    .sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1));
  const reservations = (
    await sql<{
      id: string;
      seq: number;
      tenant_id: string;
      state: string;
      gpus: number;
      end_reason: string | null;
      ends_at: Date | null;
      version: number;
    }>`
    select id, seq::int as seq, tenant_id, state, gpus, end_reason, ends_at, version from compute.reservations order by seq`.execute(
      db,
    )
  ).rows;
  const seqOf = new Map(reservations.map((r) => [r.id, r.seq]));
  const bindings = (
    await sql<{
      reservation_id: string;
      node_id: string;
      gpu_index: number;
      bound_at: Date;
      released_at: Date | null;
    }>`
    select b.reservation_id, b.node_id, i.gpu_index, b.bound_at, b.released_at
    from compute.gpu_bindings b cross join unnest(b.gpu_indices) as i(gpu_index)`.execute(db)
  ).rows
    .map((b) => [
      seqOf.get(b.reservation_id),
      name(b.node_id),
      b.gpu_index,
      new Date(b.bound_at).toISOString(),
      b.released_at ? new Date(b.released_at).toISOString() : null,
    ])
    .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
  const events = (
    await sql<{ type: string }>`select type from compute.events order by tx_id, tx_index`.execute(db)
  ).rows.map((e) => e.type);
  const hash = createHash('sha256');
  hash.update(
    JSON.stringify({
      nodes: nodeRows,
      reservations: reservations.map((r) => [
        r.seq,
        r.tenant_id,
        r.state,
        r.gpus,
        r.end_reason,
        r.ends_at ? new Date(r.ends_at).toISOString() : null,
        r.version,
      ]),
      bindings,
      events,
      ...(metal ? { metal } : {}),
    }),
  );
  return hash.digest('hex');
}
