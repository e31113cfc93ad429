#!/usr/bin/env node
// Start-up time of the CLI against a bare `node -e 0`, measured in one run on this machine.
// Goals: `better-compute version` ≤ 1.3x (issue 4) and `better-compute help` ≤ 1.3x (issue 42) of the baseline.
// A benchmark, not a test: it prints figures and never fails. Usage: node bench/cli-startup.mjs [runs]
// (BENCH_BASELINE_BIN, below, adds a baseline build's lines).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
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
// BENCH_BASELINE_BIN=…/bin/better-compute.cjs of another build (an older commit's) adds its two
// lines to the same run, for a before and after under the same load.
const baselineBin = process.env.BENCH_BASELINE_BIN;
if (baselineBin)
  cases.push(['baseline version', [baselineBin, 'version']], ['baseline help', [baselineBin, 'help']]);

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
// In slices that alternate the order (baseline first, then last), so a slow moment of the machine
// hits every case alike and no case always runs right after another.
const load = loadavg();
for (let i = 0; i < runs; i++) {
  const slice = i % 2 === 0 ? cases : [...cases].reverse();
  for (const [name, args] of slice) samples.get(name).push(once(args));
}
rmSync(cwd, { recursive: true, force: true });

const baseline = median(samples.get('node -e 0'));
console.log(
  `CLI start-up, median of ${runs} alternating slices (node ${process.version}, load average ${load.map((l) => l.toFixed(2)).join(' ')})`,
);
for (const [name] of cases) {
  const m = median(samples.get(name));
  const goal = name.startsWith('baseline')
    ? ''
    : name.endsWith('version')
      ? ' (goal ≤ 1.3x)'
      : name.endsWith('help')
        ? ' (goal ≤ 1.3x)'
        : '';
  console.log(`  ${name.padEnd(28)} ${m.toFixed(1).padStart(7)} ms  ${(m / baseline).toFixed(2)}x${goal}`);
}
