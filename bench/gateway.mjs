#!/usr/bin/env node
// bench/gateway: the commands per second one gateway delivers to N simulated node sessions. One
// `serve` (roles api, gateway) on PostgreSQL in this process; N nodes join through a pre-approved
// token; N WebSocket sessions say hello and answer every command at once (after checking its
// signature, as bcd does); then C commands per node are queued in one insert and the clock runs
// until every one is succeeded. The simulated sessions share this process's CPU with the gateway,
// so the figure is a floor. It prints; it asserts nothing.
//
// Run: npm run build && node bench/gateway.mjs [sessions=1000] [commandsPerSession=10]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres).
import { createPublicKey, verify } from 'node:crypto';
import pg from 'pg';
import WebSocket from 'ws';
import { newId } from '../packages/core/dist/index.js';
import { betterCompute, generatedCommandSigner, serve } from '../packages/better-compute/dist/index.js';

const SESSIONS = Number(process.argv[2] ?? 1000);
const PER_SESSION = Number(process.argv[3] ?? 10);
const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `bench_gw_${Math.random().toString(36).slice(2, 10)}`;
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`create database ${dbName}`);

const canonical = (value) => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
      .join(',')}}`;
  return JSON.stringify(value);
};

const signer = generatedCommandSigner();
const publicKey = createPublicKey(signer.publicKeyPem);
const compute = await betterCompute(
  { database: dbUrl.toString(), trustedOrigins: [], rateLimit: false },
  { log: () => {} },
);
await compute.migrate();
const dev = await compute.embeddedIam.bootstrapDev();
const key = dev.rootAdmin.apiKey;
const controller = new AbortController();
let url = '';
const serving = serve({
  compute,
  port: 0,
  roles: ['api', 'gateway'],
  signal: controller.signal,
  log: () => {},
  commandSigner: signer,
  onListening: (u) => (url = u),
});
while (!url) await new Promise((r) => setTimeout(r, 20));

async function call(method, body, auth = true) {
  const response = await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(auth ? { tenantId: 'root', ...body } : body),
  });
  const answer = await response.json();
  if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
  return answer.data;
}

const site = await call('sites.create', { name: 'bench' });
const pool = await call('pools.create', { siteId: site.id, name: 'bench' });
const { token } = await call('joinTokens.create', { poolId: pool.id, uses: SESSIONS, preApproved: true });
const credentials = [];
let joinStarted = performance.now();
for (let i = 0; i < SESSIONS; i += 25) {
  const batch = await Promise.all(
    Array.from({ length: Math.min(25, SESSIONS - i) }, (_, j) =>
      call(
        'nodes.join',
        { joinToken: token, hostname: `sim-${i + j}`, inventory: { cpuCores: 8, memoryGiB: 32, gpus: [] } },
        false,
      ),
    ),
  );
  credentials.push(...batch.map((b) => ({ nodeId: b.nodeId, credential: b.nodeCredential })));
}
console.log(`joined ${SESSIONS} nodes in ${((performance.now() - joinStarted) / 1000).toFixed(1)} s`);

let answered = 0;
let refused = 0;
const sockets = [];
const connectStarted = performance.now();
let welcomed = 0;
await new Promise((resolveAll) => {
  for (const { nodeId, credential } of credentials) {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/api/compute/gateway/session`, {
      headers: { authorization: `Bearer ${credential}` },
    });
    sockets.push(ws);
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString());
      if (message.t === 'ready')
        ws.send(
          JSON.stringify({
            t: 'hello',
            version: '0.1.0',
            capabilities: ['pty'],
            inventory: { cpuCores: 8, memoryGiB: 32, gpus: [] },
          }),
        );
      else if (message.t === 'welcome' && ++welcomed === SESSIONS) resolveAll();
      else if (message.t === 'command') {
        const c = message.command;
        const good =
          c.nodeId === nodeId &&
          verify(null, Buffer.from(canonical(c)), publicKey, Buffer.from(message.signature, 'base64'));
        if (!good) refused++;
        ws.send(JSON.stringify({ t: 'command.started', id: c.id }));
        ws.send(
          JSON.stringify({
            t: 'command.result',
            id: c.id,
            state: good ? 'succeeded' : 'failed',
            exitCode: 0,
            stdout: '',
            stderr: '',
            result: null,
            error: null,
          }),
        );
        answered++;
      }
    });
  }
});
console.log(
  `${SESSIONS} sessions said hello in ${((performance.now() - connectStarted) / 1000).toFixed(1)} s`,
);

// Queue every command in one statement, as a controller fanning out would.
const db = new pg.Client({ connectionString: dbUrl.toString() });
await db.connect();
const total = SESSIONS * PER_SESSION;
const ids = [];
const nodes = [];
for (let round = 0; round < PER_SESSION; round++)
  for (const { nodeId } of credentials) {
    ids.push(newId('command'));
    nodes.push(nodeId);
  }
const started = performance.now();
await db.query(
  `insert into compute.commands (id, tenant_id, node_id, kind, payload, state, created_at, expires_at)
   select id, 'root', node, 'inventory.refresh', '{}', 'queued', now(), now() + interval '1 hour'
   from unnest($1::text[], $2::text[]) as t(id, node)`,
  [ids, nodes],
);
let done = 0;
while (done < total) {
  await new Promise((r) => setTimeout(r, 100));
  done = Number(
    (await db.query(`select count(*) from compute.commands where state = 'succeeded'`)).rows[0].count,
  );
}
const seconds = (performance.now() - started) / 1000;
console.log(
  `delivered and recorded ${total} commands to ${SESSIONS} sessions in ${seconds.toFixed(2)} s: ${Math.round(total / seconds)} commands/s (${answered} answered, ${refused} refused)`,
);

for (const ws of sockets) ws.close();
await db.end();
controller.abort();
await serving;
await admin.query(`drop database ${dbName} with (force)`);
await admin.end();
