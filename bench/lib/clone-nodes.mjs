// A large fleet in seconds: copies of one joined node (its row, GPU groups, GPUs and inventory),
// each with its own id, name and NVLink domain, written in one transaction straight to the
// database. Joining ten thousand machines through the API would take the bench most of an hour;
// what the benches measure is reading and placing over such a fleet, not joining it.
import { newId } from '../../packages/core/dist/index.js';

/** Adds `count` copies of node `nodeId` to its pool; resolves with the time it took in ms. */
export async function cloneNodes(client, nodeId, count) {
  const ids = Array.from({ length: count }, () => newId('node'));
  const started = performance.now();
  await client.query('begin');
  await client.query(
    `create temporary table bench_ids on commit drop as
       select id, ord, 'gpu-' || lpad(ord::text, 5, '0') as name, 'nvl-' || lpad(ord::text, 5, '0') as domain
       from unnest($1::text[]) with ordinality as u(id, ord)`,
    [ids],
  );
  await client.query(
    `insert into compute.nodes (id, tenant_id, pool_id, name, state, state_before_offline, labels, taints,
       no_schedule, cpu_cores, memory_gib, inventory_revision, reported_revision, credential_hash,
       gpu_count, free_gpus, last_heartbeat_at, state_changed_at, version, created_at, updated_at)
     select b.id, n.tenant_id, n.pool_id, b.name, n.state, n.state_before_offline, n.labels, n.taints,
       n.no_schedule, n.cpu_cores, n.memory_gib, n.inventory_revision, n.reported_revision, n.credential_hash,
       n.gpu_count, n.free_gpus,
       n.last_heartbeat_at, n.state_changed_at, n.version, n.created_at, n.updated_at
     from bench_ids b cross join compute.nodes n where n.id = $1 order by b.ord`,
    [nodeId],
  );
  await client.query(
    `insert into compute.gpu_groups (node_id, group_no, pool_id, model, product, vram_gib, nvlink_domain, total, free,
       gpu_indices, holders)
     select b.id, g.group_no, g.pool_id, g.model, g.product, g.vram_gib, b.domain, g.total, g.free, g.gpu_indices, g.holders
     from bench_ids b cross join compute.gpu_groups g where g.node_id = $1`,
    [nodeId],
  );
  await client.query(
    `insert into compute.gpus (node_id, idx, group_no, pool_id, model, product, vram_gib, nvlink_domain)
     select b.id, g.idx, g.group_no, g.pool_id, g.model, g.product, g.vram_gib, b.domain
     from bench_ids b cross join compute.gpus g where g.node_id = $1`,
    [nodeId],
  );
  await client.query(
    `insert into compute.node_inventories (node_id, revision, inventory, recorded_at)
     select b.id, i.revision,
       jsonb_set(i.inventory, '{gpus}', (select jsonb_agg(jsonb_set(g, '{nvlinkDomain}', to_jsonb(b.domain)))
                                         from jsonb_array_elements(i.inventory->'gpus') g)),
       i.recorded_at
     from bench_ids b cross join compute.node_inventories i where i.node_id = $1`,
    [nodeId],
  );
  await client.query('commit');
  await client.query('analyze');
  return performance.now() - started;
}
