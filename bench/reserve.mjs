#!/usr/bin/env node
// bench/reserve: reservations.create then reservations.release over HTTP on loopback, through the
// real server (a child process running `serve` on PostgreSQL) with a 10,000-node GPU pool, against
// the replay floor: the statements that server sent for one reserve and one release (captured in
// the server process as they reach the driver), replayed straight through `pg` from this process
// with no server (same text, same prepared names, parameters of the same shape, the same
// pipelining, a pool of the server's size). The server and the floor run in alternating slices
// after a warm-up, at each client count, so both share the host's noise; WAL per pair is checked to
// match. An older floor, a few trivial statements, is kept as a gauge of the host's speed only.
// Then capacity.get with 100,000 reservations on record (each side's database gets them), and each
// server's memory (resident and peak) with the fleet. It prints; it asserts nothing.
//
// Run: npm run build && node bench/reserve.mjs [seconds per slice=4] [clients=4,16] [rounds=3]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_NODES (10000),
//      BENCH_COMPUTE_DIST (the built better-compute index.js to run; default the package's dist),
//      BENCH_BASELINE_DIST (another build's index.js, measured beside it on a copy of the database),
//      BENCH_BASELINE_SQL (statements run on that copy first, e.g. to drop a trigger: the same
//      build as BENCH_BASELINE_DIST then measures what the trigger costs),
//      BENCH_BASELINE_OWN_SCHEMA=1 (the baseline's database set up by its own build instead of
//      copied, for a build whose migrations differ),
//      BENCH_WARMUP_S (10: the warm-up of each side, or 3,000 pairs if sooner),
//      BENCH_KEEP_DB=1 (keep the database afterwards, to study its plans),
//      BENCH_PROFILE_DIR=<dir> (the server writes a CPU profile there),
//      BENCH_WALDUMP=<path of pg_waldump> (default /usr/lib/postgresql/15/bin/pg_waldump: rows,
//      index entries and WAL of the bench's database alone; without it, WAL is the cluster's),
//      BENCH_POOL=<n> (the server's PostgreSQL connections; its default otherwise),
//      BENCH_AUTO_EXPLAIN=<ms> (plans of statements slower than that, in PostgreSQL's log),
//      BENCH_WAITS=1 (what the backends wait on during each side's slices, sampled).
// CPU per pair: the server process, the bench database's PostgreSQL backends, and this process
// (the load generator, which is also the replay's client), from /proc.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { newId } from '../packages/core/dist/index.js';
import { openDatabase } from '../packages/db/dist/index.js';
import { cloneNodes } from './lib/clone-nodes.mjs';
import { connect, cpuPerOperation, cpuSnapshot, startChild } from './lib/load.mjs';
import { addWal, freshValues, replayCall, shapeOf, walOf } from './lib/replay.mjs';

const seconds = Number(process.argv[2] ?? 4);
const clientCounts = String(process.argv[3] ?? '4,16')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const clients = Math.max(...clientCounts);
const rounds = Number(process.argv[4] ?? 3);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 10);
const WALDUMP = process.env.BENCH_WALDUMP ?? '/usr/lib/postgresql/15/bin/pg_waldump';
const NODES = Number(process.env.BENCH_NODES ?? 10_000);
const RECORDED = 100_000;
const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const distUrl = process.env.BENCH_COMPUTE_DIST
  ? pathToFileURL(process.env.BENCH_COMPUTE_DIST).href
  : new URL('../packages/better-compute/dist/index.js', import.meta.url).href;

const dbName = `bench_${Math.random().toString(36).slice(2, 10)}`;
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;
const url = dbUrl.toString();

const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`create database ${dbName}`);
// BENCH_LOG_MIN_MS=<ms>: PostgreSQL logs this database's statements slower than that (to its server log).
if (process.env.BENCH_LOG_MIN_MS)
  await admin.query(
    `alter database ${dbName} set log_min_duration_statement = ${Number(process.env.BENCH_LOG_MIN_MS)}`,
  );
// BENCH_AUTO_EXPLAIN=<ms>: PostgreSQL logs the plan, with timings and buffers, of this database's
// statements slower than that (to its server log), through auto_explain loaded per session.
if (process.env.BENCH_AUTO_EXPLAIN) {
  const settings = {
    session_preload_libraries: 'auto_explain',
    'auto_explain.log_min_duration': Number(process.env.BENCH_AUTO_EXPLAIN),
    'auto_explain.log_analyze': 'on',
    'auto_explain.log_buffers': 'on',
    'auto_explain.log_nested_statements': 'on',
  };
  for (const [name, value] of Object.entries(settings))
    await admin.query(`alter database ${dbName} set ${name} = '${value}'`);
}
console.log(
  `database ${dbName}; ${NODES} nodes; clients ${clientCounts.join(' and ')}; ${rounds} rounds of ${seconds} s slices`,
);

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const fmt = (n) => n.toFixed(2);

