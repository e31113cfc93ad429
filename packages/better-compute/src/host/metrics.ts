/**
 * `/metrics` in the Prometheus text format (docs/operations.md, docs/decisions/metrics.md): this
 * replica's API requests by method and code with latency histograms and rate-limit refusals, from
 * the same per-request hook as the access line; and, read at each scrape, the deployment's gauges
 * (workers/gauges.ts). Served on its own port, or on the API's port behind a bearer token: never
 * open on the public API.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import { type Answer, isErrorCode } from '@better-compute/core';
import type { GaugeFamily } from '../modules/define-module.js';
import type { AccessEntry } from './access-log.js';

export const METRICS_PATH = '/metrics';
const PREFIX = 'better_compute_';
/** Prometheus' default buckets, in seconds: API calls take milliseconds to a few seconds. */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

interface MethodSeries {
  /** Requests by code. */
  codes: Map<string, number>;
  /** Cumulative counts per bucket, then the +Inf count is the sum of codes. */
  buckets: number[];
  sum: number;
  count: number;
}

export interface Metrics {
  /** Counts one API request: the access hook's entry (host/node-adapter.ts). */
  observe(entry: AccessEntry): void;
  /** The exposition: this replica's counters, then the deployment's gauges read now. */
  render(): Promise<string>;
}

/** The method label: a route's method, `iam` for IAM's routes, else one bucket for all the rest. */
function methodLabel(entry: AccessEntry): string {
  if (entry.method) return entry.method;
  return entry.path === '/api/iam' || entry.path.startsWith('/api/iam/') ? 'iam' : 'unrouted';
}

/** The code label from a closed set, so no client can grow the series without bound. */
function codeLabel(code: string | null): string {
  if (code === 'OK' || code === 'CLIENT_CLOSED') return code;
  return isErrorCode(code) ? code : 'OTHER';
}

/** A label value as the text format quotes it. */
function quoted(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`;
}

function labelText(labels: Record<string, string>): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return '';
  return `{${entries.map(([name, value]) => `${name}=${quoted(value)}`).join(',')}}`;
}

function number(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  return String(value);
}

export function createMetrics(gauges: () => Promise<GaugeFamily[]>): Metrics {
  const series = new Map<string, MethodSeries>();
  const limited = new Map<string, number>();

  function observe(entry: AccessEntry): void {
    const method = methodLabel(entry);
    const code = codeLabel(entry.code);
    let one = series.get(method);
    if (!one) {
      one = { codes: new Map(), buckets: BUCKETS.map(() => 0), sum: 0, count: 0 };
      series.set(method, one);
    }
    one.codes.set(code, (one.codes.get(code) ?? 0) + 1);
    const seconds = entry.durationMs / 1000;
    for (let i = 0; i < BUCKETS.length; i++) if (seconds <= BUCKETS[i]!) one.buckets[i]!++;
    one.sum += seconds;
    one.count++;
    if (code === 'RATE_LIMITED') limited.set(method, (limited.get(method) ?? 0) + 1);
  }

  function counters(): string[] {
    const lines: string[] = [];
    const methods = [...series.keys()].sort();
    lines.push(`# HELP ${PREFIX}api_requests_total API requests this replica answered, by method and code`);
    lines.push(`# TYPE ${PREFIX}api_requests_total counter`);
    for (const method of methods)
      for (const [code, count] of [...series.get(method)!.codes].sort())
        lines.push(`${PREFIX}api_requests_total${labelText({ method, code })} ${count}`);
    lines.push(`# HELP ${PREFIX}api_request_duration_seconds How long API requests took, by method`);
    lines.push(`# TYPE ${PREFIX}api_request_duration_seconds histogram`);
    for (const method of methods) {
      const one = series.get(method)!;
      BUCKETS.forEach((le, i) =>
        lines.push(
          `${PREFIX}api_request_duration_seconds_bucket${labelText({ method, le: String(le) })} ${one.buckets[i]}`,
        ),
      );
      lines.push(
        `${PREFIX}api_request_duration_seconds_bucket${labelText({ method, le: '+Inf' })} ${one.count}`,
      );
      lines.push(`${PREFIX}api_request_duration_seconds_sum${labelText({ method })} ${number(one.sum)}`);
      lines.push(`${PREFIX}api_request_duration_seconds_count${labelText({ method })} ${one.count}`);
    }
    lines.push(`# HELP ${PREFIX}rate_limited_total API requests refused with RATE_LIMITED, by method`);
    lines.push(`# TYPE ${PREFIX}rate_limited_total counter`);
    for (const [method, count] of [...limited].sort())
      lines.push(`${PREFIX}rate_limited_total${labelText({ method })} ${count}`);
    return lines;
  }

  async function render(): Promise<string> {
    const lines = counters();
    for (const family of await gauges()) {
      const name = `${PREFIX}${family.name}`;
      lines.push(`# HELP ${name} ${family.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`);
      lines.push(`# TYPE ${name} gauge`);
      for (const sample of family.samples)
        lines.push(`${name}${labelText(sample.labels)} ${number(sample.value)}`);
    }
    return `${lines.join('\n')}\n`;
  }

  return { observe, render };
}

/** Whether `header` is `Bearer <token>`, compared in constant time. */
function bearerMatches(header: string | null, token: string): boolean {
  const given = header?.startsWith('Bearer ') ? header.slice('Bearer '.length) : null;
  if (given === null) return false;
  // Digests first, so the comparison takes the same time whatever the lengths.
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b);
}

/**
 * The answer to a request for `/metrics`: the exposition for GET or HEAD, when `token` is null (a
 * port of its own) or the request carries it as a bearer token; 401 otherwise.
 */
export async function metricsAnswer(
  metrics: Metrics,
  request: { method: string; authorization: string | null },
  token: string | null,
): Promise<Answer> {
  const headers = { 'content-type': METRICS_CONTENT_TYPE, 'cache-control': 'no-store' };
  if (request.method !== 'GET' && request.method !== 'HEAD')
    return { status: 405, headers: { ...headers, allow: 'GET, HEAD' }, body: 'use GET\n' };
  if (token !== null && !bearerMatches(request.authorization, token))
    return {
      status: 401,
      headers: { ...headers, 'www-authenticate': 'Bearer realm="metrics"' },
      body: 'a bearer token is needed: the value of BETTER_COMPUTE_METRICS_TOKEN\n',
    };
  return { status: 200, headers, body: await metrics.render() };
}
