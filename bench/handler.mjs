#!/usr/bin/env node
// bench/handler: system.version over HTTP on loopback through better-compute's whole pipeline,
// against a bare node:http JSON endpoint, measured in the same run with the same load generator.
// Goal: ratio >= 0.5.  Run: npm run build && node bench/handler.mjs [seconds]
import { fileURLToPath } from 'node:url';
import { load, startChild } from './lib/load.mjs';

const seconds = Number(process.argv[2] ?? 5);
const here = (name) => fileURLToPath(new URL(name, import.meta.url));

async function measure(label, script, path) {
  const server = await startChild(here(script));
  try {
    await load({ url: server.url + path, seconds: 1 }); // warm-up
    const result = await load({ url: server.url + path, seconds });
    console.log(
      `${label.padEnd(28)} ${result.rate.toFixed(0).padStart(7)} req/s  p50 ${result.p50.toFixed(2)} ms  p99 ${result.p99.toFixed(2)} ms  errors ${result.errors}`,
    );
    return result;
  } finally {
    await server.stop();
  }
}

const bare = await measure('bare node:http JSON', 'lib/bare-server.mjs', '/');
const compute = await measure(
  'better-compute system.version',
  'lib/compute-server.mjs',
  '/api/compute/system/version',
);
const ratio = compute.rate / bare.rate;
console.log(`ratio ${ratio.toFixed(2)} (goal >= 0.5) ${ratio >= 0.5 ? 'met' : 'NOT met'}`);
