#!/usr/bin/env node
// Start-up time of the CLI against a bare `node -e 0`, measured in one run on this machine.
// Goals (issue 4): `better-compute version` ≤ 1.3x and `better-compute help` ≤ 2x the baseline.
// A benchmark, not a test: it prints figures and never fails. Usage: node bench/cli-startup.mjs [runs]
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const runs = Number(process.argv[2] ?? 20);
if (!existsSync(join(root, 'packages', 'better-compute', 'dist', 'cli', 'bin.cjs'))) {
  execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'inherit' });
}
// A directory without a configuration, so `help` has no project commands to load.
const cwd = mkdtempSync(join(tmpdir(), 'bc-bench-'));
const env = { PATH: process.env.PATH ?? '', HOME: cwd };

const cases = [
  ['node -e 0', ['-e', '0']],
  ['better-compute version', [bin, 'version']],
  ['better-compute help', [bin, 'help']],
];

function once(args) {
  const start = process.hrtime.bigint();
  const result = spawnSync(process.execPath, args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) throw new Error(`${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return ms;
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const samples = new Map(cases.map(([name]) => [name, []]));
for (const [, args] of cases) once(args); // warm the file cache
// Interleaved, so a slow moment of the machine hits every case alike.
for (let i = 0; i < runs; i++) for (const [name, args] of cases) samples.get(name).push(once(args));
rmSync(cwd, { recursive: true, force: true });

const baseline = median(samples.get('node -e 0'));
console.log(`CLI start-up, median of ${runs} runs each (node ${process.version})`);
for (const [name] of cases) {
  const m = median(samples.get(name));
  const goal = name.endsWith('version') ? ' (goal ≤ 1.3x)' : name.endsWith('help') ? ' (goal ≤ 2x)' : '';
  console.log(`  ${name.padEnd(24)} ${m.toFixed(1).padStart(7)} ms  ${(m / baseline).toFixed(2)}x${goal}`);
}
