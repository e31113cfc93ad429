import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ComputeError } from '@better-compute/core';
import { ComputeClientError, createComputeClient, methodRoute, resolveEndpoint } from '../src/index.js';

interface Seen {
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

let server: Server;
let origin: string;
const seen: Seen[] = [];
let answer: (
  seen: Seen,
  count: number,
) => { status: number; body: unknown; headers?: Record<string, string> };

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const entry: Seen = {
        path: request.url ?? '',
        headers: request.headers,
        body: JSON.parse(Buffer.concat(chunks).toString() || 'null'),
      };
      seen.push(entry);
      const { status, body, headers } = answer(entry, seen.length);
      response.writeHead(status, { 'content-type': 'application/json', ...headers });
      response.end(typeof body === 'string' ? body : JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  seen.length = 0;
  answer = () => ({
    status: 200,
    body: { data: { product: 'better-compute', version: '0.1.0', apiVersion: 1 } },
  });
});

describe('createComputeClient', () => {
  it('posts a method to {origin}/api/compute/{group}/{name} with a bearer token and a request id', async () => {
    const client = createComputeClient({ baseURL: origin, token: 'biam_test' });
    const result = await client.call('system.version', {});
    expect(result).toEqual({ product: 'better-compute', version: '0.1.0', apiVersion: 1 });
    expect(seen[0]!.path).toBe('/api/compute/system/version');
    expect(seen[0]!.headers.authorization).toBe('Bearer biam_test');
    expect(seen[0]!.headers['x-request-id']).toMatch(/^req_[0-9a-f]{32}$/);
    expect(seen[0]!.body).toEqual({});
  });

  it('calls through a group proxy, typed from the method table', async () => {
    const client = createComputeClient({ baseURL: origin });
    const result = await client.system.version({});
    expect(result.version).toBe('0.1.0');
    expect(seen[0]!.headers.authorization).toBeUndefined();
  });

  it('uses a full endpoint as it is', async () => {
    const client = createComputeClient({ baseURL: `${origin}/custom/compute/` });
    await client.call('system.version', {});
    expect(seen[0]!.path).toBe('/custom/compute/system/version');
  });

  it('fills tenantId of a tenant-scoped method from tenant, and leaves a given one', async () => {
    answer = () => ({ status: 200, body: { data: { items: [], nextCursor: null } } });
    const client = createComputeClient({ baseURL: origin, token: 't', tenant: 'acme' });
    await client.call('events.list', { limit: 5 });
    await client.call('events.list', { tenantId: 'other', limit: 5 });
    await client.call('system.routes', {});
    expect(seen.map((s) => s.body)).toEqual([
      { tenantId: 'acme', limit: 5 },
      { tenantId: 'other', limit: 5 },
      {},
    ]);
  });

  it('maps a plugin method to /plugins/ID/GROUP/METHOD', async () => {
    const client = createComputeClient({ baseURL: origin, token: 't' });
    await client.request('plugins.acme-billing.invoices.list', { a: 1 });
    expect(seen[0]!.path).toBe('/api/compute/plugins/acme-billing/invoices/list');
    expect(methodRoute('system.whoami')).toBe('/system/whoami');
    expect(() => methodRoute('system')).toThrow(/not a method name/);
    expect(() => methodRoute('a.b.c')).toThrow(/not a method name/);
  });

  it('throws ComputeClientError with the server code, status, request id and details', async () => {
    answer = () => ({
      status: 403,
      body: {
        error: {
          code: 'ACCESS_DENIED',
          message: 'no binding allows it',
          details: { action: 'compute:events:read' },
          requestId: 'req_server',
        },
      },
    });
    const client = createComputeClient({ baseURL: origin, token: 't', tenant: 'acme' });
    const error = await client.call('events.list', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ComputeClientError);
    expect(error).toBeInstanceOf(ComputeError);
    expect(error).toMatchObject({
      code: 'ACCESS_DENIED',
      message: 'no binding allows it',
      status: 403,
      requestId: 'req_server',
      method: 'events.list',
      details: { action: 'compute:events:read' },
    });
  });

  it('keeps the server’s hint on the error, so the caller prints the server’s advice', async () => {
    answer = () => ({
      status: 409,
      body: {
        error: {
          code: 'CONFLICT',
          message: 'this idempotency key was used with a different input',
          hint: 'Use a new --key for a different request, or repeat the first request exactly.',
          requestId: 'req_server',
        },
      },
    });
    const client = createComputeClient({ baseURL: origin, token: 't', tenant: 'acme' });
    const error = await client.call('sites.create', { name: 'x' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ComputeClientError);
    expect(error).toMatchObject({
      code: 'CONFLICT',
      hint: 'Use a new --key for a different request, or repeat the first request exactly.',
      requestId: 'req_server',
    });
    answer = () => ({ status: 404, body: { error: { code: 'NOT_FOUND', message: 'gone', requestId: 'r' } } });
    expect(await client.call('sites.create', { name: 'x' }).catch((e: ComputeClientError) => e.hint)).toBe(
      undefined,
    );
  });

  it('retries once after a short RATE_LIMITED, with the same request id', async () => {
    answer = (_, count) =>
      count === 1
        ? {
            status: 429,
            body: {
              error: {
                code: 'RATE_LIMITED',
                message: 'slow down',
                details: { retryAfterMs: 50 },
                requestId: 'r',
              },
            },
          }
        : { status: 200, body: { data: { ok: true } } };
    const client = createComputeClient({ baseURL: origin });
    await expect(client.request('system.version', {})).resolves.toEqual({ ok: true });
    expect(seen).toHaveLength(2);
    expect(seen[1]!.headers['x-request-id']).toBe(seen[0]!.headers['x-request-id']);
  });

  it('retries only once, and not after a long RATE_LIMITED', async () => {
    answer = () => ({
      status: 429,
      body: {
        error: { code: 'RATE_LIMITED', message: 'slow down', details: { retryAfterMs: 10 }, requestId: 'r' },
      },
    });
    const client = createComputeClient({ baseURL: origin });
    await expect(client.request('system.version', {})).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(seen).toHaveLength(2);
    seen.length = 0;
    answer = () => ({
      status: 429,
      body: {
        error: {
          code: 'RATE_LIMITED',
          message: 'slow down',
          details: { retryAfterMs: 5000 },
          requestId: 'r',
        },
      },
    });
    await expect(client.request('system.version', {})).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(seen).toHaveLength(1);
  });

  it('answers INVALID_RESPONSE for a body without the envelope, UNAVAILABLE when nothing answers', async () => {
    answer = () => ({ status: 200, body: '<html>hello</html>' });
    const client = createComputeClient({ baseURL: origin });
    await expect(client.request('system.version', {})).rejects.toMatchObject({
      code: 'INVALID_RESPONSE',
      status: 200,
    });
    const closed = createComputeClient({ baseURL: 'http://127.0.0.1:1' });
    await expect(closed.request('system.version', {})).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });
});

describe('the URL rules', () => {
  it.each([
    ['https://compute.example.com', 'https://compute.example.com/api/compute'],
    ['https://compute.example.com/', 'https://compute.example.com/api/compute'],
    ['https://host/custom/compute', 'https://host/custom/compute'],
    ['https://host/custom/compute/', 'https://host/custom/compute'],
    ['http://localhost:8080', 'http://localhost:8080/api/compute'],
    ['http://127.0.0.1:8080', 'http://127.0.0.1:8080/api/compute'],
    ['http://[::1]:8080', 'http://[::1]:8080/api/compute'],
    ['http://compute.localhost', 'http://compute.localhost/api/compute'],
  ])('%s → %s', (given, endpoint) => {
    expect(resolveEndpoint(given).href).toBe(endpoint);
  });

  it.each([
    'http://compute.example.com',
    'http://10.0.0.5:8080',
    'http://localhost.example.com',
    'ftp://host',
    'not a url',
    'https://user:pw@host',
  ])('refuses %s with INVALID_ARGUMENT before any request', async (url) => {
    expect(() => createComputeClient({ baseURL: url })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });
});
