#!/usr/bin/env node
// bench/rollout: how long one wave of real daemons takes from the rollout's start to every node
// healthy on the new version, beside the same daemons' plain restart in the same run (stop every
// `bcd run --supervise`, start them again, until every session is up). One `serve` (roles api,
// controllers, gateway) on PostgreSQL in this process; N real bcd processes, each installed in a
// directory of its own with its own state; release 0.2.0 is a copy of the built bundle with its
// version bumped, signed with a release key made here, registered and uploaded. The daemons share
// this machine's cores with the server, so both figures are what this machine does, side by side.
// It prints; it asserts nothing. The goal: the rollout machinery adds under 20 % to a plain restart.
//
// Run: npm run build && node bench/rollout.mjs [--nodes 20]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { generateReleaseKey, readReleaseKey, signManifest } from '../packages/core/dist/release/index.js';
import { betterCompute, generatedCommandSigner, serve } from '../packages/better-compute/dist/index.js';

const { values } = parseArgs({ options: { nodes: { type: 'string', default: '20' } } });
const NODES = Number(values.nodes);
if (!Number.isInteger(NODES) || NODES < 1 || NODES > 200) throw new Error('--nodes takes 1 to 200');
const root = new URL('..', import.meta.url).pathname;
const daemonDir = join(root, 'packages', 'daemon');
const scratch = mkdtempSync(join(tmpdir(), 'bench-rollout-'));

const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `bench_rollout_${Math.random().toString(36).slice(2, 10)}`;
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`create database ${dbName}`);

const keyFiles = generateReleaseKey();
const key = readReleaseKey(keyFiles.privatePem, 'the bench release key');
const compute = await betterCompute(
  { database: dbUrl.toString(), trustedOrigins: [], rateLimit: false, release: { pins: [key.keyId] } },
  { log: () => {} },
);
await compute.migrate();
const dev = await compute.embeddedIam.bootstrapDev();
const apiKey = dev.rootAdmin.apiKey;
const controller = new AbortController();
let url = '';
const serving = serve({
  compute,
  port: 0,
  roles: ['api', 'controllers', 'gateway'],
  signal: controller.signal,
  log: () => {},
  commandSigner: generatedCommandSigner(),
  onListening: (u) => (url = u),
});
while (!url) await new Promise((r) => setTimeout(r, 20));

async function call(method, body) {
  const response = await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ tenantId: 'root', ...body }),
  });
  const answer = await response.json();
  if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
  return answer.data;
}

// The release: the built bundle with its version bumped, signed, registered, stored.
const original = readFileSync(join(daemonDir, 'dist', 'bcd.cjs'), 'utf8');
const next = Buffer.from(original.replace('DAEMON_VERSION = "0.1.0"', 'DAEMON_VERSION = "0.2.0"'));
const manifest = {
  version: '0.2.0',
  artifacts: [
    {
      platform: `${process.platform}-${process.arch}`,
      size: next.length,
      sha256: createHash('sha256').update(next).digest('hex'),
    },
  ],
  minimumVersion: '0.1.0',
  notes: 'bench',
  createdAt: new Date().toISOString(),
};
await call('releases.register', { manifest, signatures: [signManifest(manifest, key)] });
for (let offset = 0; offset < next.length; offset += 32_768)
  await call('releases.upload', {
    version: '0.2.0',
    platform: manifest.artifacts[0].platform,
    offset,
    data: next.subarray(offset, offset + 32_768).toString('base64'),
  });

// N machines: each installed as the package installs it, joined, run under its supervisor.
const site = await call('sites.create', { name: 'bench' });
const pool = await call('pools.create', { siteId: site.id, name: 'bench' });
const { token } = await call('joinTokens.create', { poolId: pool.id, uses: NODES, preApproved: true });
writeFileSync(join(scratch, 'token'), `${token}\n`, { mode: 0o600 });
writeFileSync(join(scratch, 'pins.json'), JSON.stringify({ pins: [key.keyId], threshold: 1 }));
const run = (args, stdio = 'ignore') =>
  spawn(process.execPath, args, {
    stdio: ['ignore', stdio, stdio],
    env: { ...process.env, NODE_PATH: join(root, 'node_modules') },
  });
