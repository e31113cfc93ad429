#!/usr/bin/env node
// bench/rollout: how long one wave of real daemons takes from the rollout's start to every node
// healthy on the new version, beside the same daemons' plain restart in the same run (stop every
// `bcd run --supervise`, start them again, until every session is up). One `serve` (roles api,
// controllers, gateway) on PostgreSQL in this process; N real bcd processes, each installed in a
// directory of its own with its own state; release 0.2.0 is a copy of the built bundle with its
// version bumped, signed with a release key made here, registered and uploaded. The daemons share
// this machine's cores with the server, so both figures are what this machine does, side by side.
// After a warm-up pair that is not counted, the two sides alternate for --rounds rounds; each prints
// its wall time, the control plane's CPU (this process: api, controllers, gateway, and the bench's
// own API polling; its /proc sampling left out) and the daemons' (read from /proc every 250 ms), then the medians and their ratio. It checks that each rollout completed with
// every node healthy on its version, and asserts no timing. The goal: the rollout machinery adds
// under 20 % to a plain restart.
//
// Run: npm run build && node bench/rollout.mjs [--nodes 20] [--rounds 3]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
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

const { values } = parseArgs({
  options: { nodes: { type: 'string', default: '20' }, rounds: { type: 'string', default: '3' } },
});
const NODES = Number(values.nodes);
if (!Number.isInteger(NODES) || NODES < 1 || NODES > 200) throw new Error('--nodes takes 1 to 200');
const ROUNDS = Number(values.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 8) throw new Error('--rounds takes 1 to 8');
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

// The releases, one a round: the built bundle with its version bumped (0.2.0, 0.3.0, …), signed,
// registered, stored; round r rolls every node from the version before to its own.
const original = readFileSync(join(daemonDir, 'dist', 'bcd.cjs'), 'utf8');
const versionOf = (round) => `0.${round + 2}.0`;
// One more than the rounds: the first is the warm-up's.
for (let round = 0; round <= ROUNDS; round++) {
  const version = versionOf(round);
  const next = Buffer.from(original.replace('DAEMON_VERSION = "0.1.0"', `DAEMON_VERSION = "${version}"`));
  if (next.equals(Buffer.from(original)))
    throw new Error('the built bundle does not say DAEMON_VERSION = "0.1.0"');
  const manifest = {
    version,
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
      version,
      platform: manifest.artifacts[0].platform,
      offset,
      data: next.subarray(offset, offset + 32_768).toString('base64'),
    });
}

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

/**
 * CPU time so far of the daemons (every process whose command line names this run's directory),
 * in ms, read from /proc; a process that exits keeps what it used at the last reading, so an
 * operation's figure is the sum over its processes of their last reading less their first.
 */
const TICK_MS = 10; // USER_HZ is 100 on Linux
const daemonCpu = new Map();
const readDaemonCpu = () => {
  if (process.platform !== 'linux') return;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(scratch)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = (Number(fields[11]) + Number(fields[12])) * TICK_MS; // utime, stime
      const known = daemonCpu.get(pid);
      daemonCpu.set(pid, { first: known?.first ?? ms, last: ms });
    } catch {
      // gone between the listing and the read
    }
  }
};
let lastRead = 0;
/** CPU this process spent reading /proc (a synchronous call, so the delta is its own): left out of the control plane's. */
let samplerMs = 0;
const sampleDaemonCpu = () => {
  const before = process.cpuUsage();
  readDaemonCpu();
  const used = process.cpuUsage(before);
  samplerMs += (used.user + used.system) / 1000;
};
const waitFor = async (what, probe, timeoutMs = 300_000) => {
  const started = Date.now();
  while (!(await probe())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    if (Date.now() - lastRead >= 250) {
      lastRead = Date.now();
      sampleDaemonCpu();
    }
    await new Promise((r) => setTimeout(r, 50));
  }
};
/** Runs one operation: its wall time, the control plane's CPU (this process) and the daemons'. */
const measure = async (operation) => {
  await new Promise((r) => setTimeout(r, 1000));
  daemonCpu.clear();
  readDaemonCpu();
  samplerMs = 0;
  const cpu = process.cpuUsage();
  const started = Date.now();
  const detail = await operation(started);
  const wallMs = Date.now() - started;
  const used = process.cpuUsage(cpu);
  readDaemonCpu();
  let daemonsMs = 0;
  for (const { first, last } of daemonCpu.values()) daemonsMs += last - first;
  return {
    wallMs,
    serverCpuMs: Math.max(0, Math.round((used.user + used.system) / 1000 - samplerMs)),
    daemonsCpuMs: daemonsMs,
    detail,
  };
};

