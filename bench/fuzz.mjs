#!/usr/bin/env node
// bench/fuzz: sends hostile requests (bench/lib/fuzz-inputs.mjs: every method of compute's and IAM's
// tables, as no credential, a member, a tenant administrator and a platform administrator) to a
// running server over HTTP and counts the answers by status. Goal: 0 answers of 5xx.
// Run: npm run build && node bench/fuzz.mjs [requests=100000] [seed]
// BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/postgres runs it on PostgreSQL, in a fresh database
// dropped afterwards; PGlite in memory otherwise.
import fc from 'fast-check';
import { z } from 'zod';
import { ID_PREFIXES, methodKey, methodPath } from '@better-compute/core';
import { methodList } from '@better-compute/core/methods';
import { iamMethods } from 'better-iam';
import { fileURLToPath } from 'node:url';
import { hostileBodies, hostileInputs } from './lib/fuzz-inputs.mjs';
import { connect, headerLines, startChild } from './lib/load.mjs';

const total = Number(process.argv[2] ?? 100_000);
const seed = Number(process.argv[3] ?? Date.now() % 2 ** 31);
const connections = 16;

const prefixOf = new Map(Object.entries(ID_PREFIXES).map(([kind, prefix]) => [`${kind}Id`, prefix]));
prefixOf.set('principalId', 'usr');
const schemaOf = (method) => {
  try {
    return z.toJSONSchema(method.input, { io: 'input', unrepresentable: 'any' });
  } catch {
    return {};
  }
};
const routes = [
  ...methodList.map((m) => ({
    key: methodKey(m),
    path: `/api/compute${methodPath(m)}`,
    schema: schemaOf(m),
  })),
  ...Object.values(iamMethods).map((m) => ({
    key: `iam ${methodKey(m)}`,
    path: `/api/iam${methodPath(m)}`,
    schema: schemaOf(m),
  })),
];

let dropDatabase = async () => {};
const childEnv = {};
if (process.env.BENCH_PG_URL) {
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: process.env.BENCH_PG_URL });
  await admin.connect();
  const name = `fuzz_${Math.random().toString(36).slice(2, 10)}`;
  await admin.query(`create database ${name}`);
  const url = new URL(process.env.BENCH_PG_URL);
  url.pathname = `/${name}`;
  childEnv.BENCH_DATABASE_URL = url.toString();
  dropDatabase = async () => {
    await admin.query(`drop database ${name} with (force)`);
    await admin.end();
  };
}
const server = await startChild(
  fileURLToPath(new URL('./lib/fuzz-server.mjs', import.meta.url)),
  [],
  childEnv,
);
const { url, keys } = JSON.parse(server.url);
const callers = [
  { name: 'anonymous', tenantId: 'acme', headers: '' },
  { name: 'member', tenantId: 'acme', headers: headerLines({ authorization: `Bearer ${keys.member}` }) },
  { name: 'tenant admin', tenantId: 'acme', headers: headerLines({ authorization: `Bearer ${keys.admin}` }) },
  {
    name: 'platform admin',
    tenantId: 'root',
    headers: headerLines({ authorization: `Bearer ${keys.root}` }),
  },
];
// One generator per route and caller, sampled 25 at a time, each batch with its own seed from the run's.
const batches = new Map();
let batchSeed = seed;
function nextBody(route, caller) {
  const id = `${route.key}|${caller.name}`;
  let batch = batches.get(id);
  if (!batch || batch.values.length === 0) {
    batch ??= {
      arbitrary: fc.oneof(
        {
          weight: 19,
          arbitrary: hostileInputs(route.schema, {
            tenantId: caller.tenantId,
            idPrefix: (field) => prefixOf.get(field),
          }).map((input) => JSON.stringify(input)),
        },
        { weight: 1, arbitrary: hostileBodies },
      ),
      values: [],
    };
    batch.values = fc.sample(batch.arbitrary, { seed: batchSeed++, numRuns: 25 });
    batches.set(id, batch);
  }
  return batch.values.pop();
}

const byStatus = new Map();
const fivexx = [];
let sent = 0;
const started = performance.now();
async function worker() {
  const connection = connect(url);
  try {
    while (sent < total) {
      const n = sent++;
      const route = routes[n % routes.length];
      const caller = callers[Math.floor(n / routes.length) % callers.length];
      const body = nextBody(route, caller);
      if (Buffer.byteLength(body) > 64 * 1024) continue;
      let answer;
      try {
        answer = await connection.post(route.path, body, caller.headers);
      } catch (error) {
        byStatus.set('connection error', (byStatus.get('connection error') ?? 0) + 1);
        continue;
      }
      byStatus.set(answer.status, (byStatus.get(answer.status) ?? 0) + 1);
      if (answer.status >= 500 && fivexx.length < 20)
        fivexx.push(
          `${route.key} as ${caller.name}: ${answer.status} ${body.slice(0, 160)} → ${answer.body.slice(0, 160)}`,
        );
    }
  } finally {
    connection.close();
  }
}
await Promise.all(Array.from({ length: connections }, worker));
const seconds = (performance.now() - started) / 1000;
await server.stop();
await dropDatabase();

const count5xx = [...byStatus]
  .filter(([status]) => typeof status === 'number' && status >= 500)
  .reduce((sum, [, n]) => sum + n, 0);
console.log(
  `seed ${seed}: ${sent} requests over ${routes.length} routes × ${callers.length} callers in ${seconds.toFixed(1)} s`,
);
console.log(
  `by status: ${[...byStatus]
    .sort()
    .map(([s, n]) => `${s} ${n}`)
    .join(', ')}`,
);
for (const line of fivexx) console.log(`  5xx: ${line}`);
console.log(`5xx answers: ${count5xx} (goal 0) ${count5xx === 0 ? 'met' : 'NOT met'}`);
process.exitCode = count5xx === 0 ? 0 : 1;