const nodes = [];
for (let i = 0; i < NODES; i++) {
  const dir = join(scratch, `node-${i}`);
  for (const sub of ['bin', 'dist', 'scripts']) mkdirSync(join(dir, sub), { recursive: true });
  copyFileSync(join(daemonDir, 'bin', 'bcd.cjs'), join(dir, 'bin', 'bcd.cjs'));
  copyFileSync(join(daemonDir, 'dist', 'bcd.cjs'), join(dir, 'dist', 'bcd.cjs'));
  copyFileSync(join(daemonDir, 'dist', 'supervisor.cjs'), join(dir, 'dist', 'supervisor.cjs'));
  copyFileSync(join(daemonDir, 'scripts', 'health-check.sh'), join(dir, 'scripts', 'health-check.sh'));
  const stateDir = join(dir, 'state');
  const joining = run([
    join(dir, 'bin', 'bcd.cjs'),
    ...['join', '--url', url, '--token-file', join(scratch, 'token'), '--state-dir', stateDir],
    ...['--release-pins', join(scratch, 'pins.json'), '--hostname', `bench-${i}`],
  ]);
  const code = await new Promise((resolve) => joining.on('exit', resolve));
  if (code !== 0) throw new Error(`bcd join exited with ${code}`);
  nodes.push({ dir, stateDir, launcher: join(dir, 'bin', 'bcd.cjs'), process: null });
}
const startAll = () => {
  for (const node of nodes)
    node.process = run([
      node.launcher,
      ...['run', '--supervise', '--state-dir', node.stateDir, '--scripts-dir', join(node.dir, 'scripts')],
      ...['--ssh-dir', join(node.dir, 'ssh')],
    ]);
};
const stopAll = async () => {
  await Promise.all(
    nodes.map(
      (node) =>
        new Promise((resolve) => {
          if (!node.process || node.process.exitCode !== null) return resolve();
          node.process.on('exit', resolve);
          node.process.kill('SIGTERM');
        }),
    ),
  );
};
const connectedSince = (since, version) => {
  const status = (node) => {
    try {
      return JSON.parse(readFileSync(join(node.stateDir, 'status.json'), 'utf8'));
    } catch {
      return null;
    }
  };
  return nodes.every((node) => {
    const s = status(node);
    return s?.connected === true && Date.parse(s.since) >= since;
  });
};
const waitFor = async (what, probe, timeoutMs = 300_000) => {
  const started = Date.now();
  while (!(await probe())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

startAll();
await waitFor('every daemon to connect', () => connectedSince(0));

// The plain restart: stop every daemon, start them again, until every session is up.
await new Promise((r) => setTimeout(r, 1000));
const restartStarted = Date.now();
await stopAll();
startAll();
await waitFor('every daemon to reconnect', () => connectedSince(restartStarted));
const restartMs = Date.now() - restartStarted;

// The rollout: one wave of every node, from create to every node healthy on 0.2.0.
await new Promise((r) => setTimeout(r, 1000));
const rolloutStarted = Date.now();
const rollout = await call('rollouts.create', {
  version: '0.2.0',
  poolId: pool.id,
  waves: ['100%'],
  healthTimeoutSeconds: 300,
});
let finished;
await waitFor('the rollout to end', async () => {
  finished = await call('rollouts.get', { rolloutId: rollout.id });
  return finished.state !== 'running';
});
const rolloutMs = Date.now() - rolloutStarted;
const updated = finished.waves[0].nodes.filter((n) => n.state === 'succeeded').length;
const allHealthy = nodes.every((node) => {
  const path = join(node.stateDir, 'update.json');
  return existsSync(path) && JSON.parse(readFileSync(path, 'utf8')).phase === 'healthy';
});

console.log(`bench/rollout: ${NODES} real daemons, one wave`);
console.log(`  plain restart (stop, start, every session up):          ${restartMs} ms`);
console.log(
  `  rollout (create to every node healthy on 0.2.0):         ${rolloutMs} ms  (${finished.state}, ${updated}/${NODES} updated, update records healthy: ${allHealthy})`,
);
console.log(
  `  ratio: ${(rolloutMs / restartMs).toFixed(2)}x the plain restart (the rollout machinery adds ${Math.round(((rolloutMs - restartMs) / restartMs) * 100)} %; goal under 20 %)`,
);

await stopAll();
controller.abort();
await serving;
await compute.close();
await admin.query(`drop database ${dbName} with (force)`);
await admin.end();
rmSync(scratch, { recursive: true, force: true });
