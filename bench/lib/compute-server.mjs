// better-compute's real server (the built package, the Node adapter, the whole pipeline) on an
// in-memory PGlite, for benchmarks.
import { betterCompute, serve } from '../../packages/better-compute/dist/index.js';

const compute = await betterCompute({
  database: process.env.BENCH_DATABASE_URL ?? 'pglite:memory',
  rateLimit: false,
});
await compute.migrate();
const controller = new AbortController();
process.on('SIGTERM', () => controller.abort());
await serve({
  compute,
  port: 0,
  roles: ['api'],
  signal: controller.signal,
  log: () => {},
  env: {
    BETTER_COMPUTE_ADMIN_EMAIL: 'bench@root.localhost',
    BETTER_COMPUTE_ADMIN_PASSWORD: 'bench-password-not-secret',
  },
  onListening: (url) => console.log(url),
});
process.exit(0);
