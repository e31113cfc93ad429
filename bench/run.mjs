#!/usr/bin/env node
// Runs every benchmark in turn with its default arguments (npm run bench). Each prints its own
// figures beside the baseline it measured in the same run; this only sequences them.
// To pass arguments, run one alone: node bench/<name>.mjs (each file's header says which).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const benchmarks = ['handler.mjs', 'iam-auth.mjs', 'cli-startup.mjs', 'reserve.mjs', 'watch.mjs'];
let failed = 0;
for (const name of benchmarks) {
  console.log(`\n== bench/${name}`);
  const run = spawnSync(process.execPath, [fileURLToPath(new URL(name, import.meta.url))], {
    stdio: 'inherit',
  });
  if (run.status !== 0) {
    failed++;
    console.log(`bench/${name} exited with ${run.status ?? run.signal}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