let server;
let baseline;
let direct;
const baseName = `${dbName}_base`;
function ignoreTerminated(error) {
  if (!/terminating connection/.test(String(error?.message))) throw error;
}
// The database a server is measured on: migrated by that server's own build, the dev accounts, a
// site and a GPU pool offered to the member's tenant, and NODES nodes: one joins through the real
// flow (pre-approved token, join, first heartbeat), the others are copies of its rows.
async function setUp(buildUrl, databaseUrl) {
  const opened = await openDatabase({ url: databaseUrl });
  const { betterCompute } = await import(buildUrl);
  const compute = await betterCompute({ database: opened, rateLimit: false }, { log: () => {} });
  await compute.migrate();
  const accounts = await compute.embeddedIam.bootstrapDev();
  const rootKey = accounts.rootAdmin.apiKey;
  const memberKey = accounts.acmeMember.apiKey;
  const inProcess = async (method, body, token) => {
    const response = await compute.handler(
      new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      }),
    );
    const answer = await response.json();
    if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
    return answer.data;
  };
  const site = await inProcess('sites.create', { name: 'bench-site', region: 'bench' }, rootKey);
  const pool = await inProcess('pools.create', { siteId: site.id, name: 'bench-gpu', class: 'gpu' }, rootKey);
  await inProcess('pools.offer', { poolId: pool.id, offerTenantId: 'acme' }, rootKey);
  // One node joins through the real flow (pre-approved token, join, first heartbeat); the others
  // are copies of its rows (nodes, gpu_groups, gpus, node_inventories) with their own ids, names
  // and NVLink domains: what 9,999 more joins would write, in one statement per table.
  const { token } = await inProcess('joinTokens.create', { poolId: pool.id, preApproved: true }, rootKey);
  const gpus = Array.from({ length: 8 }, (_, index) => ({
    index,
    model: 'H100',
    product: 'H100-SXM5-80GB',
    vramGiB: 80,
    nvlinkDomain: 'nvl-00000',
  }));
  const joined = await inProcess(
    'nodes.join',
    {
      joinToken: token,
      hostname: 'gpu-00000',
      inventory: { cpuCores: 112, memoryGiB: 2048, gpus },
      labels: { zone: 'zone-0' },
    },
    '',
  );
  await inProcess('nodes.heartbeat', { nodeCredential: joined.nodeCredential }, '');
  const direct = new pg.Client({ connectionString: databaseUrl });
  await direct.connect();
  const cloneMs = await cloneNodes(direct, joined.nodeId, NODES - 1);
  const fleet = (
    await direct.query(
      `select count(*)::int as nodes, sum(free_gpus)::int as free from compute.nodes where pool_id = $1 and state = 'ready'`,
      [pool.id],
    )
  ).rows[0];
  console.log(
    `fleet: ${fleet.nodes} ready nodes, ${fleet.free} free GPUs (copied in ${(cloneMs / 1000).toFixed(1)} s)`,
  );

  await compute.close();
  await opened.close().catch(() => {});
  await direct.end();
  return { pool, memberKey };
}

