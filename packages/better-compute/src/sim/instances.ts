/**
 * Instances in the simulator: a VPS pool of simulated nodes (some with GPUs), a CPU flavor in two
 * sizes and a flavor with one GPU (which holds its GPU through a reservation, as on a real pool),
 * tenants that create, stop, start, resize and delete instances, and the `sim` runtime completing
 * the nodes' commands as the simulator's clock moves. Its own random generator, so the GPU pool's
 * part of a run draws the same numbers with or without it.
 */
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { createRandom, seedFleet, type SimNodeSpec } from './fleet.js';
import type { Violation } from './invariants.js';

export type SimApi = <T = Record<string, any>>(
  method: string,
  body: Record<string, unknown>,
  token?: string,
) => Promise<T>;

/** What an instance call may be refused for in a busy pool; anything else fails the simulation. */
export const INSTANCE_REFUSALS = ['INVALID_STATE', 'UNAVAILABLE', 'QUOTA_EXCEEDED'];

/** Instances a tenant may hold on the pool (a quota the invariants hold it to). */
const INSTANCE_QUOTA = 6;

export interface InstancePool {
  poolId: string;
  specs: SimNodeSpec[];
  /** One tenant's call on an instance this step, or none; answers what it did, for the counts. */
  act(step: number): Promise<string>;
}

/** Creates the VPS pool, its flavors, an image and the tenants' offers and quotas. */
export async function setUpInstancePool(
  api: SimApi,
  options: { ops: string; siteId: string; tenants: readonly string[]; seed: number; nodes: number },
): Promise<InstancePool> {
  const random = createRandom(options.seed ^ 0x5eed_1257);
  const pool = await api(
    'pools.create',
    { siteId: options.siteId, name: 'sim-vps', class: 'vps', driver: 'sim' },
    options.ops,
  );
  const poolId = pool.id as string;
  const flavor = async (name: string, vcpus: number, memoryMiB: number, gpus: number) =>
    (
      await api<{ id: string }>(
        'flavors.create',
        { poolId, name, vcpus, memoryMiB, diskGiB: 20, ...(gpus ? { gpus } : {}) },
        options.ops,
      )
    ).id;
  const small = await flavor('small', 2, 4096, 0);
  const large = await flavor('large', 8, 32_768, 0);
  const gpu = await flavor('gpu-1', 8, 65_536, 1);
  const image = await api<{ id: string }>(
    'images.register',
    {
      name: 'sim-debian',
      source: '/var/lib/better-compute/images/sim-debian.qcow2',
      diskFormat: 'qcow2',
      sha256: 'b'.repeat(64),
      sizeBytes: 2 ** 30,
      os: 'debian-12',
      channel: 'stable',
    },
    options.ops,
  );
  for (const tenant of options.tenants) {
    await api('pools.offer', { poolId, offerTenantId: tenant }, options.ops);
    await api(
      'instances.setQuota',
      { poolId, subjectTenantId: tenant, resource: 'instances', limit: INSTANCE_QUOTA },
      options.ops,
    );
  }
  // Nodes named apart from the GPU pool's, from the instance pool's own generator.
  const specs = seedFleet(options.nodes, random).map((spec) => ({
    ...spec,
    hostname: spec.hostname.replace(/^sim-/, 'sim-vps-'),
  }));
  const held = new Map<string, { id: string; gpus: boolean }[]>(options.tenants.map((t) => [t, []]));

  async function act(step: number): Promise<string> {
    if (random() >= 0.3) return 'instance.idle';
    const tenant = options.tenants[Math.floor(random() * options.tenants.length)]!;
    const token = `sim:${tenant}`;
    const mine = held.get(tenant)!;
    const roll = random();
    const picked = mine[Math.floor(random() * mine.length)];
    const target = picked?.id;
    if (roll < 0.35 || !target) {
      const flavorId = [small, small, large, gpu][Math.floor(random() * 4)]!;
      const created = await api<{ id: string }>(
        'instances.create',
        {
          poolId,
          flavorId,
          imageId: image.id,
          name: `i-${options.seed}-${step}`,
          idempotencyKey: `sim-instance-${options.seed}-${step}`,
        },
        token,
      );
      mine.push({ id: created.id, gpus: flavorId === gpu });
      return 'instance.create';
    }
    if (roll < 0.55) {
      await api('instances.stop', { instanceId: target, timeoutSeconds: 30 }, token);
      return 'instance.stop';
    }
    if (roll < 0.75) {
      await api('instances.start', { instanceId: target }, token);
      return 'instance.start';
    }
    if (roll < 0.85) {
      // A resize keeps an instance's GPUs, so only the CPU flavors trade places.
      if (picked.gpus) return 'instance.idle';
      await api('instances.resize', { instanceId: target, flavorId: random() < 0.5 ? small : large }, token);
      return 'instance.resize';
    }
    await api('instances.delete', { instanceId: target }, token);
    mine.splice(mine.indexOf(picked), 1);
    return 'instance.delete';
  }

  return { poolId, specs, act };
}

