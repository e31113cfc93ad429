#!/usr/bin/env node
// bench/guest-boot: time from starting qemu-system-x86_64 to SSH-ready for the guest image (the
// guest's ready line, then a real OpenSSH login), over several boots of fresh instances, with the CPU
// seconds the qemu process used to get there. The baseline for the control plane's create-to-SSH
// overhead. It prints; it asserts nothing.
//
// Run: node bench/guest-boot.mjs [runs=3]   (builds the guest image first when it is missing)
import { build } from 'esbuild';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const runs = Number(process.argv[2] ?? 3);
const scratch = mkdtempSync(join(tmpdir(), 'bc-bench-guest-'));

// The helper is TypeScript shared with the tests; compile it on the fly rather than keep a copy.
const source = new URL('../packages/better-compute/test/guest-support.ts', import.meta.url).pathname;
const compiled = await build({
  entryPoints: [source],
  bundle: false,
  format: 'esm',
  platform: 'node',
  write: false,
});
const helperPath = join(scratch, 'guest-support.mjs');
writeFileSync(
  helperPath,
  compiled.outputFiles[0].text.replaceAll('import.meta.dirname', JSON.stringify(join(source, '..'))),
);
const { ensureGuestImage, ensureHostTools, generateSshKey, Guest } = await import(
  pathToFileURL(helperPath).href
);

const tools = ensureHostTools();
if (tools.missing.length > 0) {
  console.error(`guest-boot: missing ${tools.missing.join(', ')}: ${tools.reason}`);
  process.exit(1);
}
const image = await ensureGuestImage();
const key = generateSshKey(scratch);
const clockTicks = 100; // USER_HZ on Linux

function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks; // utime, stime
}

const results = [];
for (let run = 1; run <= runs; run++) {
  const guest = await Guest.start({
    image,
    seed: {
      instanceId: `bench-${Date.now()}-${run}`,
      hostname: `bench-${run}`,
      sshAuthorizedKeys: [key.publicKey],
    },
  });
  await guest.waitForReady(300_000);
  const readyMs = Date.now() - guest.startedAt;
  await guest.waitForSsh(key, image.manifest.defaultUser, 120_000);
  const sshMs = Date.now() - guest.startedAt;
  const cpu = cpuSeconds(guest.process.pid);
  const stopped = await guest.stop(60_000);
  results.push({ readyMs, sshMs, cpu });
  console.log(
    `run ${run}: ready line ${(readyMs / 1000).toFixed(2)} s, SSH login ${(sshMs / 1000).toFixed(2)} s, ` +
      `qemu CPU ${cpu.toFixed(2)} s (${guest.accel}; stopped by ${stopped.how})`,
  );
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const spread = (values) => Math.max(...values) - Math.min(...values);
const ssh = results.map((r) => r.sshMs / 1000);
const cpu = results.map((r) => r.cpu);
console.log(
  `guest boot to SSH: median ${median(ssh).toFixed(2)} s, spread ${spread(ssh).toFixed(2)} s; ` +
    `qemu CPU median ${median(cpu).toFixed(2)} s, spread ${spread(cpu).toFixed(2)} s ` +
    `(${runs} runs, kernel ${image.manifest.kernelVersion}, image ${image.manifest.buildKey})`,
);
rmSync(scratch, { recursive: true, force: true });
