#!/usr/bin/env node
// bench/console-pages: how long the console's pages take in a real Chromium, from navigation to the
// first render (DOMContentLoaded) and to their data on screen (the first row of the live list), on
// the real server.mjs (Next.js build, Better IAM, Better Compute) over PostgreSQL with simulated
// machines, 10,000 nodes and 100,000 reservations. Lists page on the server (50 rows a page), so the
// data's size beyond a page costs the server's query, not the browser. Goal: first render within 1 s.
// It prints; it asserts nothing. Up to 500 reservations are made through the API (held and queued,
// as people make them); the rest are copies of one released reservation and its GPU bindings,
// written straight to the database and spread back over the past, one a minute, so the usage and
// capacity charts have history to read.
//
// Run: node scripts/ensure.mjs && node bench/console-pages.mjs [machines=64] [reservations=100000] [visits=5]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_NODES (10000 nodes in
// all: the simulated machines and copies of one of them written to the database).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { chromium } from 'playwright-core';
import { cloneNodes } from './lib/clone-nodes.mjs';
import { newId } from '../packages/core/dist/index.js';

/**
 * Adds `count` copies of the ended reservation `reservationId` and its GPU bindings, each with its
 * own id and its times moved back one minute per copy; resolves with the time it took in ms.
 */
async function cloneEndedReservations(client, reservationId, count) {
  const ids = Array.from({ length: count }, () => newId('reservation'));
  const started = performance.now();
  const columns = async (table, skip) =>
    (
      await client.query(
        `select column_name from information_schema.columns
         where table_schema = 'compute' and table_name = $1 order by ordinal_position`,
        [table],
      )
    ).rows
      .map((row) => row.column_name)
      .filter((name) => !skip.includes(name));
  const shifted = (name) =>
    /_at$/.test(name) ? `r.${name} - (b.ord * interval '1 minute') as ${name}` : `r.${name}`;
  await client.query('begin');
  await client.query(
    `create temporary table bench_reservations on commit drop as
       select id, ord from unnest($1::text[]) with ordinality as u(id, ord)`,
    [ids],
  );
  const reservationColumns = await columns('reservations', ['id', 'seq']);
  await client.query(
    `insert into compute.reservations (id, ${reservationColumns.join(', ')})
     select b.id, ${reservationColumns.map(shifted).join(', ')}
     from bench_reservations b cross join compute.reservations r where r.id = $1 order by b.ord`,
    [reservationId],
  );
  const bindingColumns = await columns('gpu_bindings', ['id', 'reservation_id']);
  await client.query(
    `insert into compute.gpu_bindings (reservation_id, ${bindingColumns.join(', ')})
     select b.id, ${bindingColumns.map(shifted).join(', ')}
     from bench_reservations b cross join compute.gpu_bindings r where r.reservation_id = $1 order by b.ord`,
    [reservationId],
  );
  await client.query('commit');
  return performance.now() - started;
}

const MACHINES = Number(process.argv[2] ?? 64);
const RESERVATIONS = Number(process.argv[3] ?? 100_000);
/** Reservations made through the API; the rest are copied in the database. */
const API_RESERVATIONS = Math.min(RESERVATIONS, 500);
/** Nodes in all: the simulated machines and copies of one of them. */
const NODES = Number(process.env.BENCH_NODES ?? 10_000);
const VISITS = Number(process.argv[4] ?? 5);
const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const appDir = new URL('../apps/console/', import.meta.url).pathname;

