#!/usr/bin/env node
// bench/mcp: what a tool call of the MCP server adds to the API call it makes. The same call,
// system.whoami as an agent, made directly (POST /api/compute/system/whoami) and as an MCP tool call
// over Streamable HTTP (POST /api/compute/mcp, tools/call system_whoami: a fresh server and
// transport per request, then compute's own dispatch), one call at a time over one keep-alive
// connection, both by plain fetch so the client's cost is the same. The server runs in this
// process (the real Node adapter, PGlite in memory); after a warm-up of each side they are
// measured in alternating slices. Prints each side's latency, the added ms per call (goal < 2 ms),
// the ratio, and CPU per call (process.cpuUsage: server and client together, the client's share
// being the same on both sides).
// Run: npm run build && node bench/mcp.mjs [calls per slice=500] [rounds=4]
// Env: BENCH_WARMUP (calls per side before measuring, 500), BENCH_COMPUTE_DIST.
import { pathToFileURL } from 'node:url';

const perSlice = Number(process.argv[2] ?? 500);
const rounds = Number(process.argv[3] ?? 4);
const warmup = Number(process.env.BENCH_WARMUP ?? 500);
const dist = process.env.BENCH_COMPUTE_DIST
  ? pathToFileURL(process.env.BENCH_COMPUTE_DIST).href
  : new URL('../packages/better-compute/dist/index.js', import.meta.url).href;
const { betterCompute, serve } = await import(dist);

const compute = await betterCompute({ database: 'pglite:memory', rateLimit: false }, { log: () => {} });
await compute.migrate();
const iam = compute.embeddedIam;
const dev = await iam.bootstrapDev();
const agent = await iam.createAgent({
  tenantId: 'acme',
  displayName: 'bench agent',
  actingFor: dev.acmeMember.principalId,
});
await iam.createBinding({ tenantId: 'acme', role: 'member', principalId: agent.id });
const { key } = await iam.createApiKey(agent.id, { name: 'bench' });

const stop = new AbortController();
let url = '';
const serving = serve({
  compute,
  port: 0,
  roles: ['api'],
  signal: stop.signal,
  log: () => {},
  onListening: (u) => (url = u),
});
while (!url) await new Promise((resolve) => setTimeout(resolve, 10));

const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
let id = 0;
const sides = [
  {
    label: 'direct system.whoami',
    async call() {
      const response = await fetch(`${url}/api/compute/system/whoami`, {
        method: 'POST',
        headers,
        body: '{}',
      });
      const answer = await response.json();
      if (!answer.data) throw new Error(JSON.stringify(answer));
    },
  },
  {
    label: 'MCP tools/call system_whoami',
    async call() {
      const response = await fetch(`${url}/api/compute/mcp`, {
        method: 'POST',
        headers: {
          ...headers,
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: ++id,
          method: 'tools/call',
          params: { name: 'system_whoami', arguments: {} },
        }),
      });
      const answer = await response.json();
      if (!answer.result?.structuredContent) throw new Error(JSON.stringify(answer));
    },
  },
];

try {
  for (const side of sides) {
    for (let i = 0; i < warmup; i++) await side.call();
    side.latencies = [];
    side.cpuMicros = 0;
  }
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      const cpu = process.cpuUsage();
      for (let i = 0; i < perSlice; i++) {
        const started = performance.now();
        await side.call();
        side.latencies.push(performance.now() - started);
      }
      const used = process.cpuUsage(cpu);
      side.cpuMicros += used.user + used.system;
    }
  }
  const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  for (const side of sides) {
    side.latencies.sort((a, b) => a - b);
    side.mean = side.latencies.reduce((sum, ms) => sum + ms, 0) / side.latencies.length;
    side.cpuPerCall = side.cpuMicros / side.latencies.length;
    console.log(
      `${side.label.padEnd(30)} mean ${side.mean.toFixed(3)} ms  p50 ${pct(side.latencies, 50).toFixed(3)} ms  ` +
        `p99 ${pct(side.latencies, 99).toFixed(3)} ms  CPU per call ${side.cpuPerCall.toFixed(0)} µs  (${side.latencies.length} calls)`,
    );
  }
  const [direct, mcp] = sides;
  const added = mcp.mean - direct.mean;
  console.log(
    `added per tool call: ${added.toFixed(3)} ms (goal < 2 ms) ${added < 2 ? 'met' : 'NOT met'}; ` +
      `ratio ${(mcp.mean / direct.mean).toFixed(2)}x; added CPU per call ${(mcp.cpuPerCall - direct.cpuPerCall).toFixed(0)} µs`,
  );
} finally {
  stop.abort();
  await serving;
  await compute.close();
}
