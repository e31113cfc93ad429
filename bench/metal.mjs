#!/usr/bin/env node
// bench/metal: what the control plane adds to a bare-metal inspection, beside a bare network boot
// of the same deploy ramdisk in the same run. Two identical QEMU machines (TCG, -smp 2, -m 512),
// each with OpenIPMI's ipmi_sim as its BMC, each on a provisioning network of its own:
//   bare            a ProvisioningNetwork run by this process with a fixed ramdisk entry for the
//                   machine's MAC; one round is power off, boot device PXE and power on through
//                   the IPMI driver, the ramdisk's report arriving in the network's spool, power off.
//   control plane   `serve` on PostgreSQL in this process and a real `bcd` site agent running the
//                   provisioning network (--pxe-dir, --ramdisk-dir); one round is `metal.inspect`
//                   through the API until the machine is manageable again with its inventory (the
//                   same steps: off, PXE on, the report, off, each a command on the agent).
// After a warm-up round of each, the two sides alternate for --rounds rounds; each prints its wall
// time and this process's CPU (for the control plane side: the API, controllers and gateway), then
// the medians and their difference. The machines' own boot time is in both sides alike. Asserts no
// timing. The goal (issue 32): the control plane adds under 2 s.
//
// Run as root: node scripts/build.mjs && node scripts/host-tools.mjs guest && node bench/metal.mjs [--rounds 3]
// Env: BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import pg from 'pg';
import { betterCompute, generatedCommandSigner, serve } from '../packages/better-compute/dist/index.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' } } });
const ROUNDS = Number(values.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 10) throw new Error('--rounds takes 1 to 10');
if (process.getuid?.() !== 0) throw new Error('bench/metal runs as root: it makes taps, namespaces and VMs');
const root = new URL('..', import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), 'bench-metal-'));
// dnsmasq and the web server of the provisioning networks run as nobody and must reach their files.
chmodSync(scratch, 0o755);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const cpuMs = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};