startAll();
await waitFor('every daemon to connect', () => connectedSince(0));

// The plain restart: stop every daemon, start them again, until every session is up.
const restart = () =>
  measure(async (started) => {
    await stopAll();
    startAll();
    await waitFor('every daemon to reconnect', () => connectedSince(started));
    return '';
  });
// The rollout: one wave of every node, from create to every node healthy on the round's version.
const rolloutTo = (version) =>
  measure(async () => {
    const rollout = await call('rollouts.create', {
      version,
      poolId: pool.id,
      waves: ['100%'],
      healthTimeoutSeconds: 300,
    });
    let finished;
    await waitFor('the rollout to end', async () => {
      finished = await call('rollouts.get', { rolloutId: rollout.id });
      return finished.state !== 'running';
    });
    const updated = finished.waves[0].nodes.filter((n) => n.state === 'succeeded').length;
    const healthy = nodes.every((node) => {
      const path = join(node.stateDir, 'update.json');
      if (!existsSync(path)) return false;
      const record = JSON.parse(readFileSync(path, 'utf8'));
      return record.phase === 'healthy' && record.to === version;
    });
    if (finished.state !== 'completed' || updated !== NODES || !healthy)
      throw new Error(`the rollout to ${version} ended ${finished.state}, ${updated}/${NODES} updated`);
    return `${version}, ${updated}/${NODES} updated, update records healthy`;
  });

// A warm-up pair, not counted: the first rollout also pays for the server's and the daemons' first
// download path (JIT, the gateway's piece cache, the page cache). Then the two sides alternate, so a
// host that slows down over the run weighs on both.
await restart();
await rolloutTo(versionOf(0));
const restarts = [];
const rollouts = [];
for (let round = 1; round <= ROUNDS; round++) {
  restarts.push(await restart());
  rollouts.push(await rolloutTo(versionOf(round)));
}
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const line = (m) =>
  `${String(m.wallMs).padStart(6)} ms   control plane CPU ${String(m.serverCpuMs).padStart(5)} ms   daemons CPU ${String(m.daemonsCpuMs).padStart(6)} ms${m.detail ? `   (${m.detail})` : ''}`;

console.log(`bench/rollout: ${NODES} real daemons, one wave, ${ROUNDS} round(s), each side in turn`);
for (let round = 0; round < ROUNDS; round++) {
  console.log(
    `  round ${round + 1} plain restart (stop, start, every session up):   ${line(restarts[round])}`,
  );
  console.log(
    `  round ${round + 1} rollout (create to every node healthy):          ${line(rollouts[round])}`,
  );
}
const [restartMs, rolloutMs] = [median(restarts.map((m) => m.wallMs)), median(rollouts.map((m) => m.wallMs))];
console.log(
  `  median: plain restart ${restartMs} ms, rollout ${rolloutMs} ms; control plane CPU per operation ${median(restarts.map((m) => m.serverCpuMs))} / ${median(rollouts.map((m) => m.serverCpuMs))} ms, daemons' CPU ${median(restarts.map((m) => m.daemonsCpuMs))} / ${median(rollouts.map((m) => m.daemonsCpuMs))} ms`,
);
// Each round's pair ran back to back, so its ratio is the least bent by a host whose speed moves.
const pairRatio = median(rollouts.map((m, i) => m.wallMs / restarts[i].wallMs));
console.log(`  median of the rounds' own ratios: ${pairRatio.toFixed(2)}x`);
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
