/**
 * `/metrics` (host/metrics.ts, docs/operations.md): a real `serve` on PostgreSQL answers the
 * Prometheus text format on a port of its own and, behind its bearer token, on the API's port; a
 * real parser reads it, and a reserve made over HTTP moves the request counter, the latency
 * histogram and the pool's reservation gauges. Labels come from closed sets, whatever clients send.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPostgresReachable } from '@better-compute/db/testing';
import parsePrometheus from 'parse-prometheus-text-format';
import { serve } from '../src/index.js';
import { createMetrics } from '../src/host/metrics.js';
import {
  ACME,
  addNode,
  createFleetDeployment,
  type FleetDeployment,
  l40sx4,
  seedPool,
} from './fleet-support.js';

const TOKEN = 'metrics-test-token-0123456789abcdef';

interface Family {
  name: string;
  type: string;
  metrics: {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    count?: string;
  }[];
}

function parse(text: string): Map<string, Family> {
  return new Map((parsePrometheus(text) as Family[]).map((family) => [family.name, family]));
}

/** The value of the sample of `name` whose labels include `labels`; 0 when there is none. */
function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const family = families.get(name);
  const sample = family?.metrics.find((m) =>
    Object.entries(labels).every(([key, value]) => m.labels?.[key] === value),
  );
  return sample ? Number(sample.value ?? sample.count) : 0;
}

