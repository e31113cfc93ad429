/**
 * Simulated machines for `dev --sim N`: N seeded machines join a pool through a join token, join
 * requests, approvals and claims (all through `compute.handler`, as an operator credential), then
 * heartbeat on a timer until stopped.
 */
import type { ComputeInstance } from '../types.js';
import { createRandom, seedFleet } from './fleet.js';

export interface SimulatedFleetOptions {
  /** How many machines. */
  nodes: number;
  /** A credential of the pool's owner (a platform operator in `dev`). */
  token: string;
  seed?: number;
  /** The pool to join; a site `sim-site` and pool `poolName` offered to `offerTo` are created when absent. */
  poolId?: string;
  /** The pool made when none is given: `sim-gpu` of class gpu by default, `sim-vps` for instances. */
  poolName?: string;
  poolClass?: 'gpu' | 'vps';
  /** Machines without GPUs (a VPS pool of plain hosts). */
  withoutGpus?: boolean;
  offerTo?: readonly string[];
  heartbeatMs?: number;
  basePath?: string;
  /**
   * Machines that joined in an earlier run (their node credentials): they come back with a
   * heartbeat instead of joining again, so a restarted `dev` keeps the same fleet.
   */
  machines?: readonly SimulatedMachine[];
}

/** A simulated machine's identity. The credential is a secret: keep it only where `dev` keeps its own. */
export interface SimulatedMachine {
  nodeId: string;
  nodeCredential: string;
}

export interface SimulatedFleet {
  poolId: string;
  nodeIds: string[];
  /** Every machine now in the fleet, returning ones first. */
  machines: SimulatedMachine[];
  stop(): Promise<void>;
}

export async function startSimulatedFleet(
  compute: ComputeInstance,
  options: SimulatedFleetOptions,
): Promise<SimulatedFleet> {
  const base = options.basePath ?? compute.config.basePath;
  async function api<T = Record<string, any>>(
    method: string,
    body: Record<string, unknown>,
    token?: string,
  ): Promise<T> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    const response = await compute.handler(
      new Request(`http://localhost${base}/${method.replaceAll('.', '/')}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      }),
    );
    const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
    if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
    return answer.data as T;
  }
  let poolId = options.poolId;
  if (!poolId) {
    const pools = await api<{ items: { id: string; name: string }[] }>(
      'pools.list',
      { limit: 500 },
      options.token,
    );
    const poolName = options.poolName ?? 'sim-gpu';
    poolId = pools.items.find((p) => p.name === poolName)?.id;
    if (!poolId) {
      const sites = await api<{ items: { id: string; name: string }[] }>(
        'sites.list',
        { limit: 500 },
        options.token,
      );
      const siteId =
        sites.items.find((s) => s.name === 'sim-site')?.id ??
        (await api<{ id: string }>('sites.create', { name: 'sim-site', region: 'sim' }, options.token)).id;
      poolId = (
        await api<{ id: string }>(
          'pools.create',
          { siteId, name: poolName, class: options.poolClass ?? 'gpu', driver: 'sim' },
          options.token,
        )
      ).id;
    }
    for (const tenant of options.offerTo ?? [])
      await api('pools.offer', { poolId, offerTenantId: tenant }, options.token);
  }
  // Returning machines first: one whose heartbeat is refused (its store was reset) is replaced.
  const machines: SimulatedMachine[] = [];
  for (const machine of (options.machines ?? []).slice(0, options.nodes)) {
    const answered = await api('nodes.heartbeat', { nodeCredential: machine.nodeCredential }).then(
      () => true,
      () => false,
    );
    if (answered) machines.push(machine);
  }
  const specs = seedFleet(options.nodes, createRandom(options.seed ?? 1))
    .slice(machines.length)
    .map((spec) =>
      options.withoutGpus
        ? { ...spec, hostname: `vps-${spec.hostname}`, inventory: { ...spec.inventory, gpus: [] } }
        : spec,
    );
  const { token } =
    specs.length > 0
      ? await api<{ token: string }>(
          'joinTokens.create',
          { poolId, uses: specs.length, lifetimeSeconds: 3600, description: 'dev --sim' },
          options.token,
        )
      : { token: '' };
  const credentials: string[] = machines.map((m) => m.nodeCredential);
  const nodeIds: string[] = machines.map((m) => m.nodeId);
  for (const spec of specs) {
    const asked = await api<{ joinRequestId: string; claimSecret: string }>('nodes.join', {
      joinToken: token,
      hostname: spec.hostname,
      inventory: spec.inventory,
      labels: spec.labels,
    });
    await api('joinRequests.approve', { joinRequestId: asked.joinRequestId }, options.token);
    const claimed = await api<{ nodeId: string; nodeCredential: string }>('nodes.claim', {
      joinRequestId: asked.joinRequestId,
      claimSecret: asked.claimSecret,
    });
    credentials.push(claimed.nodeCredential);
    nodeIds.push(claimed.nodeId);
    machines.push({ nodeId: claimed.nodeId, nodeCredential: claimed.nodeCredential });
  }
  let stopped = false;
  const beat = async () => {
    for (const nodeCredential of credentials) {
      if (stopped) return;
      await api('nodes.heartbeat', { nodeCredential }).catch(() => {});
    }
  };
  await beat();
  let running = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(beat);
  }, options.heartbeatMs ?? 15_000);
  timer.unref?.();
  return {
    poolId,
    nodeIds,
    machines,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
