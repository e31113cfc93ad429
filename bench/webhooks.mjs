#!/usr/bin/env node
// bench/webhooks: the time from a mutation's commit (sites.create answered) to its signed delivery
// reaching a loopback receiver, through the outbox, the fan-out and the delivery loop of one
// `sinks` replica (default settings: polls every 250 ms), beside a baseline in the same run: the
// same body POSTed straight to the same receiver. Also how long the replica takes to drain a burst.
// Run: node scripts/ensure.mjs && node bench/webhooks.mjs [events]   (PostgreSQL when it answers on
// 127.0.0.1:5432, else PGlite; BENCH_DATABASE_URL to choose)
import { createServer, request } from 'node:http';

const events = Number(process.argv[2] ?? 300);
const dist = new URL('../packages/better-compute/dist/index.js', import.meta.url).href;
const { betterCompute } = await import(dist);

let database = process.env.BENCH_DATABASE_URL;
let testDatabase;
if (!database) {
  const { createTestDatabase, isPostgresReachable } = await import('@better-compute/db/testing');
  testDatabase = await createTestDatabase((await isPostgresReachable()) ? 'postgres' : 'pglite', 10);
  database = testDatabase;
}
const compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
await compute.migrate();
const dev = await compute.embeddedIam.bootstrapDev();
const token = dev.acmeAdmin.apiKey;

const arrivals = new Map();
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const at = performance.now();
    try {
      const parsed = JSON.parse(body);
      if (parsed.type === 'site.created' && !arrivals.has(parsed.data.subject.id))
        arrivals.set(parsed.data.subject.id, at);
    } catch {}
    res.writeHead(204).end();
  });
});
await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const port = receiver.address().port;

async function api(method, body) {
  const response = await compute.handler(
    new Request(`http://localhost/api/compute/${method.replace('.', '/')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    }),
  );
  const answer = await response.json();
  if (response.status !== 200) throw new Error(`${method}: ${JSON.stringify(answer.error)}`);
  return answer.data;
}

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const line = (label, values) =>
  console.log(
    `${label.padEnd(34)} p50 ${percentile(values, 50).toFixed(1).padStart(7)} ms  p99 ${percentile(values, 99).toFixed(1).padStart(7)} ms  (n=${values.length})`,
  );

// Baseline: the same body, POSTed straight to the receiver.
const baseline = [];
for (let i = 0; i < events; i++) {
  const body = JSON.stringify({
    type: 'site.created',
    timestamp: new Date().toISOString(),
    data: { subject: { id: `b${i}` } },
  });
  const start = performance.now();
  await new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end(body);
  });
  baseline.push(performance.now() - start);
}

await api('webhooks.create', { url: `http://127.0.0.1:${port}/hook`, events: ['site.created'] });
const workers = compute.startWorkers(['sinks']);

// One at a time, spaced: the latency of a single event on an idle replica.
const committed = new Map();
for (let i = 0; i < Math.min(events, 100); i++) {
  const site = await api('sites.create', { name: `lat-${i}` });
  committed.set(site.id, performance.now());
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const deadline = Date.now() + 60_000;
while ([...committed.keys()].some((id) => !arrivals.has(id)) && Date.now() < deadline)
  await new Promise((resolve) => setTimeout(resolve, 10));
const latency = [...committed].map(([id, at]) => arrivals.get(id) - at);

// A burst: every event committed as fast as the handler takes them, then drained.
const burst = new Map();
const burstStart = performance.now();
for (let i = 0; i < events; i += 10) {
  const sites = await Promise.all(
    Array.from({ length: Math.min(10, events - i) }, (_, j) =>
      api('sites.create', { name: `burst-${i + j}` }),
    ),
  );
  for (const site of sites) burst.set(site.id, performance.now());
}
const committedAll = performance.now();
while ([...burst.keys()].some((id) => !arrivals.has(id)) && Date.now() < deadline + 60_000)
  await new Promise((resolve) => setTimeout(resolve, 10));
const drained = performance.now();
const burstLatency = [...burst].map(([id, at]) => arrivals.get(id) - at);

console.log(`database: ${compute.database.description}`);
line('baseline: POST straight to receiver', baseline);
line('commit -> delivery, one at a time', latency);
line(`commit -> delivery, burst of ${events}`, burstLatency);
console.log(
  `burst: ${events} events committed in ${(committedAll - burstStart).toFixed(0)} ms, all delivered after ${(drained - burstStart).toFixed(0)} ms (${((events / (drained - burstStart)) * 1000).toFixed(0)} deliveries/s)`,
);

await workers.stop();
receiver.close();
await compute.close();
await testDatabase?.close();