/**
 * The instances' invariants: no node holds more vCPUs or memory than it has, every instance that
 * is not deleted and has GPUs holds them through an active reservation bound on its own node (so
 * the GPU checks, which look at every binding, see them beside the reservations'), a deleted one
 * holds none, and no tenant holds more instances than its quota.
 */
export async function checkInstances(
  db: Kysely<ComputeTables>,
  step: number,
  poolId: string,
): Promise<Violation[]> {
  const violations: Violation[] = [];
  const over = await sql<{ node_id: string; vcpus: number; memory: number }>`
    select i.node_id, sum(i.vcpus)::int as vcpus, sum(i.memory_mib)::int as memory
    from compute.instances i join compute.nodes n on n.id = i.node_id
    where i.state <> 'deleted'
    group by i.node_id, n.cpu_cores, n.memory_gib
    having sum(i.vcpus) > n.cpu_cores or sum(i.memory_mib) > n.memory_gib * 1024`.execute(db);
  for (const row of over.rows)
    violations.push({
      step,
      invariant: 'instances-fit-their-node',
      message: `node ${row.node_id} holds ${row.vcpus} vCPUs and ${row.memory} MiB of instances, more than it has`,
    });
  const gpus = await sql<{ id: string; state: string; problem: string }>`
    select i.id, i.state,
      case
        when i.state <> 'deleted' and r.state is distinct from 'active' then 'its reservation is ' || coalesce(r.state, 'missing')
        when i.state <> 'deleted' and coalesce(b.gpus, 0) <> i.gpus then 'it holds ' || coalesce(b.gpus, 0) || ' of its GPUs'
        when i.state = 'deleted' and r.state = 'active' then 'it is deleted and its reservation is active'
      end as problem
    from compute.instances i
    left join compute.reservations r on r.id = i.reservation_id
    left join lateral (
      select sum(g.gpu_count)::int as gpus from compute.gpu_bindings g
      where g.reservation_id = i.reservation_id and g.node_id = i.node_id and g.released_at is null
    ) b on true
    where i.pool_id = ${poolId} and i.gpus > 0`.execute(db);
  for (const row of gpus.rows)
    if (row.problem)
      violations.push({
        step,
        invariant: 'instance-gpus-held',
        message: `instance ${row.id} (${row.state}): ${row.problem}`,
      });
  const quota = await sql<{ tenant_id: string; n: number }>`
    select tenant_id, count(*)::int as n from compute.instances
    where pool_id = ${poolId} and state <> 'deleted'
    group by tenant_id having count(*) > ${INSTANCE_QUOTA}`.execute(db);
  for (const row of quota.rows)
    violations.push({
      step,
      invariant: 'instance-quota',
      message: `tenant ${row.tenant_id} holds ${row.n} instances on pool ${poolId}, over its quota of ${INSTANCE_QUOTA}`,
    });
  return violations;
}
