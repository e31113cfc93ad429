/**
 * The client's stream reader: the SSE parser on every way a stream can be cut and written, and
 * $watch against a node:http server that plays a stream's script (breaks, refusals, retry:),
 * checking what the client sends back (Authorization, Last-Event-ID) and when.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ComputeClientError,
  createComputeClient,
  SseLineTooLong,
  type SseMessage,
  SseParser,
  type WatchedEvent,
  type WatchStatus,
} from '../src/index.js';

function parse(chunks: (string | Uint8Array)[], maxLineLength?: number) {
  const messages: SseMessage[] = [];
  const retries: number[] = [];
  const comments: string[] = [];
  const parser = new SseParser(
    { message: (m) => messages.push(m), retry: (ms) => retries.push(ms), comment: (c) => comments.push(c) },
    maxLineLength ? { maxLineLength } : {},
  );
  for (const chunk of chunks) parser.push(chunk);
  parser.end();
  return { messages, retries, comments, lastEventId: parser.lastEventId };
}

describe('SseParser', () => {
  const stream =
    'retry: 1500\n: hello\n\nid: 1.0\nevent: site.created\ndata: {"a":1}\n\nid: 1.1\ndata: x\ndata: y\n\n';
  const expected = [
    { event: 'site.created', data: '{"a":1}', lastEventId: '1.0' },
    { event: 'message', data: 'x\ny', lastEventId: '1.1' },
  ];

  it('reads events, multi-line data, comments and retry', () => {
    const { messages, retries, comments } = parse([stream]);
    expect(messages).toEqual(expected);
    expect(retries).toEqual([1500]);
    expect(comments).toEqual(['hello']);
  });

  it('gives the same events whatever the line ends (CRLF, CR, LF) and wherever the chunks are cut', () => {
    for (const ending of ['\n', '\r\n', '\r']) {
      const text = stream.replace(/\n/g, ending);
      expect(parse([text]).messages, JSON.stringify(ending)).toEqual(expected);
      for (let cut = 1; cut < text.length; cut++) {
        const { messages, retries } = parse([text.slice(0, cut), text.slice(cut)]);
        expect(messages, `${JSON.stringify(ending)} cut at ${cut}`).toEqual(expected);
        expect(retries).toEqual([1500]);
      }
      // One character at a time.
      expect(parse([...text]).messages).toEqual(expected);
    }
  });

  it('decodes UTF-8 split across chunks, and drops a leading BOM', () => {
    const bytes = new TextEncoder().encode('\uFEFFdata: héllo €\n\n');
    const parts = Array.from(bytes, (byte) => new Uint8Array([byte]));
    expect(parse(parts).messages).toEqual([{ event: 'message', data: 'héllo €', lastEventId: '' }]);
  });

  it('follows the standard on the edges: no space, no colon, bad retry, NUL in id, unfinished frame', () => {
    const { messages, retries } = parse([
      'data:tight\n\ndata\n\nretry: 12a\nretry:\nid: a\u0000b\ndata: z\n\nevent: only\n\nid: 9.9\ndata: cut off',
    ]);
    expect(messages).toEqual([
      { event: 'message', data: 'tight', lastEventId: '' },
      { event: 'message', data: '', lastEventId: '' },
      { event: 'message', data: 'z', lastEventId: '' },
    ]);
    expect(retries).toEqual([]);
  });

  it('refuses a line longer than its limit, even one that never ends', () => {
    expect(() => parse(['data: ' + 'x'.repeat(100) + '\n\n'], 50)).toThrow(SseLineTooLong);
    expect(() => parse(['data: ', 'x'.repeat(30), 'x'.repeat(30)], 50)).toThrow(SseLineTooLong);
    expect(parse(['data: ' + 'x'.repeat(40) + '\n\n'], 50).messages).toHaveLength(1);
  });
});

type Script = (request: IncomingMessage, response: ServerResponse, count: number) => void;

describe('$watch', () => {
  let server: Server;
  let origin: string;
  let script: Script;
  const requests: IncomingMessage[] = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      requests.push(request);
      script(request, response, requests.length);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(
    () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  );

  const record = (n: number) => ({
    id: `evt_${n}`,
    position: `100:${n}`,
    type: 'site.created',
    tenantId: 'acme',
    subject: { type: 'site', id: `site_${n}` },
    data: {},
    actor: null,
    requestId: null,
    occurredAt: '2026-01-01T00:00:00.000Z',
  });
  const frame = (n: number) => `id: 100.${n}\nevent: site.created\ndata: ${JSON.stringify(record(n))}\n\n`;
  const open = (response: ServerResponse) =>
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  const client = () => createComputeClient({ baseURL: origin, token: 'bc_test_token', tenant: 'acme' });

  it('reads events with the client’s Authorization, resumes with Last-Event-ID after a break, and stops on abort', async () => {
    requests.length = 0;
    script = (_request, response, count) => {
      open(response);
      if (count === 1) {
        // Two events, the second split mid-line, then the connection breaks.
        response.write('retry: 10\n\n' + frame(1) + frame(2).slice(0, 20));
        setTimeout(() => response.write(frame(2).slice(20)), 20);
        setTimeout(() => response.destroy(), 60);
      } else response.write(frame(3));
    };
    const controller = new AbortController();
    const statuses: WatchStatus['state'][] = [];
    const seen: WatchedEvent[] = [];
    for await (const event of client().$watch({
      signal: controller.signal,
      types: ['site.*'],
      initialBackoffMs: 10,
      onStatus: (s) => statuses.push(s.state),
    })) {
      seen.push(event);
      if (seen.length === 3) controller.abort();
    }
    expect(seen.map((e) => e.cursor)).toEqual(['100.1', '100.2', '100.3']);
    expect(seen[0]).toEqual({ cursor: '100.1', ...record(1) });
    expect(requests[0]!.url).toBe('/api/compute/watch?tenantId=acme&types=site.*');
    expect(requests[0]!.headers.authorization).toBe('Bearer bc_test_token');
    expect(requests[0]!.headers['last-event-id']).toBeUndefined();
    expect(requests[1]!.headers['last-event-id']).toBe('100.2');
    expect(statuses).toEqual(['connecting', 'open', 'retrying', 'connecting', 'open', 'stopped']);
  });

  it('starts after --since in either form, at a path of its own', async () => {
    requests.length = 0;
    script = (_request, response) => {
      open(response);
      response.write(frame(7));
    };
    const controller = new AbortController();
    const handle = client().$watch({
      since: '100:6',
      path: '/watch',
      signal: controller.signal,
      onEvent: () => controller.abort(),
    });
    await handle.done;
    expect(requests[0]!.url).toBe('/watch?tenantId=acme');
    expect(requests[0]!.headers['last-event-id']).toBe('100.6');
  });

  it('backs off, doubling up to the cap, on failures; then a refusal stops it with the server’s code', async () => {
    requests.length = 0;
    const times: number[] = [];
    script = (_request, response, count) => {
      times.push(Date.now());
      if (count <= 4) {
        response.writeHead(503, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { code: 'UNAVAILABLE', message: 'down', requestId: 'r' } }));
      } else {
        response.writeHead(403, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { code: 'ACCESS_DENIED', message: 'no', requestId: 'r' } }));
      }
    };
    const delays: number[] = [];
    const watch = client().$watch({
      initialBackoffMs: 40,
      maxBackoffMs: 100,
      onStatus: (s) => s.state === 'retrying' && delays.push(s.delayMs!),
    });
    const iterator = watch[Symbol.asyncIterator]();
    const error = await iterator.next().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ComputeClientError);
    expect(error).toMatchObject({ code: 'ACCESS_DENIED', status: 403, message: 'no' });
    expect(delays).toHaveLength(4);
    // Ceilings 40, 80, 100, 100 with jitter between half and all of each.
    const ceilings = [40, 80, 100, 100];
    delays.forEach((delay, i) => {
      expect(delay).toBeGreaterThanOrEqual(ceilings[i]! / 2);
      expect(delay).toBeLessThanOrEqual(ceilings[i]!);
    });
  });

  it('stops on an event: error refusal sent while open, and retries after one that is not', async () => {
    requests.length = 0;
    script = (_request, response, count) => {
      open(response);
      if (count === 1) {
        response.write(frame(1));
        response.end('event: error\ndata: {"error":{"code":"UNAVAILABLE","message":"fell behind"}}\n\n');
      } else {
        response.write(frame(2));
        response.end('event: error\ndata: {"error":{"code":"UNAUTHENTICATED","message":"revoked"}}\n\n');
      }
    };
    const seen: string[] = [];
    let stoppedWith: ComputeClientError | undefined;
    const handle = client().$watch({
      initialBackoffMs: 5,
      onEvent: (e) => void seen.push(e.cursor),
      onStop: (e) => (stoppedWith = e),
    });
    await expect(handle.done).rejects.toMatchObject({ code: 'UNAUTHENTICATED', status: 401 });
    expect(stoppedWith?.code).toBe('UNAUTHENTICATED');
    expect(seen).toEqual(['100.1', '100.2']);
    expect(requests[1]!.headers['last-event-id']).toBe('100.1');
  });

  it('refuses bad options before connecting', async () => {
    requests.length = 0;
    const tooMany = Array.from({ length: 21 }, (_, i) => `a${i}.b`);
    await expect(client().$watch({ types: tooMany, onEvent: () => {} }).done).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(client().$watch({ since: 'yesterday', onEvent: () => {} }).done).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(requests).toHaveLength(0);
  });
});