/** A raw request, for what fetch will not send (NUL bytes, a huge header). */
function raw(url: string, path: string, headers: Record<string, string> = {}) {
  const { hostname, port } = new URL(url);
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, headers, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe.runIf(await isPostgresReachable())('metrics of a replica on PostgreSQL', () => {
  let d: FleetDeployment;
  let api = '';
  let metricsUrl = '';
  let poolId = '';
  const stop = new AbortController();
  let running: Promise<void>;

  beforeAll(async () => {
    d = await createFleetDeployment('postgres');
    ({ poolId } = await seedPool(d, 'metrics-pool'));
    await addNode(d, poolId, 'metrics-n1', l40sx4());
    const lines: string[] = [];
    let listening!: (url: string) => void;
    const ready = new Promise<string>((resolve) => (listening = resolve));
    running = serve({
      compute: d.compute,
      port: 0,
      roles: ['api'],
      signal: stop.signal,
      log: (line) => void lines.push(line),
      onListening: (url) => listening(url),
      metrics: { port: 0, token: TOKEN },
    });
    api = await Promise.race([ready, running.then(() => '')]);
    const said = lines.find((line) => line.startsWith('better-compute metrics at '));
    metricsUrl = said!.slice('better-compute metrics at '.length);
  }, 120_000);

  afterAll(async () => {
    stop.abort();
    await running;
    await d?.database.close();
  });

  let lastText = '';
  const scrape = async () => {
    const response = await fetch(metricsUrl);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    lastText = await response.text();
    return parse(lastText);
  };
  const histogramCount = (text: string, method: string) => {
    const line = text
      .split('\n')
      .find((l) => l.startsWith(`better_compute_api_request_duration_seconds_count{method="${method}"} `));
    return line ? Number(line.split(' ')[1]) : 0;
  };

  const reserve = (gpus: number) =>
    fetch(`${api}/api/compute/reservations/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACME}`, 'content-type': 'application/json' },
      body: JSON.stringify({ poolId, gpus, durationSeconds: 3600 }),
    });

  it('parses, and a reserve moves its request counter, its histogram and the pool’s gauges', async () => {
    const before = await scrape();
    const beforeText = lastText;
    expect(before.get('better_compute_api_requests_total')?.type).toBe('COUNTER');
    expect(before.get('better_compute_api_request_duration_seconds')?.type).toBe('HISTOGRAM');
    for (const gauge of [
      'better_compute_reservations',
      'better_compute_reservation_gpus',
      'better_compute_nodes',
      'better_compute_commands_open',
      'better_compute_node_sessions',
      'better_compute_workflows_open',
      'better_compute_webhook_deliveries_pending',
      'better_compute_webhook_delivery_lag_seconds',
      'better_compute_outbox_lag_seconds',
      'better_compute_jobs_lag_seconds',
      'better_compute_database_pool_connections',
    ])
      expect(before.get(gauge)?.type, gauge).toBe('GAUGE');
    expect(valueOf(before, 'better_compute_nodes', { pool: poolId, state: 'ready' })).toBe(1);
    expect(valueOf(before, 'better_compute_database_pool_connections', { state: 'max' })).toBeGreaterThan(0);

    const created = { method: 'reservations.create', code: 'OK' };
    const response = await reserve(3);
    expect(response.status).toBe(200);
    const after = await scrape();
    const afterText = lastText;
    expect(valueOf(after, 'better_compute_api_requests_total', created)).toBe(
      valueOf(before, 'better_compute_api_requests_total', created) + 1,
    );
    // The parser groups a histogram's samples only without labels: its lines are read as text.
    expect(histogramCount(afterText, 'reservations.create')).toBe(
      histogramCount(beforeText, 'reservations.create') + 1,
    );
    expect(afterText).toContain(
      `better_compute_api_request_duration_seconds_bucket{method="reservations.create",le="+Inf"} ${histogramCount(afterText, 'reservations.create')}`,
    );
    const active = { pool: poolId, state: 'active' };
    expect(valueOf(after, 'better_compute_reservations', active)).toBe(
      valueOf(before, 'better_compute_reservations', active) + 1,
    );
    expect(valueOf(after, 'better_compute_reservation_gpus', active)).toBe(
      valueOf(before, 'better_compute_reservation_gpus', active) + 3,
    );

    // A refusal is counted under its code; the pool has 4 GPUs and 3 are held.
    const refused = await fetch(`${api}/api/compute/reservations/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACME}`, 'content-type': 'application/json' },
      body: JSON.stringify({ poolId, gpus: 1, durationSeconds: 3600, nope: true }),
    });
    expect(refused.status).toBe(400);
    const third = await scrape();
    expect(
      valueOf(third, 'better_compute_api_requests_total', {
        method: 'reservations.create',
        code: 'INVALID_ARGUMENT',
      }),
    ).toBe(1);
  });

  it('keeps labels to closed sets: unknown paths share one method label', async () => {
    for (let i = 0; i < 5; i++) await fetch(`${api}/api/compute/no-such-${i}-${'x'.repeat(i * 50)}`);
    const text = await (await fetch(metricsUrl)).text();
    expect(text).not.toContain('no-such-');
    const families = parse(text);
    expect(
      valueOf(families, 'better_compute_api_requests_total', { method: 'unrouted', code: 'NOT_FOUND' }),
    ).toBeGreaterThanOrEqual(5);
  });

  it('on the API’s port, answers only a scrape that carries the token', async () => {
    expect((await fetch(`${api}/metrics`)).status).toBe(401);
    const wrong = await fetch(`${api}/metrics`, { headers: { authorization: 'Bearer not-the-token' } });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).not.toContain(TOKEN);
    expect((await fetch(`${api}/metrics`, { headers: { authorization: `Basic ${TOKEN}` } })).status).toBe(
      401,
    );
    const right = await fetch(`${api}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(right.status).toBe(200);
    expect(parse(await right.text()).has('better_compute_api_requests_total')).toBe(true);
    expect((await fetch(`${api}/metrics`, { method: 'POST' })).status).toBe(405);
    // Hostile headers and paths: never a 5xx.
    expect((await raw(api, '/metrics', { authorization: `Bearer ${'x'.repeat(8000)}` })).status).toBe(401);
    expect((await raw(api, '/metrics', { authorization: `Bearer ${TOKEN}\t` })).status).toBe(200);
    expect((await raw(api, '/metrics', { authorization: `Bearer ${TOKEN} extra` })).status).toBe(401);
    expect((await raw(metricsUrl, '/metrics%00')).status).toBe(404);
    expect((await raw(metricsUrl, '/other')).status).toBe(404);
  });
});

describe('the exposition', () => {
  it('counts RATE_LIMITED refusals by method, and quotes label values', async () => {
    const metrics = createMetrics(async () => [
      { name: 'pools_seen', help: 'a test gauge', samples: [{ labels: { pool: 'a"b\\c\nd' }, value: 2 }] },
    ]);
    const entry = {
      time: new Date().toISOString(),
      requestId: 'req_1',
      httpMethod: 'POST',
      path: '/api/compute/reservations/create',
      method: 'reservations.create',
      tenant: 'acme',
      principalKind: 'person',
      status: 429,
      code: 'RATE_LIMITED',
      durationMs: 3,
    };
    metrics.observe(entry);
    metrics.observe({ ...entry, code: 'SOMETHING_A_CLIENT_MADE_UP', status: 500 });
    const families = parse(await metrics.render());
    expect(valueOf(families, 'better_compute_rate_limited_total', { method: 'reservations.create' })).toBe(1);
    expect(
      valueOf(families, 'better_compute_api_requests_total', {
        method: 'reservations.create',
        code: 'OTHER',
      }),
    ).toBe(1);
    expect(valueOf(families, 'better_compute_pools_seen', { pool: 'a"b\\c\nd' })).toBe(2);
  });
});