const port = await new Promise((resolve) => {
  const probe = createServer();
  probe.listen(0, '127.0.0.1', () => {
    const { port } = probe.address();
    probe.close(() => resolve(port));
  });
});
const origin = `http://127.0.0.1:${port}`;
const dbName = `bench_console_${Math.random().toString(36).slice(2, 10)}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`create database ${dbName}`);
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;

const dataDir = mkdtempSync(join(tmpdir(), 'console-bench-'));
const child = spawn(
  process.execPath,
  ['server.mjs', '--dev', '--built', '--port', String(port), '--sim', String(MACHINES)],
  {
    cwd: appDir,
    env: {
      PATH: process.env.PATH ?? '',
      NEXT_TELEMETRY_DISABLED: '1',
      BETTER_COMPUTE_DATABASE_URL: dbUrl.toString(),
      CONSOLE_DATA_DIR: dataDir,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  },
);
let output = '';
child.stdout.on('data', (chunk) => (output += chunk));
child.stderr.on('data', (chunk) => (output += chunk));
let browser;
try {
  const deadline = Date.now() + 180_000;
  while (!/simulated machine\(s\) in pool/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`server.mjs did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const password = /shown this once: (\S+)/.exec(output)[1];
  const call = async (path, token, input) => {
    const response = await fetch(`${origin}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(input),
    });
    const body = await response.json();
    if (!body.data) throw new Error(`${path}: ${body.error?.code} ${body.error?.message}`);
    return body.data;
  };
  const { token } = await call('/api/iam/sessions/signIn', '', {
    tenantId: 'root',
    email: 'admin@console.local',
    password,
  });
  const poolId = (await call('/api/compute/pools/list', token, {})).items[0].id;
  // The rest of the fleet: copies of a simulated machine, written straight to the database.
  const fleetClient = new pg.Client({ connectionString: dbUrl.toString() });
  await fleetClient.connect();
  const template = (
    await fleetClient.query('select id from compute.nodes where pool_id = $1 limit 1', [poolId])
  ).rows[0].id;
  const cloneMs = NODES > MACHINES ? await cloneNodes(fleetClient, template, NODES - MACHINES) : 0;
  await fleetClient.end();
  console.log(
    `fleet: ${Math.max(NODES, MACHINES)} nodes (${MACHINES} simulated, the rest copied in ${Math.round(cloneMs)} ms)`,
  );
  const seeding = Date.now();
  const made = [];
  for (let count = 0; count < API_RESERVATIONS; count += 20)
    made.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(20, API_RESERVATIONS - count) }, () =>
          call('/api/compute/reservations/create', token, { poolId, gpus: 1, durationSeconds: 3600 }),
        ),
      )),
    );
  let copyMs = 0;
  if (RESERVATIONS > API_RESERVATIONS) {
    // One held for a moment and released: the ended reservation (with its binding) that is copied.
    const first = made.find((reservation) => reservation.state === 'active') ?? made[0];
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await call('/api/compute/reservations/release', token, { reservationId: first.id });
    const copier = new pg.Client({ connectionString: dbUrl.toString() });
    await copier.connect();
    copyMs = await cloneEndedReservations(copier, first.id, RESERVATIONS - API_RESERVATIONS);
    await copier.end();
  }
  console.log(
    `seeded ${RESERVATIONS} reservations (${API_RESERVATIONS} through the API, the rest copied in ${Math.round(copyMs)} ms) in ${Date.now() - seeding} ms`,
  );

  // The API's own time for the first page of each list, to tell the server's share from the browser's.
  for (const [method, input] of [
    ['reservations/list', { limit: 50 }],
    ['nodes/list', { limit: 50 }],
    ['capacity/get', {}],
  ]) {
    const times = [];
    for (let i = 0; i < VISITS; i++) {
      const started = performance.now();
      await call(`/api/compute/${method}`, token, input);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    console.log(
      `API ${method.padEnd(18)} p50 ${Math.round(times[Math.floor(times.length / 2)])} ms, max ${Math.round(times.at(-1))} ms`,
    );
  }

  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${origin}/login`);
  await page.getByLabel('Email').fill('admin@console.local');
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${origin}/reservations`);

  // Each page and what its data on screen is: the first row, the chart, or (for a page whose list is
  // empty here) the page's heading.
  const pages = [
    ['/reservations', 'tr[data-reservation]'],
    ['/nodes', 'tr[data-node]'],
    ['/capacity', 'td[data-free]'],
    ['/capacity', '[data-capacity-chart] g[data-window]', '/capacity (chart)'],
    ['/usage', 'figure[data-usage-chart]'],
    ['/joining', 'select[name="tokenPool"] option'],
    ['/sites', 'main h1'],
    ['/sandboxes', 'main h1'],
    ['/volumes', 'main h1'],
    ['/events', 'main h1'],
    ['/fleet', 'main h1'],
    ['/rollouts', 'main h1'],
    ['/batches', 'main h1'],
    ['/approvals', 'main h1'],
  ];
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.log(
    `page             first render p50 / max     data on screen p50 / max   (${VISITS} visits each, full loads)`,
  );
  for (const [path, selector, label = path] of pages) {
    const rendered = [];
    const data = [];
    for (let visit = 0; visit < VISITS; visit++) {
      const started = performance.now();
      await page.goto(`${origin}${path}`, { waitUntil: 'domcontentloaded' });
      rendered.push(performance.now() - started);
      await page.locator(selector).first().waitFor({ state: 'attached', timeout: 30_000 });
      data.push(performance.now() - started);
    }
    const cell = (values) =>
      `${Math.round(median(values))} / ${Math.round(Math.max(...values))} ms`.padEnd(27);
    console.log(`${label.padEnd(17)}${cell(rendered)}${cell(data)}`);
  }
} finally {
  await browser?.close();
  child.kill('SIGTERM');
  await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  rmSync(dataDir, { recursive: true, force: true });
}
