#!/usr/bin/env node
// bench/watch: 1,000 concurrent watchers of the live event stream on one real server (a child
// process running `serve` with the api role on PostgreSQL), and the time from a mutation to each
// watcher's receipt of its event, p50 and p99, beside a baseline measured in the same run: a bare
// node:http server-sent events broadcaster (bench/lib/bare-sse-server.mjs) with as many watchers,
// fed the same events by a POST. The two sides alternate in slices after a warm-up.
// The mutation is sites.create (one event); the bare side's is POST /publish. Latency runs from the
// moment the mutation is sent (so it includes the commit, and the baseline's POST) to the moment a
// watcher's socket reads the event; the mutation's own answer time is printed beside it.
// Also: each server's RSS per watcher (after the watchers connected, against before), and its CPU
// per event (the server process only: PostgreSQL is shared with other work on this machine).
// Goal: p99 < 50 ms. It prints; it asserts nothing.
//
// Run: npm run build && node bench/watch.mjs [watchers=1000] [events per slice=25] [slices=4]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_GAP_MS (ms between
//      mutations, default 40), BENCH_COMPUTE_DIST (the built better-compute index.js to run).
import net from 'node:net';
import { readFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { connect, cpuSnapshot, headerLines, startChild } from './lib/load.mjs';

const WATCHERS = Number(process.argv[2] ?? 1000);
const PER_SLICE = Number(process.argv[3] ?? 25);
const SLICES = Number(process.argv[4] ?? 4);
const GAP_MS = Number(process.env.BENCH_GAP_MS ?? 40);
const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const distUrl = process.env.BENCH_COMPUTE_DIST
  ? pathToFileURL(process.env.BENCH_COMPUTE_DIST).href
  : new URL('../packages/better-compute/dist/index.js', import.meta.url).href;
const { betterCompute } = await import(distUrl);

const dbName = `bench_${Math.random().toString(36).slice(2, 10)}`;
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;
const url = dbUrl.toString();
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`create database ${dbName}`);
console.log(
  `database ${dbName}; ${WATCHERS} watchers per server; ${SLICES} slices of ${PER_SLICE} events each`,
);

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const rssKiB = async (pid) =>
  Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]);

/** Sent mutations by sequence number: when, and the receipts' latencies. */
const sent = new Map();

/** One watcher: a raw socket reading the stream, counting each `"name":"w<seq>"` it sees once. */
function watcher(origin, path, headers) {
  const target = new URL(origin);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: target.hostname, port: Number(target.port) });
    socket.setNoDelay(true);
    let last = 0;
    let tail = '';
    let open = false;
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('data', (text) => {
      const now = performance.now();
      if (!open) {
        if (!text.startsWith('HTTP/1.1 200'))
          return reject(new Error(`the stream answered ${text.slice(0, 200)}`));
        open = true;
        resolve(socket);
      }
      const scanned = tail + text;
      for (const match of scanned.matchAll(/"name":"w(\d+)"/g)) {
        const seq = Number(match[1]);
        if (seq <= last) continue;
        last = seq;
        const entry = sent.get(seq);
        if (entry) entry.latencies.push(now - entry.at);
      }
      tail = scanned.slice(-40);
    });
    socket.write(
      `GET ${path} HTTP/1.1\r\nhost: ${target.host}\r\naccept: text/event-stream\r\n${headerLines(headers)}\r\n`,
    );
  });
}

async function connectWatchers(origin, path, headers) {
  const sockets = [];
  for (let i = 0; i < WATCHERS; i += 50)
    sockets.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(50, WATCHERS - i) }, () => watcher(origin, path, headers)),
      )),
    );
  return sockets;
}

let seq = 0;
/** Sends `count` mutations one after another, `GAP_MS` apart; waits for every receipt. */
async function slice(side, count) {
  const answers = [];
  const mine = [];
  for (let i = 0; i < count; i++) {
    const n = ++seq;
    const entry = { at: performance.now(), latencies: [] };
    sent.set(n, entry);
    mine.push(entry);
    const answer = await side.mutate(n);
    if (answer.status >= 300)
      throw new Error(`${side.name} mutation answered ${answer.status} ${answer.body}`);
    answers.push(performance.now() - entry.at);
    await sleep(GAP_MS);
  }
  const deadline = performance.now() + 10_000;
  while (mine.some((e) => e.latencies.length < WATCHERS) && performance.now() < deadline) await sleep(10);
  return { entries: mine, answers };
}