// The lab's machine and the daemon's metal drivers and network, bundled from their TypeScript into
// the checkout (so the workspace's packages resolve from it).
const bundleDir = join(root, 'node_modules', '.cache', 'bench-metal');
mkdirSync(bundleDir, { recursive: true });
const bundle = join(bundleDir, 'lab.mjs');
writeFileSync(
  join(bundleDir, 'lab-entry.ts'),
  [
    `export { LabMachine } from '${root}packages/daemon/test/metal/lab-machine.ts';`,
    `export { createIpmiDriver, ProvisioningNetwork } from '${root}packages/daemon/src/metal/index.ts';`,
  ].join('\n'),
);
await build({
  entryPoints: [join(bundleDir, 'lab-entry.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  outfile: bundle,
  packages: 'external',
  logLevel: 'error',
});
const { LabMachine, createIpmiDriver, ProvisioningNetwork } = await import(bundle);

const built = spawnSync(join(root, 'scripts', 'build-deploy-ramdisk.sh'), [], { encoding: 'utf8' });
if (built.status !== 0) throw new Error(`build-deploy-ramdisk.sh failed:\n${built.stderr}`);
const ramdiskDir = built.stdout.trim().split('\n').pop();
const ramdisk = { kernel: join(ramdiskDir, 'vmlinuz'), initrd: join(ramdiskDir, 'initrd.gz') };

const BMC_USER = 'admin';
const BMC_PASSWORD = `bench-${randomBytes(6).toString('hex')}`;
const mac = () => `52:54:00:${randomBytes(3).toString('hex').match(/../g).join(':')}`;
const uuid = () => {
  const hex = randomBytes(16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
};
const taps = [];
async function machine(name) {
  const tap = `bcbm${name}-${randomBytes(2).toString('hex')}`;
  spawnSync('ip', ['tuntap', 'add', 'dev', tap, 'mode', 'tap'], { stdio: 'inherit' });
  taps.push(tap);
  const spec = { mac: mac(), uuid: uuid() };
  const lab = await LabMachine.start({
    dir: join(scratch, name),
    tap,
    ...spec,
    bmcUser: BMC_USER,
    bmcPassword: BMC_PASSWORD,
    cpus: 2,
    memoryMiB: 512,
  });
  const ipmi = createIpmiDriver({
    host: '127.0.0.1',
    port: lab.ipmiPort,
    credentials: { username: BMC_USER, password: BMC_PASSWORD },
  });
  return { lab, ipmi, tap, ...spec };
}

const cleanups = [];
let agentLogPath = null;
async function cleanUp() {
  for (const step of cleanups.reverse())
    await step().catch((error) => console.error(`cleanup: ${error.message}`));
  for (const tap of taps) spawnSync('ip', ['link', 'del', tap], { stdio: 'ignore' });
  rmSync(scratch, { recursive: true, force: true });
}
process.on('SIGINT', () => void cleanUp().then(() => process.exit(130)));

try {
  // The bare side: its own network, an entry for its machine, reports taken from the spool.
  const bare = await machine('bare');
  cleanups.push(() => bare.lab.stop());
  let reported = null;
  const network = await ProvisioningNetwork.start({
    dir: join(scratch, 'bare-pxe'),
    subnet: '10.78.0.0/24',
    uplinks: [bare.tap],
    onDiscovery: () => {},
    onReport: (body) => (reported?.(body), undefined),
  });
  cleanups.push(() => network.stop());
  const token = randomBytes(16).toString('hex');
  await network.setBootEntry(bare.mac, {
    ...ramdisk,
    cmdline: `console=tty0 console=ttyS0 bc.purpose=inspect bc.report=http://${network.serverAddress}/cgi-bin/report bc.token=${token}`,
  });
  async function bareRound() {
    const report = new Promise((resolve) => (reported = resolve));
    await bare.ipmi.power('off');
    await bare.lab.waitFor('QEMU ends', () => bare.lab.qemuPid() === null, 20_000);
    await bare.ipmi.setBootDevice('pxe');
    await bare.ipmi.power('on');
    const body = JSON.parse(await Promise.race([report, sleep(240_000).then(() => '"timeout"')]));
    if (body?.token !== token || body.inventory?.cpu?.count !== 2)
      throw new Error(`the bare ramdisk's report is wrong: ${JSON.stringify(body).slice(0, 300)}`);
    await bare.ipmi.power('off');
    await bare.lab.waitFor('QEMU ends', () => bare.lab.qemuPid() === null, 20_000);
  }

  // The control plane's side: serve, a site agent with the provisioning network, an enrolled machine.
  const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `bench_metal_${randomBytes(4).toString('hex')}`;
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  cleanups.push(async () => {
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  });
  const SECRET = randomBytes(24).toString('hex');
  const compute = await betterCompute(
    { database: dbUrl.toString(), trustedOrigins: [], rateLimit: false, secret: SECRET },
    { log: () => {} },
  );
  await compute.migrate();
  const { apiKey } = (await compute.embeddedIam.bootstrapDev()).rootAdmin;
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
  while (!url) await sleep(20);
  cleanups.push(async () => {
    controller.abort();
    await serving.catch(() => undefined);
    await compute.close();
  });
  async function call(method, body) {
    const response = await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ tenantId: 'root', ...body }),
    });
    const answer = await response.json();
    if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
    return answer.data;
  }
  const site = await call('sites.create', { name: 'bench-site' });
  const pool = await call('pools.create', { siteId: site.id, name: 'bench-agents', class: 'vps' });
  const { token: siteToken } = await call('siteTokens.create', { poolId: pool.id, preApproved: true });
  writeFileSync(join(scratch, 'site.token'), `${siteToken}\n`, { mode: 0o600 });
  const managed = await machine('plane');
  cleanups.push(() => managed.lab.stop());
  const bcd = join(root, 'packages', 'daemon', 'bin', 'bcd.cjs');
  const stateDir = join(scratch, 'agent');
  // Asynchronously: the server answering the join runs in this process.
  const joining = spawn(
    process.execPath,
    [bcd, 'join', '--url', url, '--token-file', join(scratch, 'site.token'), '--state-dir', stateDir],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let joinErr = '';
  joining.stderr.on('data', (chunk) => (joinErr += chunk));
  const joinCode = await new Promise((resolve) => joining.on('exit', resolve));
  if (joinCode !== 0) throw new Error(`bcd join failed: ${joinErr}`);
  const pxeDir = join(scratch, 'agent-pxe');
  agentLogPath = join(scratch, 'agent.log');
  const agentLog = openSync(agentLogPath, 'a');
  const agent = spawn(
    process.execPath,
    [
      ...[bcd, 'run', '--state-dir', stateDir, '--scripts-dir', scratch, '--pxe-dir', pxeDir],
      ...['--pxe-uplink', managed.tap, '--ramdisk-dir', ramdiskDir],
    ],
    { stdio: ['ignore', agentLog, agentLog] },
  );
  cleanups.push(async () => {
    if (agent.exitCode !== null) return;
    const exited = new Promise((resolve) => agent.on('exit', resolve));
    agent.kill('SIGTERM');
    await exited;
  });
  const nodeId = JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')).nodeId;
  for (let i = 0; (await call('nodes.get', { nodeId })).state !== 'ready'; i++) {
    if (i > 300) throw new Error('the site agent did not become ready');
    await sleep(100);
  }
  const enrolled = await call('metal.enroll', {
    siteId: site.id,
    name: 'bench-1',
    bmcDriver: 'ipmi',
    bmcAddress: '127.0.0.1',
    bmcPort: managed.lab.ipmiPort,
    bmcUser: BMC_USER,
    bmcPassword: BMC_PASSWORD,
    productUuid: managed.uuid,
    macs: [managed.mac],
  });
  const machineId = enrolled.id;
  const settled = async (done, what) => {
    for (let i = 0; ; i++) {
      const m = await call('metal.get', { machineId });
      if (done(m)) return m;
      if (m.targetState === null && m.lastError) throw new Error(`${what}: ${m.lastError}`);
      if (i > 3000) throw new Error(`${what}: not within 300 s`);
      await sleep(100);
    }
  };
  await call('metal.manage', { machineId });
  await settled((m) => m.provisionState === 'manageable', 'manage');
  async function planeRound() {
    const since = new Date().toISOString();
    await call('metal.inspect', { machineId, reason: 'bench' });
    const m = await settled(
      (m) => m.provisionState === 'manageable' && m.inspectedAt !== null && m.inspectedAt > since,
      'inspect',
    );
    if (m.inventory?.cpu?.count !== 2 || m.inventory.memory.physicalMiB !== 512)
      throw new Error(`the inventory is wrong: ${JSON.stringify(m.inventory)}`);
  }

  const timed = async (round) => {
    const cpu = cpuMs();
    const started = performance.now();
    await round();
    return { wallMs: performance.now() - started, cpuMs: cpuMs() - cpu };
  };
  console.log('warm-up: one round of each side, not counted');
  await bareRound();
  await planeRound();
  const results = { bare: [], plane: [] };
  for (let r = 0; r < ROUNDS; r++)
    for (const [side, round] of r % 2 === 0
      ? [
          ['bare', bareRound],
          ['plane', planeRound],
        ]
      : [
          ['plane', planeRound],
          ['bare', bareRound],
        ]) {
      const result = await timed(round);
      results[side].push(result);
      console.log(
        `round ${r + 1} ${side.padEnd(5)}  wall ${(result.wallMs / 1000).toFixed(2)} s  this process's CPU ${(result.cpuMs / 1000).toFixed(2)} s`,
      );
    }
  const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
  const bareWall = median(results.bare.map((r) => r.wallMs));
  const planeWall = median(results.plane.map((r) => r.wallMs));
  console.log(
    `median: bare ${(bareWall / 1000).toFixed(2)} s, control plane ${(planeWall / 1000).toFixed(2)} s; the control plane adds ${((planeWall - bareWall) / 1000).toFixed(2)} s (ratio ${(planeWall / bareWall).toFixed(2)}); goal: under 2 s`,
  );
  console.log(
    `median CPU of this process: bare ${(median(results.bare.map((r) => r.cpuMs)) / 1000).toFixed(2)} s, control plane ${(median(results.plane.map((r) => r.cpuMs)) / 1000).toFixed(2)} s`,
  );
} catch (error) {
  // The agent's last words say why a round failed on another host.
  if (agentLogPath) console.error(`the site agent said:\n${readFileSync(agentLogPath, 'utf8').slice(-3000)}`);
  throw error;
} finally {
  await cleanUp();
}
