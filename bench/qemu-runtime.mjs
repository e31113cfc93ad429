#!/usr/bin/env node
// bench/qemu-runtime: the daemon's qemu runtime on the guest image, in this process as `bcd` runs
// it: instance.create (overlay + seed), instance.start to the guest's ready line, the first real
// OpenSSH login, and the memory the daemon holds per running VM (its console ring and sockets:
// JavaScript heap + buffers, and RSS, measured after a GC with the VMs up against before). Then
// ACPI stop and delete. It prints; it asserts nothing.
//
// Run: node --expose-gc bench/qemu-runtime.mjs [runs=2] [vms-at-once=2]
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const runs = Number(process.argv[2] ?? 2);
const together = Number(process.argv[3] ?? 2);
const root = new URL('..', import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), 'bc-bench-qemu-'));

// The runtime is TypeScript; bundle it beside node_modules so its package imports resolve.
const out = join(root, 'node_modules', '.cache', 'bench-qemu-runtime.mjs');
mkdirSync(join(out, '..'), { recursive: true });
await build({
  entryPoints: [join(root, 'packages/daemon/src/runtimes/index.ts')],
  bundle: true,
  format: 'esm',
  platform: 'node',
  packages: 'external',
  outfile: out,
  logLevel: 'warning',
});
const { QemuDriver } = await import(pathToFileURL(out).href);

const built = spawnSync(join(root, 'scripts/build-guest-image.sh'), [], { encoding: 'utf8' });
if (built.status !== 0) {
  console.error(`qemu-runtime: building the guest image failed:\n${built.stderr.slice(-2000)}`);
  process.exit(1);
}
const guestDir = built.stdout.trim().split('\n').at(-1);
const manifest = JSON.parse(readFileSync(join(guestDir, 'manifest.json'), 'utf8'));
const file = (name) => ({
  source: join(guestDir, name),
  sha256: manifest.files[name].sha256,
  sizeBytes: manifest.files[name].size,
});
const image = {
  imageId: 'img_bench',
  diskFormat: 'qcow2',
  disk: file('rootfs.qcow2'),
  boot: { kernel: file('vmlinux'), initrd: file('initrd.img'), cmdline: manifest.kernelCmdline },
};
const shape = { vcpus: 1, memoryMiB: 512, diskGiB: 2, gpus: [] };
spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(scratch, 'key')]);
const publicKey = readFileSync(join(scratch, 'key.pub'), 'utf8').trim();

const driver = new QemuDriver(join(scratch, 'state'));
let started = Date.now();
await driver.fetchImage(image);
console.log(`image.fetch into the cache (${manifest.buildKey}): ${Date.now() - started} ms`);

/** SSH to an instance at its private address, which the node routes to. */
function ssh(address) {
  const result = spawnSync(
    'ssh',
    [
      '-F', 'none', '-i', join(scratch, 'key'), '-o', 'IdentitiesOnly=yes',
      '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
      '-o', 'LogLevel=ERROR', `${manifest.defaultUser}@${address.split('/')[0]}`, 'hostname',
    ],
    { encoding: 'utf8', timeout: 60_000 },
  ); // prettier-ignore
  return result.status === 0 ? result.stdout.trim() : null;
}

const memory = () => {
  globalThis.gc?.();
  const usage = process.memoryUsage();
  return { js: usage.heapUsed + usage.external + usage.arrayBuffers, rss: usage.rss };
};
const kib = (bytes) => `${Math.round(bytes / 1024)} KiB`;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const timings = [];
for (let run = 1; run <= runs; run++) {
  const instanceId = `inst_bench${run}`;
  started = Date.now();
  await driver.create({
    instanceId,
    hostname: `bench-${run}`,
    image,
    shape,
    sshKeys: [publicKey],
    userData: null,
  });
  const createMs = Date.now() - started;
  const ready = await driver.start({ instanceId, image, shape, readyTimeoutMs: 300_000 });
  const readyMs = Date.now() - started;
  const hostname = ssh(ready.address);
  const sshMs = Date.now() - started;
  const stopped = await driver.stop(instanceId, 60_000);
  await driver.delete(instanceId);
  timings.push({ createMs, bootMs: ready.bootMs, readyMs, sshMs });
  console.log(
    `run ${run}: create ${createMs} ms, QEMU launch to ready line ${ready.bootMs} ms, create to ready ${readyMs} ms, ` +
      `create to SSH login ${sshMs} ms (hostname ${hostname}); stop ${stopped.forced ? 'forced' : 'by ACPI'}`,
  );
}
console.log(
  `median over ${runs}: create ${median(timings.map((t) => t.createMs))} ms, boot ${median(timings.map((t) => t.bootMs))} ms, ` +
    `create to SSH ${median(timings.map((t) => t.sshMs))} ms`,
);

// Memory per VM: several VMs up at once against none.
memory();
const before = memory();
const ids = Array.from({ length: together }, (_, i) => `inst_mem${i}`);
for (const instanceId of ids)
  await driver.create({
    instanceId,
    hostname: instanceId.slice(5),
    image,
    shape,
    sshKeys: [publicKey],
    userData: null,
  });
await Promise.all(
  ids.map((instanceId) => driver.start({ instanceId, image, shape, readyTimeoutMs: 300_000 })),
);
const during = memory();
console.log(
  `daemon memory with ${together} VMs running: +${kib((during.js - before.js) / together)} JS heap and buffers per VM, ` +
    `+${kib((during.rss - before.rss) / together)} RSS per VM (${globalThis.gc ? 'after GC' : 'no --expose-gc: noisy'})`,
);
// What each VM's console ring holds: openConsole replays it as its first chunk.
const held = [];
for (const instanceId of ids) {
  const serial = await driver.openConsole(instanceId);
  held.push(await new Promise((resolve) => serial.once('data', (chunk) => resolve(chunk.length))));
  serial.destroy();
}
console.log(`console rings hold ${held.join(', ')} bytes (bound 64 KiB each)`);
for (const instanceId of ids) await driver.delete(instanceId);
driver.close();
rmSync(scratch, { recursive: true, force: true });
