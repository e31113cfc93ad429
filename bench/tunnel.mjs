#!/usr/bin/env node
// bench/tunnel: what `forward --instance` costs against a direct loopback connection to the same
// port of the same guest, in the same run. The deployment is real: `better-compute serve` on
// PostgreSQL, a `bcd` joined to a vps pool with its qemu runtime, one instance of the project's
// guest image running a small HTTP server (Perl, in the guest), and the real CLI binary forwarding.
// The forward path is client → CLI → WebSocket → API server → gateway → daemon → the guest's port;
// the direct path is client → the guest's port as QEMU forwards it on the node's loopback.
//
// Measured in alternating slices (direct, forward, then forward, direct, …) after a warm-up:
//   - download and upload throughput (32 MiB over one HTTP request);
//   - added latency: small requests on one kept-alive connection, and a new connection's first
//     answer (through forward, a fresh tunnels.open and WebSocket each time);
//   - CPU per MiB and per request of each process on the path (/proc/<pid>/stat), beside the guest's;
// then the memory (RSS) that 200 idle tunnels add to the server, the daemon and the CLI.
// The guest is TCG-emulated here, so its own speed bounds both sides; the ratio and the added
// milliseconds are the figures to read. It prints; it asserts nothing. Needs PostgreSQL at
// 127.0.0.1:5432 as the tests do.
//
// Run: node bench/tunnel.mjs [slices=4]
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const slices = Number(process.argv[2] ?? 4);
const root = new URL('..', import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), 'bc-bench-tunnel-'));
const MiB = 1024 * 1024;
const TRANSFER = 32 * MiB;
const SMALL_REQUESTS = 100;
const NEW_CONNECTIONS = 10;
const IDLE_TUNNELS = 200;
const GUEST_PORT = 8080;

// The test supports are TypeScript; bundled three levels under the root, so their paths hold.
const outdir = join(root, 'node_modules', '.cache', 'bench-tunnel');
mkdirSync(outdir, { recursive: true });
await build({
  entryPoints: {
    daemon: join(root, 'packages/daemon/test/daemon-support.ts'),
    guest: join(root, 'packages/better-compute/test/guest-support.ts'),
    signer: join(root, 'packages/better-compute/src/gateway/signer.ts'),
    pki: join(root, 'packages/better-compute/src/pki/create.ts'),
  },
  bundle: true,
  format: 'esm',
  platform: 'node',
  packages: 'external',
  outdir,
  outExtension: { '.js': '.mjs' },
  logLevel: 'warning',
});
const load = (name) => import(pathToFileURL(join(outdir, `${name}.mjs`)).href);
const { deployment, freePort, joinVpsNode, root: repositoryRoot, startServer, until } = await load('daemon');
const { ensureGuestImage, generateSshKey, guestHttpServerCommand, guestImageRegistration, sshGuest } =
  await load('guest');
const { generatedCommandSigner } = await load('signer');
const { createPkiBundle } = await load('pki');
const computeBin = join(repositoryRoot, 'packages', 'better-compute', 'bin', 'better-compute.cjs');

/** A process's CPU time so far (user + system), in ms; 0 once it is gone. */
function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return 0;
  }
}
function rssKiB(pid) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line.split(/\s+/)[1]);
}
/** Established TCP connections on the node's loopback to `port` (the guest's forwarded port). */
function connectionsTo(port) {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .filter((line) => {
      const [, , remote, state] = line.trim().split(/\s+/);
      return remote?.endsWith(`:${hex}`) && state === '01';
    }).length;
}
const median = (values) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)];
const round = (value, digits = 1) => Number(value.toFixed(digits));

