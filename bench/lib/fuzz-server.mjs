// The server bench/fuzz.mjs attacks: the whole pipeline with the embedded Better IAM and its dev
// accounts, on BENCH_DATABASE_URL (PGlite in memory otherwise), without a rate limit so every request
// reaches validation and the store. Prints one line: {"url", "keys"}; the keys stay in this pipe.
import { pathToFileURL } from 'node:url';

const dist = process.env.BENCH_COMPUTE_DIST
  ? pathToFileURL(process.env.BENCH_COMPUTE_DIST).href
  : new URL('../../packages/better-compute/dist/index.js', import.meta.url).href;
const { betterCompute, serve } = await import(dist);

const compute = await betterCompute(
  { database: process.env.BENCH_DATABASE_URL ?? 'pglite:memory', rateLimit: false },
  { log: () => {} },
);
await compute.migrate();
const dev = await compute.embeddedIam.bootstrapDev();
const controller = new AbortController();
process.on('SIGTERM', () => controller.abort());
await serve({
  compute,
  port: 0,
  roles: ['api'],
  signal: controller.signal,
  log: () => {},
  onListening: (url) =>
    console.log(
      JSON.stringify({
        url,
        keys: { member: dev.acmeMember.apiKey, admin: dev.acmeAdmin.apiKey, root: dev.rootAdmin.apiKey },
      }),
    ),
});
process.exit(0);