try {
  // ------------------------------------------------------------------ setup (in process)
  const { pool, memberKey } = await setUp(distUrl, url);
  direct = new pg.Pool({ connectionString: url, max: clients, pipeline: true });
  // BENCH_BASELINE_DIST=<another build's index.js>: that build's server runs too, on a copy of the
  // database made here (the same fleet, the same API key), measured in the same alternation, so
  // every figure has its baseline in the same run.
  const baselineDist = process.env.BENCH_BASELINE_DIST;
  let baselineUrl;
  let baselineFleet = { pool, memberKey };
  if (baselineDist) {
    const copy = new URL(url);
    copy.pathname = `/${baseName}`;
    baselineUrl = copy.toString();
  }
  if (baselineDist && process.env.BENCH_BASELINE_OWN_SCHEMA) {
    // BENCH_BASELINE_OWN_SCHEMA=1: the baseline's database is set up by the baseline's own build
    // (its migrations, its schema) rather than copied: two builds whose schemas differ, an older
    // commit against this one, alternate in one run.
    await admin.query(`create database ${baseName}`);
    baselineFleet = await setUp(pathToFileURL(baselineDist).href, baselineUrl);
  } else if (baselineDist) {
    await direct.end();
    process.on('uncaughtException', ignoreTerminated);
    await admin.query(
      'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
      [dbName],
    );
    await admin.query(`create database ${baseName} template ${dbName}`);
    // BENCH_BASELINE_SQL: run on the copy before its server starts (the same build with a trigger
    // dropped, say), so one change to the database is measured against the database without it.
    if (process.env.BENCH_BASELINE_SQL) {
      const tweak = new pg.Client({ connectionString: baselineUrl });
      await tweak.connect();
      await tweak.query(process.env.BENCH_BASELINE_SQL);
      await tweak.end();
    }
    direct = new pg.Pool({ connectionString: url, max: clients, pipeline: true });
  }
  const reserveBody = (gpus, poolId = pool.id) => ({
    poolId,
    gpus,
    durationSeconds: 600,
    idempotencyKey: newId('request').slice(4),
  });

  // ------------------------------------------------------------------ the server, and its statements
  server = await startChild(
    fileURLToPath(new URL('lib/compute-server.mjs', import.meta.url)),
    [],
    {
      BENCH_DATABASE_URL: url,
      ...(process.env.BENCH_COMPUTE_DIST ? { BENCH_COMPUTE_DIST: process.env.BENCH_COMPUTE_DIST } : {}),
    },
    { ipc: true },
  );
  baseline = baselineDist
    ? await startChild(fileURLToPath(new URL('lib/compute-server.mjs', import.meta.url)), [], {
        BENCH_DATABASE_URL: baselineUrl,
        BENCH_COMPUTE_DIST: baselineDist,
      })
    : null;
  // One keep-alive connection per client; `post` answers the data or throws the error it carries.
  const connections = Array.from({ length: clients }, () => connect(server.url));
  const baselineConnections = baseline ? Array.from({ length: clients }, () => connect(baseline.url)) : [];
  const post = async (method, body, token, client = connections[0]) => {
    const answer = JSON.parse(
      (
        await client.post(
          `/api/compute/${method.replaceAll('.', '/')}`,
          JSON.stringify(body),
          `authorization: Bearer ${token}\r\n`,
        )
      ).body,
    );
    if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
    return answer.data;
  };
  const fromServer = () => new Promise((resolve) => server.child.once('message', resolve));
  /** What the server sent to PostgreSQL while `call` ran. */
  const capture = async (call) => {
    const started = fromServer();
    server.child.send({ capture: 'start' });
    await started;
    const result = await call();
    const stopped = fromServer();
    server.child.send({ capture: 'stop' });
    return { result, ...(await stopped) };
  };
  for (let i = 0; i < 8; i++) {
    const r = await post('reservations.create', reserveBody(1 + i), memberKey);
    await post('reservations.release', { reservationId: r.id }, memberKey);
  }
  // One reserve and its release per GPU count the server side asks for (1 to 8), so pair i of the
  // replay sends what pair i of the server sent.
  const captures = [];
  let poolSize;
  for (let gpus = 1; gpus <= 8; gpus++) {
    const reserve = await capture(() => post('reservations.create', reserveBody(gpus), memberKey));
    if (reserve.result.state !== 'active') throw new Error(`captured reserve is ${reserve.result.state}`);
    const release = await capture(() =>
      post('reservations.release', { reservationId: reserve.result.id }, memberKey),
    );
    captures.push({ reserve: reserve.captured, release: release.captured, at: Date.now() });
    poolSize = reserve.poolSize ?? release.poolSize ?? poolSize;
  }
  const shown = captures[3];
  const reserveShape = shapeOf(shown.reserve);
  const releaseShape = shapeOf(shown.release);
  console.log(
    `server's pool: ${poolSize} connections; a reserve: ${reserveShape.statements} statements in ${reserveShape.trips} round trips ` +
      `on ${reserveShape.connections} connection(s); a release: ${releaseShape.statements} in ${releaseShape.trips} on ${releaseShape.connections}`,
  );
  for (const [label, calls] of [
    ['reserve', shown.reserve],
    ['release', shown.release],
  ])
    for (const c of calls)
      console.log(
        `  ${label} ${c.write === null ? 'alone ' : `write ${String(c.write).padStart(5)}`} ${c.name ? 'prepared' : 'simple  '} ` +
          `${c.text.replace(/\s+/g, ' ').trim().slice(0, 90)}`,
      );

  // ------------------------------------------------------------------ the three sides
  const types = {
    getTypeParser(oid, format) {
      if (oid === 20) return (value) => Number(value);
      if (oid === 1700) return (value) => value;
      return pg.types.getTypeParser(oid, format);
    },
  };
  // Connections stay open between slices (no idle timeout), so their statements stay prepared.
  const replayPool = new pg.Pool({
    connectionString: url,
    max: poolSize ?? 10,
    idleTimeoutMillis: 0,
    pipeline: true,
    types,
  });
  replayPool.on('error', () => {});
  const httpSide = (label, pid, database, clientsOf, fleetOf) => ({
    label,
    pid,
    database,
    async pair(c, i) {
      const t = performance.now();
      const body = reserveBody(1 + (i % 8), fleetOf.pool.id);
      const created = await post('reservations.create', body, fleetOf.memberKey, clientsOf[c]);
      const t1 = performance.now();
      await post('reservations.release', { reservationId: created.id }, fleetOf.memberKey, clientsOf[c]);
      return [t1 - t, performance.now() - t1];
    },
  });
  const serverSide = httpSide('server (HTTP)', server.pid, dbName, connections, { pool, memberKey });
  const baselineSide = baseline
    ? httpSide('baseline server (HTTP)', baseline.pid, baseName, baselineConnections, baselineFleet)
    : null;
  const replaySide = {
    label: 'replay floor',
    async pair(_c, i) {
      const captured = captures[i % 8];
      const rewrite = freshValues(Date.now() - captured.at, [...captured.reserve, ...captured.release]);
      const t = performance.now();
      const failed = await replayCall(replayPool, captured.reserve, rewrite);
      const t1 = performance.now();
      const failedRelease = await replayCall(replayPool, captured.release, rewrite);
      if (failed + failedRelease > 0) throw replayCall.firstError ?? new Error('a replayed statement failed');
      return [t1 - t, performance.now() - t1];
    },
  };
  const gaugeSide = await hostGauge(direct, shown);

  async function run(side, concurrency, durationSeconds, maxPairs = Infinity) {
    const reserve = [];
    const release = [];
    let errors = 0;
    let firstError;
    const deadline = performance.now() + durationSeconds * 1000;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, c) => {
        let i = c;
        while (performance.now() < deadline && reserve.length < maxPairs) {
          try {
            const [a, b] = await side.pair(c, i++);
            reserve.push(a);
            release.push(b);
          } catch (error) {
            errors++;
            firstError ??= error;
          }
        }
      }),
    );
    if (firstError) console.log(`  ${side.label}: first error: ${firstError.message}`);
    return { seconds: (performance.now() - started) / 1000, count: release.length, reserve, release, errors };
  }

  // WAL: the bench database's records alone when pg_waldump can read the cluster's pg_wal.
  const oids = new Map(
    (
      await direct.query('select datname, oid::int from pg_database where datname = any($1)', [
        [dbName, baseName],
      ])
    ).rows.map((r) => [r.datname, r.oid]),
  );
  const dataDir = (await direct.query('show data_directory').catch(() => ({ rows: [{}] }))).rows[0]
    .data_directory;
  const walDir =
    dataDir && existsSync(WALDUMP) && existsSync(`${dataDir}/pg_wal`) ? `${dataDir}/pg_wal` : null;
  const lsn = async (which) =>
    (await direct.query(`select pg_current_wal_${which}_lsn()::text as lsn`)).rows[0].lsn;
  const backends = async (database) =>
    new Set(
      (await direct.query('select pid from pg_stat_activity where datname = $1', [database])).rows.map(
        (r) => r.pid,
      ),
    );

  // BENCH_WAL_DETAIL=1: where each side's WAL went, by record type and relation, at the end.
  const walDetail = process.env.BENCH_WAL_DETAIL
    ? Object.fromEntries(
        [serverSide, baselineSide, replaySide, gaugeSide].filter(Boolean).map((s) => [s.label, new Map()]),
      )
    : null;
  // BENCH_WAITS=1: what the side's PostgreSQL backends wait on, sampled every 20 ms during each
  // slice (pg_stat_activity; "CPU" is an active backend waiting on nothing). Lock:object is the
  // NOTIFY queue's lock that notifying commits take in turn; Lock:transactionid a row lock held
  // by another transaction; IO:WALSync and LWLock:WALWrite the commit's flush.
  const waitSamples = process.env.BENCH_WAITS
    ? Object.fromEntries(
        [serverSide, baselineSide, replaySide, gaugeSide].filter(Boolean).map((s) => [s.label, new Map()]),
      )
    : null;
  const sampler = waitSamples ? new pg.Client({ connectionString: url }) : null;
  if (sampler) await sampler.connect();
  function sampleWaits(database, into) {
    let stop = false;
    const done = (async () => {
      while (!stop) {
        const { rows } = await sampler.query(
          `select coalesce(wait_event_type || ':' || wait_event, 'CPU') as wait, count(*)::int as n
           from pg_stat_activity where datname = $1 and state = 'active' and pid <> pg_backend_pid()
           group by 1`,
          [database],
        );
        into.set('(samples)', (into.get('(samples)') ?? 0) + 1);
        for (const row of rows) into.set(row.wait, (into.get(row.wait) ?? 0) + row.n);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    return async () => {
      stop = true;
      await done;
    };
  }
  async function slice(side, concurrency, durationSeconds) {
    const database = side.database ?? dbName;
    const pids = await backends(database);
    const cpu0 = await cpuSnapshot(side.pid ?? server.pid, pids);
    const wal0 = await lsn('insert');
    const stopSampling = waitSamples ? sampleWaits(database, waitSamples[side.label]) : null;
    const result = await run(side, concurrency, durationSeconds);
    await stopSampling?.();
    // Backends opened during the slice (a pool that closed idle connections while the other sides
    // ran opens them again) count whole; those still open from before count their difference.
    const cpu1 = await cpuSnapshot(side.pid ?? server.pid, new Set([...pids, ...(await backends(database))]));
    const wal1 = await lsn('flush');
    const cluster = (
      await direct.query('select pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 as bytes', [wal1, wal0])
    ).rows[0].bytes;
    const wal = walDir
      ? await walOf(WALDUMP, walDir, oids.get(database), wal0, wal1, walDetail?.[side.label])
      : null;
    return { ...result, cpu0, cpu1, wal, cluster };
  }

  const total = () => ({
    seconds: 0,
    count: 0,
    reserve: [],
    release: [],
    errors: 0,
    cpu: { server: 0, postgres: 0, self: 0 },
    wal: null,
    cluster: 0,
  });
  const add = (into, s) => {
    into.seconds += s.seconds;
    into.count += s.count;
    for (const latency of s.reserve) into.reserve.push(latency);
    for (const latency of s.release) into.release.push(latency);
    into.errors += s.errors;
    into.cpu.server += s.cpu1.server.seconds - s.cpu0.server.seconds;
    for (const [pid, cpu] of s.cpu1.postgres)
      into.cpu.postgres += cpu.seconds - (s.cpu0.postgres.get(pid)?.seconds ?? 0);
    into.cpu.self += s.cpu1.self.seconds - s.cpu0.self.seconds;
    into.wal = addWal(into.wal, s.wal);
    into.cluster += s.cluster;
  };

  // ------------------------------------------------------------------ warm-up, then alternating slices
  for (const side of [serverSide, baselineSide, replaySide].filter(Boolean)) {
    const warm = await run(side, clients, WARMUP_S, 3000);
    console.log(`warm-up ${side.label}: ${warm.count} pairs in ${warm.seconds.toFixed(1)} s`);
  }
  const results = {};
  for (const concurrency of clientCounts) {
    const at = {
      server: total(),
      ...(baselineSide ? { baseline: total() } : {}),
      replay: total(),
      gauge: total(),
    };
    const sides = { server: serverSide, baseline: baselineSide, replay: replaySide };
    for (let round = 0; round < rounds; round++) {
      // Who goes first alternates, so a drift of the host's speed falls on both.
      const order = ['server', ...(baselineSide ? ['baseline'] : []), 'replay'];
      if (round % 2 === 1) order.reverse();
      for (const name of order) add(at[name], await slice(sides[name], concurrency, seconds));
      add(at.gauge, await slice(gaugeSide, concurrency, Math.max(1, seconds / 2)));
    }
    results[concurrency] = at;
    report(concurrency, at);
  }

  function perPair(side) {
    const n = side.count || NaN;
    const ms = (s) => ((s * 1000) / n).toFixed(2);
    const rate = side.count / side.seconds;
    const w = side.wal;
    return {
      rate,
      cpu: `CPU per pair: server ${side === undefined ? '-' : ms(side.cpu.server)} ms, PostgreSQL ${ms(side.cpu.postgres)} ms, load generator ${ms(side.cpu.self)} ms`,
      postgresMs: (side.cpu.postgres * 1000) / n,
      walKiB: w ? w.bytes / n / 1024 : side.cluster / n / 1024,
      writes: w
        ? `WAL ${(w.bytes / n / 1024).toFixed(2)} KiB (${(w.withoutImages / n / 1024).toFixed(2)} without full-page images; ${(w.records / n).toFixed(1)} records); rows written ${((w.inserts + w.updates + w.hot + w.deletes) / n).toFixed(1)} ` +
          `(${(w.inserts / n).toFixed(1)} inserted, ${(w.updates / n).toFixed(1)} updated, ${(w.hot / n).toFixed(1)} HOT, ${(w.deletes / n).toFixed(1)} deleted), ` +
          `index entries ${(w.indexEntries / n).toFixed(1)}, row locks ${(w.locks / n).toFixed(1)}, full-page images ${(w.fpi / n).toFixed(2)}`
        : `WAL ${(side.cluster / n / 1024).toFixed(2)} KiB (the whole cluster's: pg_waldump unavailable)`,
    };
  }
  function report(concurrency, at) {
    console.log('');
    console.log(
      `at ${concurrency} clients: ${rounds} rounds of server${at.baseline ? ', baseline' : ''} and replay slices of ${seconds} s, alternating, and a gauge slice`,
    );
    for (const [name, side] of Object.entries(at)) {
      const p = perPair(side);
      const label = {
        server: 'server (HTTP)',
        baseline: 'baseline server (HTTP)',
        replay: 'replay floor',
        gauge: 'host gauge (not a floor)',
      }[name];
      console.log(
        `  ${label.padEnd(25)} ${p.rate.toFixed(0).padStart(6)} pairs/s  ` +
          `reserve p50 ${fmt(
            pct(
              side.reserve.sort((a, b) => a - b),
              50,
            ),
          )} ms p99 ${fmt(pct(side.reserve, 99))} ms  ` +
          `release p50 ${fmt(
            pct(
              side.release.sort((a, b) => a - b),
              50,
            ),
          )} ms p99 ${fmt(pct(side.release, 99))} ms  errors ${side.errors}`,
      );
      console.log(
        `    ${name === 'server' || name === 'baseline' ? p.cpu : p.cpu.replace(/server [\d.]+ ms, /, '')}`,
      );
      console.log(`    ${p.writes}`);
    }
    const s = perPair(at.server);
    const r = perPair(at.replay);
    const walRatio = s.walKiB / r.walKiB;
    console.log(
      `  server / replay: throughput ${(s.rate / r.rate).toFixed(2)}, PostgreSQL CPU per pair ${(s.postgresMs / r.postgresMs).toFixed(2)}, ` +
        `WAL per pair ${walRatio.toFixed(2)} (${Math.abs(walRatio - 1) <= 0.1 ? 'the replay matches within 10 %' : 'the replay does NOT match within 10 %'})`,
    );
    if (at.baseline) {
      const b = perPair(at.baseline);
      console.log(
        `  server / baseline: throughput ${(s.rate / b.rate).toFixed(2)}, PostgreSQL CPU per pair ${(s.postgresMs / b.postgresMs).toFixed(2)}, ` +
          `server CPU per pair ${(at.server.cpu.server / at.server.count / (at.baseline.cpu.server / at.baseline.count)).toFixed(2)}, WAL per pair ${(s.walKiB / b.walKiB).toFixed(2)}`,
      );
    }
  }

  // How PostgreSQL planned the replayed statements on one of the replay's connections: a statement
  // planned at every run (custom plans) costs its planning each time.
  {
    const client = await replayPool.connect();
    try {
      const texts = new Map(
        captures.flatMap((c) => [...c.reserve, ...c.release]).map((c) => [c.name, c.text]),
      );
      const { rows } = await client.query(
        'select name, generic_plans::int, custom_plans::int from pg_prepared_statements where name = any($1)',
        [[...texts.keys()].filter(Boolean)],
      );
      console.log('');
      console.log('plans of the replayed statements on one connection (generic, custom):');
      for (const row of rows)
        console.log(
          `  ${String(row.generic_plans).padStart(6)} ${String(row.custom_plans).padStart(6)}  ${texts
            .get(row.name)
            .replace(/\s+/g, ' ')
            .trim()
            .slice(0, 90)}`,
        );
    } finally {
      client.release();
    }
  }
  // ------------------------------------------------------------------ capacity with 100,000 on record
  // Each side's database gets the same history (ended reservations with their bindings), then each
  // server answers capacity.get in turn: the server, the baseline, the server again, the baseline.
  async function recordHistory(databaseUrl, poolId) {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const anyNode = (
        await client.query(`select id from compute.nodes where pool_id = $1 limit 1`, [poolId])
      ).rows[0].id;
      await client.query(
        `with made as (
           insert into compute.reservations (id, tenant_id, pool_id, state, gpus, duration_seconds, nvlink, tolerations,
             created_at, activated_at, ends_at, ended_at, end_reason)
           select 'reservation_' || lpad(upper(to_hex(g)), 26, '0'), 'acme', $1, 'ended', 1, 600, false, '{}',
             now() - interval '2 days', now() - interval '2 days', now() - interval '2 days' + interval '600 seconds',
             now() - interval '1 day', 'released'
           from generate_series(1, $2::int) g
           returning id, activated_at, ended_at)
         insert into compute.gpu_bindings (reservation_id, tenant_id, pool_id, node_id, group_no, gpu_indices, gpu_count,
           model, product, nvlink_domain, bound_at, released_at)
         select id, 'acme', $1, $3, 0, '{0}', 1, 'H100', 'H100-SXM5-80GB', 'nvl-00000', activated_at, ended_at from made`,
        [poolId, RECORDED, anyNode],
      );
      await client.query('analyze');
      return (await client.query(`select count(*)::int as n from compute.reservations`)).rows[0].n;
    } finally {
      await client.end();
    }
  }
  const recorded = await recordHistory(url, pool.id);
  if (baseline) await recordHistory(baselineUrl, baselineFleet.pool.id);
  async function capacitySlice(clientsOf, fleetOf, into, ms) {
    const deadline = performance.now() + ms;
    await Promise.all(
      Array.from({ length: Math.min(4, clients) }, async (_, c) => {
        while (performance.now() < deadline) {
          const t = performance.now();
          await post('capacity.get', { poolId: fleetOf.pool.id }, fleetOf.memberKey, clientsOf[c]);
          into.push(performance.now() - t);
        }
      }),
    );
  }
  const capacity = [];
  const baselineCapacity = [];
  for (let round = 0; round < 2; round++) {
    await capacitySlice(connections, { pool, memberKey }, capacity, 2500);
    if (baseline) await capacitySlice(baselineConnections, baselineFleet, baselineCapacity, 2500);
  }
  capacity.sort((a, b) => a - b);
  baselineCapacity.sort((a, b) => a - b);
  console.log(
    `capacity.get (${recorded} reservations on record, ${Math.min(4, clients)} clients)  p50 ${fmt(pct(capacity, 50))} ms p99 ${fmt(pct(capacity, 99))} ms` +
      (baseline
        ? `; baseline p50 ${fmt(pct(baselineCapacity, 50))} ms p99 ${fmt(pct(baselineCapacity, 99))} ms`
        : ''),
  );
  // The servers' memory now, and at its peak (VmRSS, VmHWM), with the fleet and history above.
  const memoryOf = async (pid) => {
    const { readFile } = await import('node:fs/promises');
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const kib = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
  };
  const memory = await memoryOf(server.pid);
  const baselineMemory = baseline ? await memoryOf(baseline.pid) : null;
  for (const client of [...connections, ...baselineConnections]) client.close();

  if (walDetail) {
    const names = new Map(
      (
        await direct.query(
          `select pg_relation_filenode(c.oid)::text as node, n.nspname || '.' || c.relname as name
           from pg_class c join pg_namespace n on n.oid = c.relnamespace where pg_relation_filenode(c.oid) is not null`,
        )
      ).rows.map((r) => [r.node, r.name]),
    );
    const pairs = Object.values(results).reduce((sum, at) => sum + at.server.count, 0);
    console.log('');
    console.log(`WAL of the server's pairs by record type and relation (per pair):`);
    const rows = [...walDetail[serverSide.label]].sort((a, b) => b[1].bytes - a[1].bytes);
    for (const [key, { records, bytes }] of rows.slice(0, 30)) {
      const [rmgr, desc, node] = key.split(' ');
      console.log(
        `  ${(bytes / pairs).toFixed(0).padStart(6)} B ${(records / pairs).toFixed(2).padStart(6)} records  ${rmgr} ${desc} ${names.get(node) ?? node}`,
      );
    }
  }
  if (waitSamples) {
    await sampler.end();
    console.log('');
    console.log('what active backends waited on, per sample (every 20 ms, all client counts):');
    for (const [label, counts] of Object.entries(waitSamples)) {
      const samples = counts.get('(samples)') || NaN;
      const shown = [...counts]
        .filter(([wait]) => wait !== '(samples)')
        .sort((a, b) => b[1] - a[1])
        .map(([wait, n]) => `${wait} ${(n / samples).toFixed(2)}`)
        .join(', ');
      console.log(`  ${label.padEnd(25)} ${shown}`);
    }
  }
  const goal = (ok) => (ok ? 'met' : 'NOT met');
  console.log('');
  for (const concurrency of clientCounts) {
    const s = perPair(results[concurrency].server);
    const r = perPair(results[concurrency].replay);
    console.log(
      `at ${concurrency} clients: server ${s.rate.toFixed(0)} pairs/s, ${(s.rate / r.rate).toFixed(2)} of the replay floor (goal >= 0.75: ${goal(s.rate / r.rate >= 0.75)}); ` +
        `PostgreSQL ${s.postgresMs.toFixed(2)} ms CPU and ${s.walKiB.toFixed(2)} KiB WAL per pair (goal <= 5 KiB: ${goal(s.walKiB <= 5)})`,
    );
    if (results[concurrency].baseline) {
      const b = perPair(results[concurrency].baseline);
      console.log(
        `  baseline: ${b.rate.toFixed(0)} pairs/s, PostgreSQL ${b.postgresMs.toFixed(2)} ms CPU and ${b.walKiB.toFixed(2)} KiB WAL per pair; ` +
          `PostgreSQL CPU per pair ${((s.postgresMs / b.postgresMs - 1) * 100).toFixed(0)} % against it` +
          (concurrency === 16 ? ` (goal <= -30 %: ${goal(s.postgresMs / b.postgresMs <= 0.7)})` : ''),
      );
    }
  }
  const low = results[Math.min(...clientCounts)].server;
  console.log(
    `reserve p99 at ${Math.min(...clientCounts)} clients ${fmt(pct(low.reserve, 99))} ms (goal < 20 at 4 clients: ${goal(pct(low.reserve, 99) < 20)})`,
  );
  if (results[Math.min(...clientCounts)].baseline)
    console.log(`  baseline: ${fmt(pct(results[Math.min(...clientCounts)].baseline.reserve, 99))} ms`);
  console.log(`capacity p50 ${fmt(pct(capacity, 50))} ms (goal < 5: ${goal(pct(capacity, 50) < 5)})`);
  if (baselineCapacity.length) console.log(`  baseline: ${fmt(pct(baselineCapacity, 50))} ms`);
  console.log(
    `serve's memory with ${NODES} nodes: ${memory.rss.toFixed(0)} MB, peak ${memory.peak.toFixed(0)} MB (goal < 150 MB: ${goal(memory.peak < 150)})`,
  );
  if (baselineMemory)
    console.log(`  baseline: ${baselineMemory.rss.toFixed(0)} MB, peak ${baselineMemory.peak.toFixed(0)} MB`);
  await replayPool.end();
} finally {
  await server?.stop();
  await baseline?.stop();
  await direct?.end().catch(() => {});
  // A connection the in-process setup left open (IAM's change feed) is ended by the drop below.
  process.on('uncaughtException', ignoreTerminated);
  if (process.env.BENCH_KEEP_DB) console.log(`kept database ${dbName}`);
  else
    for (const name of [dbName, baseName])
      await admin
        .query(`drop database if exists ${name} with (force)`)
        .catch((e) => console.error(e.message));
  await admin.end();
}
process.exit(0);

/**
 * The host gauge: the old floor, kept only to show how fast the host is at the time (it is no
 * floor for the server: its statements write a tenth of what a reservation writes). Transactions
 * with as many reading and writing statements as the captured reserve and release, on two small
 * tables, prepared and pipelined as the server's are.
 */
async function hostGauge(pool, captured) {
  const shape = (calls) => {
    const counted = { read: 0, write: 0 };
    for (const c of calls) {
      const lower = c.text
        .trim()
        .toLowerCase()
        .replace(/^\/\*.*?\*\/\s*/, '');
      if (/^(begin|commit|rollback|savepoint|release)\b/.test(lower)) continue;
      counted[
        /\b(insert|update|delete)\b/.test(lower.replace(/for (no key )?update/g, '')) ? 'write' : 'read'
      ]++;
    }
    return counted;
  };
  const statements = { create: shape(captured.reserve), release: shape(captured.release) };
  await pool.query(`create table public.floor (id int primary key, n bigint not null default 0, note text)`);
  await pool.query(
    `create table public.floor_log (id bigint generated always as identity primary key, k int, at timestamptz)`,
  );
  await pool.query(
    `insert into public.floor (id, note) select g, 'row ' || g from generate_series(1, 10000) g`,
  );
  await pool.query('analyze public.floor');
  let seq = 0;
  const write = (i) =>
    i % 2 === 0
      ? {
          name: 'floor_update',
          text: 'update public.floor set n = n + 1 where id = $1',
          values: [1 + ((seq++ * 7919) % 10000)],
        }
      : {
          name: 'floor_insert',
          text: 'insert into public.floor_log (k, at) values ($1, now())',
          values: [seq++],
        };
  const together = (client, queries) => {
    client.connection.stream.cork();
    try {
      return Promise.all(queries.map((q) => client.query(q)));
    } finally {
      client.connection.stream.uncork();
    }
  };
  async function transaction(client, shape) {
    const queries = [];
    for (let i = 0; i < shape.read; i++)
      queries.push({
        name: 'floor_read',
        text: 'select n, note from public.floor where id = $1',
        values: [1 + ((seq++ * 7919) % 10000)],
      });
    for (let i = 0; i < shape.write; i++) queries.push(write(i));
    if (queries.length === 1) return together(client, ['begin', queries[0], 'commit']);
    await together(client, ['begin', queries[0]]);
    for (const query of queries.slice(1, -1)) await client.query(query);
    await together(client, [queries.at(-1), 'commit']);
  }
  return {
    label: 'host gauge',
    async pair() {
      const client = await pool.connect();
      try {
        const t = performance.now();
        await transaction(client, statements.create);
        const t1 = performance.now();
        await transaction(client, statements.release);
        return [t1 - t, performance.now() - t1];
      } finally {
        client.release();
      }
    },
  };
}