// The deployment: a server with a PKI bundle (tunnel tickets), a node, a vps pool, a flavor, the image.
const env = await deployment();
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const keyFile = join(scratch, 'command-root.pem');
writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
const secret = 'bench-tunnel-secret-not-a-real-one';
await createPkiBundle({ path: join(scratch, 'pki.json'), secret });
writeFileSync(
  join(scratch, 'config.mjs'),
  `export default { pki: ${JSON.stringify(join(scratch, 'pki.json'))} };\n`,
);
const server = await startServer(env.database.url, port, keyFile, {
  BETTER_COMPUTE_CONFIG: join(scratch, 'config.mjs'),
  BETTER_COMPUTE_SECRET: secret,
});
const stateDir = join(scratch, 'state');
const { poolId, daemon } = await joinVpsNode(env, url, scratch, stateDir);
let forward;
let instanceId;
const opened = [];
try {
  const guest = await ensureGuestImage();
  const key = generateSshKey(scratch);
  const user = guest.manifest.defaultUser;
  const flavor = await env.call('flavors.create', {
    poolId,
    name: 'small',
    vcpus: 1,
    memoryMiB: 512,
    diskGiB: 2,
  });
  const image = await env.call('images.register', guestImageRegistration(guest));
  const created = await env.call(
    'instances.create',
    { poolId, flavorId: flavor.id, imageId: image.id, name: 'bench', sshKeys: [key.publicKey] },
    'acme',
  );
  instanceId = created.id;
  let view = created;
  while (view.state === 'provisioning') {
    await new Promise((resolve) => setTimeout(resolve, 200));
    view = await env.call('instances.get', { instanceId }, 'acme');
  }
  if (view.state !== 'running') throw new Error(`instance ${instanceId} is ${view.state}: ${view.reason}`);
  await until(
    'SSH in the guest',
    async () => (await sshGuest(22, key, user, 'true', { host: view.address.split('/')[0] })).code === 0,
    300_000,
  );
  const started = await sshGuest(22, key, user, guestHttpServerCommand(GUEST_PORT), {
    host: view.address.split('/')[0],
  });
  if (started.code !== 0)
    throw new Error(`the guest's HTTP server did not start: ${started.stdout}${started.stderr}`);
  const qemuPid = Number(readFileSync(join(stateDir, 'instances', instanceId, 'qemu.pid'), 'utf8').trim());

  // The real CLI, forwarding a free local port to the guest's server.
  forward = spawn(
    process.execPath,
    [computeBin, 'forward', '--instance', instanceId, '--port', String(GUEST_PORT), '--local-port', '0'],
    {
      cwd: scratch,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: scratch,
        BETTER_COMPUTE_URL: url,
        BETTER_COMPUTE_TOKEN: env.acmeKey,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let forwardSaid = '';
  forward.stderr.setEncoding('utf8').on('data', (chunk) => (forwardSaid += chunk));
  await until('forward to listen', async () => /forwarding 127\.0\.0\.1:(\d+)/.test(forwardSaid), 30_000);
  const forwardPort = Number(/forwarding 127\.0\.0\.1:(\d+)/.exec(forwardSaid)[1]);
  // The first forwarded connection makes the daemon forward the guest's port on the node's
  // loopback; the direct side connects there.
  await request(forwardPort, 'GET', '/');
  const run = JSON.parse(readFileSync(join(stateDir, 'instances', instanceId, 'run.json'), 'utf8'));
  const directPort = run.forwards[String(GUEST_PORT)];
  if (!directPort) throw new Error('the daemon recorded no loopback port for the guest’s server');

  const processes = { server: server.child.pid, daemon: daemon.child.pid, cli: forward.pid, guest: qemuPid };
  const cpuOf = () => Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, cpuMs(pid)]));
  const spent = (before) => {
    const after = cpuOf();
    return Object.fromEntries(Object.keys(before).map((name) => [name, after[name] - before[name]]));
  };

  /** One HTTP request on a new connection (agent: false); resolves with its time and bytes. */
  function request(toPort, method, path, body, agent = false) {
    return new Promise((resolve, reject) => {
      const startedAt = performance.now();
      const call = http.request(
        {
          host: '127.0.0.1',
          port: toPort,
          method,
          path,
          agent,
          headers: body ? { 'content-length': body.length } : {},
        },
        (response) => {
          let bytes = 0;
          response.on('data', (chunk) => (bytes += chunk.length));
          response.on('end', () => resolve({ ms: performance.now() - startedAt, bytes }));
          response.on('error', reject);
        },
      );
      call.on('error', reject);
      call.end(body);
    });
  }

  async function measure(toPort) {
    const figures = {};
    let before = cpuOf();
    const down = await request(toPort, 'GET', `/bytes/${TRANSFER}`);
    if (down.bytes !== TRANSFER) throw new Error(`the download brought ${down.bytes} bytes`);
    figures.downMiBs = TRANSFER / MiB / (down.ms / 1000);
    figures.downCpu = spent(before);
    before = cpuOf();
    const up = await request(toPort, 'POST', '/upload', Buffer.alloc(TRANSFER, 1));
    figures.upMiBs = TRANSFER / MiB / (up.ms / 1000);
    figures.upCpu = spent(before);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    await request(toPort, 'GET', '/', undefined, agent); // the connection, opened outside the timing
    const small = [];
    before = cpuOf();
    for (let i = 0; i < SMALL_REQUESTS; i++)
      small.push((await request(toPort, 'GET', '/', undefined, agent)).ms);
    figures.smallCpu = spent(before);
    agent.destroy();
    figures.smallMs = median(small);
    const fresh = [];
    for (let i = 0; i < NEW_CONNECTIONS; i++) fresh.push((await request(toPort, 'GET', '/')).ms);
    figures.freshMs = median(fresh);
    return figures;
  }

  // Warm-up: both sides, unmeasured.
  await measure(directPort);
  await measure(forwardPort);
  const rows = { direct: [], forward: [] };
  for (let slice = 1; slice <= slices; slice++) {
    const order = slice % 2 ? ['direct', 'forward'] : ['forward', 'direct'];
    for (const side of order) rows[side].push(await measure(side === 'direct' ? directPort : forwardPort));
    const d = rows.direct.at(-1);
    const f = rows.forward.at(-1);
    console.log(
      `slice ${slice}: download ${round(f.downMiBs)} MiB/s forward, ${round(d.downMiBs)} direct; ` +
        `upload ${round(f.upMiBs)} / ${round(d.upMiBs)}; small request ${round(f.smallMs, 2)} / ${round(d.smallMs, 2)} ms; ` +
        `new connection ${round(f.freshMs)} / ${round(d.freshMs)} ms`,
    );
  }
  const med = (side, field) => median(rows[side].map((row) => row[field]));
  const cpuPer = (side, field, per) =>
    Object.keys(processes)
      .map((name) => `${name} ${round(median(rows[side].map((row) => row[field][name])) / per, 2)}`)
      .join(', ');
  console.log(`\nmedians over ${slices} slices (forward against direct, same guest, same run):`);
  console.log(
    `  download ${round(med('forward', 'downMiBs'))} MiB/s against ${round(med('direct', 'downMiBs'))}: ratio ${round(med('forward', 'downMiBs') / med('direct', 'downMiBs'), 2)}`,
  );
  console.log(
    `  upload   ${round(med('forward', 'upMiBs'))} MiB/s against ${round(med('direct', 'upMiBs'))}: ratio ${round(med('forward', 'upMiBs') / med('direct', 'upMiBs'), 2)}`,
  );
  console.log(
    `  small request on a kept-alive connection: ${round(med('forward', 'smallMs'), 2)} ms against ${round(med('direct', 'smallMs'), 2)} ms (+${round(med('forward', 'smallMs') - med('direct', 'smallMs'), 2)} ms)`,
  );
  console.log(
    `  a new connection's first answer: ${round(med('forward', 'freshMs'))} ms against ${round(med('direct', 'freshMs'))} ms (+${round(med('forward', 'freshMs') - med('direct', 'freshMs'))} ms: tunnels.open and the WebSocket)`,
  );
  console.log(`  CPU ms per MiB downloaded, forward: ${cpuPer('forward', 'downCpu', TRANSFER / MiB)}`);
  console.log(`  CPU ms per MiB downloaded, direct:  ${cpuPer('direct', 'downCpu', TRANSFER / MiB)}`);
  console.log(`  CPU ms per MiB uploaded, forward:   ${cpuPer('forward', 'upCpu', TRANSFER / MiB)}`);
  console.log(`  CPU ms per MiB uploaded, direct:    ${cpuPer('direct', 'upCpu', TRANSFER / MiB)}`);
  console.log(`  CPU ms per small request, forward:  ${cpuPer('forward', 'smallCpu', SMALL_REQUESTS)}`);
  console.log(`  CPU ms per small request, direct:   ${cpuPer('direct', 'smallCpu', SMALL_REQUESTS)}`);

  // 200 idle tunnels: connections to forward that send nothing. The guest's server takes one
  // connection at a time; the others wait in its accept queue, connected and idle.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const rssBefore = Object.fromEntries(
    ['server', 'daemon', 'cli'].map((name) => [name, rssKiB(processes[name])]),
  );
  const baseline = connectionsTo(directPort);
  const openedAt = performance.now();
  for (let i = 0; i < IDLE_TUNNELS; i++) {
    const socket = connect(forwardPort, '127.0.0.1');
    socket.on('error', () => {});
    opened.push(socket);
  }
  await until(
    `${IDLE_TUNNELS} tunnels to reach the guest`,
    async () => connectionsTo(directPort) - baseline >= IDLE_TUNNELS,
    120_000,
  );
  const openMs = performance.now() - openedAt;
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const rssAfter = Object.fromEntries(
    ['server', 'daemon', 'cli'].map((name) => [name, rssKiB(processes[name])]),
  );
  console.log(
    `\n${IDLE_TUNNELS} idle tunnels opened in ${Math.round(openMs)} ms (${round((IDLE_TUNNELS / openMs) * 1000)} a second); ` +
      `RSS added: ` +
      Object.keys(rssBefore)
        .map(
          (name) =>
            `${name} ${round((rssAfter[name] - rssBefore[name]) / 1024)} MiB (${round((rssAfter[name] - rssBefore[name]) / IDLE_TUNNELS)} KiB a tunnel, ${round(rssAfter[name] / 1024)} MiB in all)`,
        )
        .join('; '),
  );
  if (forwardSaid.includes('could not be forwarded')) console.log(`forward said: ${forwardSaid.trim()}`);
} finally {
  for (const socket of opened) socket.destroy();
  forward?.kill('SIGINT');
  if (instanceId) await env.call('instances.delete', { instanceId }, 'acme').catch(() => {});
  await until(
    'the instance’s VM to stop',
    async () => !instanceId || (await env.call('instances.get', { instanceId }, 'acme')).state === 'deleted',
    120_000,
  ).catch(() => {});
  daemon.child.kill('SIGKILL');
  server.child.kill('SIGKILL');
  await env.close();
  rmSync(scratch, { recursive: true, force: true });
}
