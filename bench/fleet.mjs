#!/usr/bin/env node
// bench/fleet: fleet configuration at the size (issue 35: 50 sites, 500 pools, 5,000 quota
// rows; goal: plan under 2 s). One deployment on PostgreSQL in this process, called through its
// web handler as the CLI calls it in process. The fleet is made by one fleet.apply of a document
// (timed: every call in one transaction), then, in alternating rounds so a slow moment of the
// machine hits all alike: fleet.export (the baseline: the same reads, no comparison), fleet.plan of
// the export (nothing to do) and fleet.plan of an edited document (5 sites renamed, 500 quotas
// resized, 10 pools relabelled). Last, the edited document is applied (timed). Medians and the
// ratio to the export. It prints; it asserts nothing.
//
// Run: npm run build && node bench/fleet.mjs [sites=50] [poolsPerSite=10] [rounds=7]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres); BENCH_DB=pglite for
// PGlite in memory instead.
import pg from 'pg';
import { betterCompute } from '../packages/better-compute/dist/index.js';

const SITES = Number(process.argv[2] ?? 50);
const POOLS_PER_SITE = Number(process.argv[3] ?? 10);
const ROUNDS = Number(process.argv[4] ?? 7);
// Five tenants, each offered every pool with a gpus and a reservations quota: 10 quota rows a pool.
const TENANTS = ['t1', 't2', 't3', 't4', 't5'];

const pglite = process.env.BENCH_DB === 'pglite';
const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `bench_fleet_${Math.random().toString(36).slice(2, 10)}`;
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;
const admin = pglite ? null : new pg.Client({ connectionString: adminUrl });
await admin?.connect();
await admin?.query(`create database ${dbName}`);

const compute = await betterCompute(
  { database: pglite ? 'pglite:memory' : dbUrl.toString(), trustedOrigins: [], rateLimit: false },
  { log: () => {} },
);
try {
  await compute.migrate();
  const iam = compute.embeddedIam;
  const key = (await iam.bootstrapDev()).rootAdmin.apiKey;
  for (const tenant of TENANTS) await iam.createTenant({ id: tenant, name: tenant });

  async function call(method, body) {
    const response = await compute.handler(
      new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(body),
      }),
    );
    const answer = await response.json();
    if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
    return answer.data;
  }
  async function timed(what) {
    const start = process.hrtime.bigint();
    const result = await what();
    return { ms: Number(process.hrtime.bigint() - start) / 1e6, result };
  }

  // The fleet as a document of new objects, keyed by names of our own.
  const document = { kind: 'FleetConfig', version: 1, tenantId: 'root', sites: {}, pools: {} };
  for (let s = 0; s < SITES; s++) {
    document.sites[`site-${s}`] = { name: `site-${s}`, region: `region-${s % 5}`, labels: { rack: `r${s}` } };
    for (let p = 0; p < POOLS_PER_SITE; p++) {
      const name = `pool-${s}-${p}`;
      document.pools[name] = {
        site: `site-${s}`,
        name,
        class: 'gpu',
        labels: { tier: p % 2 ? 'gold' : 'silver' },
        offers: TENANTS,
        quotas: Object.fromEntries(TENANTS.map((t, i) => [t, { gpus: 8 + i, reservations: 2 + i }])),
      };
    }
  }
  const bytes = JSON.stringify(document).length;
  const first = await call('fleet.plan', { document, prune: false });
  const created = await timed(() =>
    call('fleet.apply', { document, prune: false, planHash: first.planHash }),
  );
  const exported = await call('fleet.export', {});
  const quotaRows = Object.values(exported.pools).reduce(
    (sum, pool) => sum + Object.values(pool.quotas).reduce((n, q) => n + Object.keys(q).length, 0),
    0,
  );

  const edited = structuredClone(exported);
  const siteIds = Object.keys(edited.sites);
  const poolIds = Object.keys(edited.pools);
  for (const id of siteIds.slice(0, 5)) edited.sites[id].name += '-renamed';
  for (const id of poolIds.slice(0, 100)) for (const t of TENANTS) edited.pools[id].quotas[t].gpus += 1;
  for (const id of poolIds.slice(0, 10)) edited.pools[id].labels.bench = 'yes';

  const cases = {
    'fleet.export (baseline)': () => call('fleet.export', {}),
    'fleet.plan, no change': () => call('fleet.plan', { document: exported, prune: true }),
    'fleet.plan, edited': () => call('fleet.plan', { document: edited, prune: true }),
  };
  const samples = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
  for (const run of Object.values(cases)) await run(); // warm up
  let editedPlan;
  for (let i = 0; i < ROUNDS; i++)
    for (const [name, run] of Object.entries(cases)) {
      const { ms, result } = await timed(run);
      samples[name].push(ms);
      if (name === 'fleet.plan, edited') editedPlan = result;
    }
  const applied = await timed(() =>
    call('fleet.apply', { document: edited, prune: true, planHash: editedPlan.planHash }),
  );

  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const baseline = median(samples['fleet.export (baseline)']);
  console.log(
    `Fleet of ${siteIds.length} sites, ${poolIds.length} pools, ${quotaRows} quota rows, ${poolIds.length * TENANTS.length} offers ` +
      `(a ${(bytes / 1024).toFixed(0)} KiB document; export ${(JSON.stringify(exported).length / 1024).toFixed(0)} KiB), ` +
      `${pglite ? 'PGlite' : 'PostgreSQL'}, median of ${ROUNDS} (node ${process.version})`,
  );
  for (const name of Object.keys(cases)) {
    const m = median(samples[name]);
    const goal = name.startsWith('fleet.plan') ? ' (goal < 2000 ms)' : '';
    console.log(`  ${name.padEnd(26)} ${m.toFixed(1).padStart(9)} ms  ${(m / baseline).toFixed(2)}x${goal}`);
  }
  console.log(
    `  ${'fleet.apply, the fleet'.padEnd(26)} ${created.ms.toFixed(1).padStart(9)} ms  ${(created.ms / baseline).toFixed(2)}x  (${created.result.calls} calls in one transaction)`,
  );
  console.log(
    `  ${'fleet.apply, edited'.padEnd(26)} ${applied.ms.toFixed(1).padStart(9)} ms  ${(applied.ms / baseline).toFixed(2)}x  (${applied.result.calls} calls: ${editedPlan.counts.update} objects updated)`,
  );
} finally {
  await compute.close();
  if (admin) {
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
}
