// The real server for benchmarks (the Node adapter, the whole
// pipeline, `serve` with the api role) on BENCH_DATABASE_URL, from BENCH_COMPUTE_DIST when set (a
// build of the package elsewhere) or the package's dist.
import { pathToFileURL } from 'node:url';

const dist = process.env.BENCH_COMPUTE_DIST
  ? pathToFileURL(process.env.BENCH_COMPUTE_DIST).href
  : new URL('../../packages/better-compute/dist/index.js', import.meta.url).href;
const built = await import(dist);
const { accessLogger, betterCompute, serve } = built;
const lineBatch = built.lineBatch;
// Started with an IPC channel (bench/reserve.mjs): statements are captured on request.
const { installCapture } = await import('./capture.mjs');
installCapture(dist);

// BENCH_POOL=<n>: the server's PostgreSQL connections (the deployment's default otherwise).
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'pglite:memory';
const database = process.env.BENCH_POOL
  ? await (
      await import('@better-compute/db')
    ).openDatabase({ url: databaseUrl, poolSize: Number(process.env.BENCH_POOL) })
  : databaseUrl;
const compute = await betterCompute({
  database,
  rateLimit: false,
});
await compute.migrate();
const controller = new AbortController();
// BENCH_PROFILE=<file>: a CPU profile of the server from start to SIGTERM (open it in Chrome's DevTools).
let stopProfile = async () => {};
if (process.env.BENCH_PROFILE) {
  const { Session } = await import('node:inspector/promises');
  const { writeFile } = await import('node:fs/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  stopProfile = async () => {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(process.env.BENCH_PROFILE, JSON.stringify(profile));
  };
}
process.on('SIGTERM', () => controller.abort());
// BENCH_OBSERVE=1: as an operator runs it in production, a JSON access line per request and
// metrics kept for /metrics; BENCH_OBSERVE=log or =metrics: one of the two. The lines are written
// as `serve` writes them to its standard output (cli/commands/operate/serve.ts): batched by the
// build's lineBatch, each batch one blocking write to a descriptor, here /dev/null so the bench
// measures the server's cost and not a reader's. A build without lineBatch (an older baseline)
// writes each line on its own, as its `serve` did.
let observe = {};
let flushLines = () => {};
const observed = process.env.BENCH_OBSERVE;
if (observed === '1' || observed === 'log') {
  const { openSync, writeSync } = await import('node:fs');
  const sink = openSync('/dev/null', 'w');
  // This build's lineBatch hands over bytes with their line ends; an older one text without the last.
  const writeBatch = (batch) => void writeSync(sink, typeof batch === 'string' ? `${batch}\n` : batch);
  const lines = lineBatch ? lineBatch(writeBatch) : { line: writeBatch, flush() {} };
  flushLines = lines.flush;
  observe.accessLog = accessLogger('json', lines.line);
}
if (observed === '1' || observed === 'metrics') observe.metrics = { token: 'bench-metrics-token-0123456789' };
await serve({
  ...observe,
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
flushLines();
await stopProfile();
process.exit(0);
