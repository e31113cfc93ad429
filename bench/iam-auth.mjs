#!/usr/bin/env node
// bench/iam-auth: authenticating an API key and authorizing one check on a warm cache, beside the
// foundation's system.version path through the whole handler, both in process in the same run.
// It also counts the queries the warm path sends (goal: none) and prints the per-call cost (goal:
// well under a millisecond).  Run: npm run build && node bench/iam-auth.mjs [iterations]
import { openDatabase } from '../packages/db/dist/index.js';
import { betterCompute } from '../packages/better-compute/dist/index.js';

const iterations = Number(process.argv[2] ?? 20000);
let queries = 0;
const counter = {
  transformQuery: (args) => (queries++, args.node),
  transformResult: async (args) => args.result,
};
const opened = await openDatabase({ url: 'pglite:memory' });
const database = { ...opened, db: opened.db.withPlugin(counter) };
const compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
await compute.migrate();
const accounts = await compute.embeddedIam.bootstrapDev();
const key = accounts.acmeMember.apiKey;
const bridge = compute.iam;
const check = { action: 'compute:events:read', resource: { type: 'tenant', id: 'acme', tenantId: 'acme' } };

async function time(label, fn) {
  for (let i = 0; i < 2000; i++) await fn(); // warm-up (and the cache)
  const before = queries;
  const started = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) await fn();
  const nsPerCall = Number(process.hrtime.bigint() - started) / iterations;
  console.log(
    `${label.padEnd(44)} ${(nsPerCall / 1000).toFixed(2).padStart(8)} µs/call  queries ${queries - before}`,
  );
  return nsPerCall;
}

const version = () =>
  compute
    .handler(new Request('http://localhost/api/compute/system/version', { method: 'POST', body: '{}' }))
    .then((r) => r.text());
const authPath = async () => {
  const identity = await bridge.authenticate(key);
  const [decision] = await bridge.authorize(identity, [check]);
  if (!decision.allowed) throw new Error(decision.reason);
};

const baseline = await time('handler system.version (no credential)', version);
const auth = await time('authenticate API key + authorize 1 check', authPath);
console.log(
  `auth path / system.version path = ${(auth / baseline).toFixed(2)}; auth path ${(auth / 1e6).toFixed(4)} ms (goal well under 1 ms, 0 queries)`,
);
await compute.close();
await opened.close();
