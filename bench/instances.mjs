#!/usr/bin/env node
// bench/instances: create-to-SSH-ready of an instance through the whole control plane
// (`better-compute serve` on PostgreSQL, a real `bcd` joined to a vps pool, its qemu runtime)
// beside a bare `qemu-system-x86_64` boot of the same guest image (overlay, NoCloud seed, the same
// machine), in the same run, alternating. Both are timed from the first call to the first SSH
// login that runs a command, with the same SSH probe once the guest's console says it is ready.
// The difference is the control plane's overhead (goal: under 300 ms). CPU per run is the whole
// machine's busy time (/proc/stat) while the run lasted, so other load on the machine shows in it.
// It prints; it asserts nothing. Needs PostgreSQL at 127.0.0.1:5432 as the tests do.
//
// Run: node bench/instances.mjs [pairs=3]
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const pairs = Number(process.argv[2] ?? 3);
const root = new URL('..', import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), 'bc-bench-instances-'));

// The test supports are TypeScript; bundled three levels under the root, so their paths hold.
const outdir = join(root, 'node_modules', '.cache', 'bench-instances');
mkdirSync(outdir, { recursive: true });
await build({
  entryPoints: {
    daemon: join(root, 'packages/daemon/test/daemon-support.ts'),
    guest: join(root, 'packages/better-compute/test/guest-support.ts'),
    signer: join(root, 'packages/better-compute/src/gateway/signer.ts'),
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
const { deployment, freePort, joinVpsNode, startServer, until } = await load('daemon');
const { ensureGuestImage, generateSshKey, Guest, guestImageRegistration } = await load('guest');
const { generatedCommandSigner } = await load('signer');

const guest = await ensureGuestImage();
const key = generateSshKey(scratch);
const user = guest.manifest.defaultUser;

/** One SSH login that runs `true`; the same probe for both sides. */
/** An instance is reached at its private address (port 22); the bare VM at a loopback forward. */
function sshOnce(port, host = '127.0.0.1') {
  const args = [
    '-F', 'none', '-i', key.privateKeyPath, '-p', String(port), '-o', 'IdentitiesOnly=yes',
    '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
    '-o', 'ConnectTimeout=5', '-o', 'LogLevel=ERROR', `${user}@${host}`, 'true',
  ]; // prettier-ignore
  return new Promise((resolve) => {
    const child = spawn('ssh', args, { stdio: 'ignore', timeout: 10_000 });
    child.on('close', (code) => resolve(code === 0));
  });
}
async function sshReady(port, host = '127.0.0.1', deadlineMs = 300_000) {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    if (await sshOnce(port, host)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`SSH on port ${port} did not answer`);
}

/** The machine's busy CPU time so far, in ms (every core). */
function busyMs() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = fields[3] + fields[4];
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  return ((total - idle) * 1000) / 100; // USER_HZ is 100 on Linux
}

// The deployment: a server, a node, a vps pool, a flavor and the image.
const env = await deployment();
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const keyFile = join(scratch, 'command-root.pem');
writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
const server = await startServer(env.database.url, port, keyFile);
const stateDir = join(scratch, 'state');
const { poolId, daemon } = await joinVpsNode(env, url, scratch, stateDir);
const flavor = await env.call('flavors.create', {
  poolId,
  name: 'small',
  vcpus: 1,
  memoryMiB: 512,
  diskGiB: 2,
});
const image = await env.call('images.register', guestImageRegistration(guest));

async function controlPlaneRun(run) {
  const cpu = busyMs();
  const started = Date.now();
  const created = await env.call(
    'instances.create',
    {
      poolId,
      flavorId: flavor.id,
      imageId: image.id,
      name: `bench-${run}`,
      sshKeys: [key.publicKey],
    },
    'acme',
  );
  let view = created;
  while (view.state === 'provisioning') {
    await new Promise((resolve) => setTimeout(resolve, 50));
    view = await env.call('instances.get', { instanceId: created.id }, 'acme');
  }
  if (view.state !== 'running') throw new Error(`instance ${created.id} is ${view.state}: ${view.reason}`);
  await sshReady(22, view.address.split('/')[0]);
  const ms = Date.now() - started;
  const cpuMs = busyMs() - cpu;
  await env.call('instances.delete', { instanceId: created.id }, 'acme');
  await until(
    'the delete',
    async () => (await env.call('instances.get', { instanceId: created.id }, 'acme')).state === 'deleted',
    120_000,
  );
  return { ms, cpuMs };
}

async function bareRun(run) {
  const cpu = busyMs();
  const started = Date.now();
  const vm = await Guest.start({
    image: guest,
    seed: { instanceId: `bare-${run}`, hostname: `bare-${run}`, sshAuthorizedKeys: [key.publicKey] },
    workDir: join(scratch, `bare-${run}`),
  });
  // As the runtime does: the guest's ready line on the console, then SSH (probing SSH all through
  // the boot would spend the CPU the TCG guest needs).
  await vm.waitForReady(300_000);
  await sshReady(vm.sshPort);
  const ms = Date.now() - started;
  const cpuMs = busyMs() - cpu;
  await vm.stop(0);
  return { ms, cpuMs };
}

const rows = [];
try {
  // One unmeasured boot of each first: the image reaches the node's cache and the page cache.
  await controlPlaneRun(0);
  await bareRun(0);
  for (let run = 1; run <= pairs; run++) {
    // Alternating which goes first, so a drift in the machine's load falls on both.
    const [first, second] = run % 2 ? [controlPlaneRun, bareRun] : [bareRun, controlPlaneRun];
    const a = await first(run);
    const b = await second(run);
    const [plane, bare] = first === controlPlaneRun ? [a, b] : [b, a];
    rows.push({ plane, bare });
    console.log(
      `pair ${run}: control plane ${plane.ms} ms (CPU ${Math.round(plane.cpuMs)} ms), bare QEMU ${bare.ms} ms ` +
        `(CPU ${Math.round(bare.cpuMs)} ms), overhead ${plane.ms - bare.ms} ms`,
    );
  }
  const median = (values) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)];
  console.log(
    `median over ${pairs} pairs: control plane ${median(rows.map((r) => r.plane.ms))} ms, bare ${median(rows.map((r) => r.bare.ms))} ms, ` +
      `overhead ${median(rows.map((r) => r.plane.ms - r.bare.ms))} ms (goal < 300 ms); ` +
      `CPU ${Math.round(median(rows.map((r) => r.plane.cpuMs)))} ms against ${Math.round(median(rows.map((r) => r.bare.cpuMs)))} ms`,
  );
} finally {
  daemon.child.kill('SIGKILL');
  server.child.kill('SIGKILL');
  await env.close();
  rmSync(scratch, { recursive: true, force: true });
}