let compute;
let bare;
const sockets = [];
try {
  // Setup in process: the schema and an API key of the root administrator.
  const setup = await betterCompute({ database: url, rateLimit: false }, { log: () => {} });
  await setup.migrate();
  const key = (await setup.embeddedIam.bootstrapDev()).rootAdmin.apiKey;
  await setup.close();
  const auth = { authorization: `Bearer ${key}` };

  const serverScript = fileURLToPath(new URL('lib/compute-server.mjs', import.meta.url));
  compute = await startChild(serverScript, [], { BENCH_DATABASE_URL: url });
  bare = await startChild(fileURLToPath(new URL('lib/bare-sse-server.mjs', import.meta.url)));
  const computeClient = connect(`${compute.url}/api/compute/sites/create`);
  const bareClient = connect(`${bare.url}/publish`);
  const sides = [
    {
      name: 'better-compute',
      pid: compute.pid,
      mutate: (n) =>
        computeClient.post(
          '/api/compute/sites/create',
          JSON.stringify({ tenantId: 'root', name: `w${n}` }),
          headerLines(auth),
        ),
    },
    {
      name: 'bare node SSE',
      pid: bare.pid,
      mutate: (n) => bareClient.post('/publish', JSON.stringify({ data: { name: `w${n}` } })),
    },
  ];
  for (const side of sides) {
    side.rssBefore = await rssKiB(side.pid);
    const started = performance.now();
    sockets.push(
      ...(await connectWatchers(
        side === sides[0] ? compute.url : bare.url,
        side === sides[0] ? '/api/compute/watch?types=site.*' : '/watch',
        side === sides[0] ? auth : {},
      )),
    );
    side.connectMs = performance.now() - started;
    side.latencies = [];
    side.answers = [];
    side.cpu = 0;
    side.events = 0;
    side.missing = 0;
  }
  // Warm-up: a slice each, not counted.
  for (const side of sides) await slice(side, Math.max(5, Math.floor(PER_SLICE / 2)));
  for (const side of sides) side.rssAfter = await rssKiB(side.pid);
  for (let s = 0; s < SLICES; s++) {
    for (const side of s % 2 === 0 ? sides : [...sides].reverse()) {
      const before = await cpuSnapshot(side.pid);
      const { entries, answers } = await slice(side, PER_SLICE);
      const after = await cpuSnapshot(side.pid);
      if (before && after) side.cpu += after.server.seconds - before.server.seconds;
      side.events += entries.length;
      side.answers.push(...answers);
      for (const entry of entries) {
        side.latencies.push(...entry.latencies);
        side.missing += WATCHERS - entry.latencies.length;
      }
    }
  }
  const rows = sides.map((side) => {
    const sorted = side.latencies.sort((a, b) => a - b);
    const answers = side.answers.sort((a, b) => a - b);
    return {
      side,
      p50: pct(sorted, 50),
      p99: pct(sorted, 99),
      max: sorted.at(-1),
      answerP50: pct(answers, 50),
      rssPerWatcher: ((side.rssAfter - side.rssBefore) / WATCHERS).toFixed(1),
      cpuPerEvent: ((side.cpu * 1000) / side.events).toFixed(2),
    };
  });
  console.log('');
  for (const row of rows) {
    console.log(
      `${row.side.name.padEnd(15)} receipts ${row.side.latencies.length} (missing ${row.side.missing}); ` +
        `mutation→receipt p50 ${row.p50.toFixed(1)} ms, p99 ${row.p99.toFixed(1)} ms, max ${row.max.toFixed(1)} ms; ` +
        `mutation answer p50 ${row.answerP50.toFixed(1)} ms`,
    );
    console.log(
      `${''.padEnd(15)} RSS ${(row.side.rssBefore / 1024).toFixed(0)} → ${(row.side.rssAfter / 1024).toFixed(0)} MiB: ${row.rssPerWatcher} KiB per watcher; ` +
        `server CPU ${row.cpuPerEvent} ms per event (fanned out to ${WATCHERS}); ${WATCHERS} watchers connected in ${(row.side.connectMs / 1000).toFixed(1)} s`,
    );
  }
  console.log(
    `ratio better-compute / bare: p50 ${(rows[0].p50 / rows[1].p50).toFixed(2)}x, p99 ${(rows[0].p99 / rows[1].p99).toFixed(2)}x; ` +
      `goal p99 < 50 ms: ${rows[0].p99 < 50 ? 'met' : 'not met'}`,
  );
  computeClient.close();
  bareClient.close();
} finally {
  for (const socket of sockets) socket.destroy();
  await compute?.stop();
  await bare?.stop();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
}
