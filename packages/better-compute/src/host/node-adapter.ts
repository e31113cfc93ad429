/**
 * A thin node:http adapter. Compute's own routes go through `dispatch` straight from the socket's
 * message, with no Request or Response objects in between (they cost more than the rest of a
 * small call); everything else (IAM's routes) goes through the web-standard handler. Bodies are
 * read up to the handler's limit and refused past it. Pages given beside the API (the web console
 * under `dev`) answer the paths that are not the API's; the API's paths never reach them. The
 * probes (`/healthz`, `/readyz`) answer before anything else, and each API request may leave one
 * access line (access-log.ts).
 */
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { Duplex } from 'node:stream';
import {
  type Answer,
  BODY_LIMIT_BYTES,
  ComputeError,
  errorAnswer,
  payloadTooLarge,
  requestIdFrom,
} from '@better-compute/core';
import type { ComputeInstance } from '../types.js';
import { type AccessEntry, AccessNote, envelopeCode, loggablePath, OpenNotes } from './access-log.js';
import { type ClientAddressOf, configuredClientAddress } from './client-address.js';
import type { Probes } from './health.js';
import { type Metrics, METRICS_PATH, metricsAnswer } from './metrics.js';
import { directOf, type DirectStream } from '../live/direct.js';

/**
 * The body, up to `limit`. Read from the message's events rather than its async iterator: a small
 * body is usually all there once the handler asks, and the iterator's machinery (a promise and
 * stream bookkeeping per chunk) cost more than the rest of reading it. Past the limit the message
 * is destroyed, as breaking out of the iterator did, so the rest is never read.
 */
function readBody(incoming: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = incoming.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(payloadTooLarge(limit));
  // A client that left before the handler asked: no event will come any more.
  if (incoming.destroyed && !incoming.readableEnded)
    return Promise.reject(
      Object.assign(new Error('the client closed the request before its body ended'), { code: 'ABORT_ERR' }),
    );
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onError);
      incoming.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop();
        incoming.destroy();
        return reject(payloadTooLarge(limit));
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      stop();
      reject(error);
    };
    // The client left before the body's end: what the iterator reported as a premature close.
    const onClose = () => {
      stop();
      reject(
        Object.assign(new Error('the client closed the request before its body ended'), {
          code: 'ABORT_ERR',
        }),
      );
    };
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('close', onClose);
  });
}

function headerOf(incoming: IncomingMessage, name: string): string | null {
  const value = incoming.headers[name];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

function toRequest(incoming: IncomingMessage, body: Buffer, origin: string, signal: AbortSignal): Request {
  const headers = new Headers();
  for (let i = 0; i < incoming.rawHeaders.length; i += 2)
    headers.append(incoming.rawHeaders[i]!, incoming.rawHeaders[i + 1]!);
  const init: RequestInit = { method: incoming.method ?? 'GET', headers, signal };
  if (body.length > 0) init.body = new Uint8Array(body);
  return new Request(new URL(incoming.url ?? '/', origin), init);
}

const asText = (body: Buffer) => body.toString('utf8');

/** What the access line of a request learns as the request goes (null: no access log). */
type Seen = AccessNote | null;

/** Writes an answer whole; its access line ends with it (a client already gone is CLIENT_CLOSED). */
function writeAnswer(answer: Answer, outgoing: ServerResponse, seen: Seen = null): void {
  const gone = outgoing.destroyed;
  outgoing.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) });
  outgoing.end(answer.body);
  if (seen) {
    seen.requestId = answer.headers['x-request-id'] ?? null;
    seen.code = envelopeCode(answer.status, answer.body);
    seen.end(gone ? null : answer.status);
  }
}

async function writeResponse(response: Response, outgoing: ServerResponse, seen: Seen): Promise<void> {
  if (seen) {
    seen.requestId = response.headers.get('x-request-id');
    seen.code = response.status < 400 ? 'OK' : null;
  }
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, key) => {
    if (key !== 'set-cookie') headers[key] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers['set-cookie'] = cookies;
  const direct = directOf(response.body);
  if (direct) return streamDirect(response.status, headers, direct, outgoing);
  if (response.body && headers['content-type']?.toString().startsWith('text/event-stream'))
    return streamBody(response.status, headers, response.body, outgoing);
  const body = Buffer.from(await response.arrayBuffer());
  if (seen && response.status >= 400) seen.code = envelopeCode(response.status, body);
  outgoing.writeHead(response.status, { ...headers, 'content-length': body.length });
  outgoing.end(body);
}

/**
 * A stream the handler lets a host take over (live/direct.ts): its bytes are written to the
 * connection as they are produced, with no web stream between. Flow control is the stream's own:
 * it reads the connection's backlog and ends itself when the client falls too far behind.
 */
function streamDirect(
  status: number,
  headers: Record<string, string | string[]>,
  direct: DirectStream,
  outgoing: ServerResponse,
): void {
  outgoing.socket?.setNoDelay(true);
  // As streamBody: the connection closes with the stream, never left as an idle keep-alive one.
  outgoing.writeHead(status, { ...headers, connection: 'close' });
  outgoing.flushHeaders();
  outgoing.once('close', () => direct.cancel());
  direct.attach({
    write(chunk) {
      if (!outgoing.destroyed) outgoing.write(chunk);
    },
    get backlog() {
      return outgoing.writableLength;
    },
    end() {
      if (!outgoing.destroyed) outgoing.end();
    },
  });
}

/**
 * A stream's body, chunk by chunk as it is produced: no buffering (Nagle off, headers sent at
 * once), and the reader cancelled when the client goes away.
 */
async function streamBody(
  status: number,
  headers: Record<string, string | string[]>,
  body: ReadableStream<Uint8Array>,
  outgoing: ServerResponse,
): Promise<void> {
  outgoing.socket?.setNoDelay(true);
  // A stream holds its connection for its whole life; once it ends the connection closes too, so a
  // server shutting down is not kept waiting by it as an idle keep-alive connection.
  outgoing.writeHead(status, { ...headers, connection: 'close' });
  outgoing.flushHeaders();
  const reader = body.getReader();
  const gone = () => void reader.cancel().catch(() => {});
  outgoing.once('close', gone);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!outgoing.write(value)) {
        // The socket's buffer is full: wait for it to drain (or for the client to leave).
        await new Promise<void>((resolve) => {
          const resume = () => {
            outgoing.off('drain', resume);
            outgoing.off('close', resume);
            resolve();
          };
          outgoing.on('drain', resume);
          outgoing.on('close', resume);
        });
      }
      if (outgoing.destroyed) break;
    }
  } finally {
    outgoing.off('close', gone);
    if (!outgoing.destroyed) outgoing.end();
  }
}

/** The origin a request was addressed to, or null for a Host header no URL can hold. */
function parsedOrigin(host: string | undefined): string | null {
  // A Host with a path, a user, a query or spaces in it is no host: `a/b`, `u@h`, `h?x`.
  if (host !== undefined && /[/?#@\\\s]/.test(host)) return null;
  try {
    return new URL(`http://${host ?? 'localhost'}`).origin;
  } catch {
    return null;
  }
}

/**
 * `parsedOrigin`, remembering its last answer: a replica's clients address it by one or a few
 * names, and parsing a URL per request costs more than the rest of the routing.
 */
function originReader(): (host: string | undefined) => string | null {
  let lastHost: string | undefined;
  let lastOrigin: string | null = null;
  let known = false;
  return (host) => {
    if (known && host === lastHost) return lastOrigin;
    lastOrigin = parsedOrigin(host);
    lastHost = host;
    known = true;
    return lastOrigin;
  };
}

function badHost(requestId: string): Answer {
  return errorAnswer(
    new ComputeError('INVALID_ARGUMENT', 'the Host header is not a host name with an optional port', {
      hint: 'Send the server’s host name, such as compute.example.com or 127.0.0.1:8080.',
    }),
    requestId,
  );
}

/** What the access line says of one of compute's routes: its method, and its path as logged. */
interface RoutedPath {
  method: string;
  path: string;
}

/**
 * The API method each of compute's paths routes to, with the path as the access line writes it
 * (loggablePath), both made once: the table is fixed when the deployment is made.
 */
function routedPaths(
  compute: { routes?: ComputeInstance['routes'] },
  basePath: string,
): ReadonlyMap<string, RoutedPath> {
  return new Map(
    (compute.routes?.() ?? []).map((route) => {
      const path = `${basePath}${route.path}`;
      return [path, { method: route.method, path: loggablePath(path) }];
    }),
  );
}

/**
 * A call as this host makes it: with `noteCaller`, which the pipeline calls once it knows the
 * tenant and the caller's kind (for the access line; it is never given a credential).
 */
type NotedCall = Parameters<ComputeInstance['dispatch']>[0] & {
  noteCaller?: (caller: { tenantId: string; principalKind: string | null }) => void;
};

/** Pages served on the API's origin, such as the web console's (apps/console/lib/mount.mjs). */
export interface PageRoutes {
  /** The listener for a path outside the API's, or null to leave it to the API (a 404 there). */
  route(pathname: string): RequestListener | null;
  /** Takes an upgrade of its own (Next.js's hot reload) and answers true; false leaves it to the API. */
  upgrade?(request: IncomingMessage, socket: Duplex, head: Buffer): boolean;
}

/**
 * Whether a path is the API's: anything under /api/ (compute's routes at the default base path,
 * Better IAM's at /api/iam), under a configured base path, or an event stream's path.
 */
function isApiPath(pathname: string, config: Pick<ComputeInstance['config'], 'basePath' | 'live'>): boolean {
  if (pathname === '/api' || pathname.startsWith('/api/')) return true;
  const { basePath } = config;
  if (basePath && (pathname === basePath || pathname.startsWith(`${basePath}/`))) return true;
  return (config.live?.paths ?? ['/watch']).includes(pathname);
}

export function createNodeServer(
  compute: Pick<ComputeInstance, 'dispatch'> & {
    /** The web-standard handler, told the client's address (ComputeHandler's `client`). */
    handler(request: Request, client?: { clientAddress?: string | null }): Promise<Response>;
    live?: ComputeInstance['live'];
    config?: Pick<ComputeInstance['config'], 'basePath' | 'live' | 'rateLimit'>;
    routes?: ComputeInstance['routes'];
  },
  options: {
    pages?: PageRoutes | undefined;
    clientAddress?: ClientAddressOf | undefined;
    /** `/healthz` and `/readyz` (health.ts); without them those paths are the API's (a 404). */
    probes?: Probes | undefined;
    /** Told one entry per API request once its answer is written or its client has left. */
    accessLog?: ((entry: AccessEntry) => void) | undefined;
    /** `/metrics` on this port, behind its bearer token (metrics.ts); without it the path is the API's. */
    metrics?: { metrics: Metrics; token: string } | undefined;
  } = {},
): Server {
  const { pages, probes, accessLog, metrics } = options;
  // Without a configuration (test doubles), the API is /api/ and /watch, the defaults.
  const config = compute.config ?? { basePath: '' };
  // Read once, when the server is made: a trusted proxy that is no address stops it here.
  const clientAddressOf = options.clientAddress ?? configuredClientAddress(config);
  const routed = accessLog ? routedPaths(compute, config.basePath) : undefined;
  const openNotes = accessLog ? new OpenNotes() : null;
  const originOf = originReader();
  const server = createServer((incoming, outgoing) => {
    const rawUrl = incoming.url ?? '/';
    const query = rawUrl.indexOf('?');
    const pathname = query === -1 ? rawUrl : rawUrl.slice(0, query);
    // Before the Host check: a probe is answered whatever name the prober addressed the replica by.
    const probe = probes?.answer(incoming.method ?? 'GET', pathname);
    if (probe) return void probe.then((answer) => writeAnswer(answer, outgoing));
    if (metrics && pathname === METRICS_PATH) {
      const request = {
        method: incoming.method ?? 'GET',
        authorization: headerOf(incoming, 'authorization'),
      };
      return void metricsAnswer(metrics.metrics, request, metrics.token).then(
        (answer) => writeAnswer(answer, outgoing),
        () => writeAnswer({ status: 503, headers: {}, body: 'the gauges could not be read\n' }, outgoing),
      );
    }
    if (pages && !isApiPath(pathname, config)) {
      const page = pages.route(pathname);
      if (page) return void page(incoming, outgoing);
    }
    const route = accessLog ? routed!.get(pathname) : undefined;
    const seen: Seen = accessLog
      ? new AccessNote(
          accessLog,
          incoming.method ?? 'GET',
          route ? route.path : loggablePath(pathname),
          route ? route.method : null,
        )
      : null;
    if (seen) openNotes!.track(seen, outgoing);
    const origin = originOf(incoming.headers.host);
    if (origin === null)
      return writeAnswer(badHost(requestIdFrom(headerOf(incoming, 'x-request-id'))), outgoing, seen);
    let body: Promise<Buffer> | undefined;
    const readOnce = (limit: number) => (body ??= readBody(incoming, limit));
    // Found when first asked (a public method under a rate limit, IAM's routes): most calls never do.
    let clientAddress: string | null | undefined;
    const addressOnce = () =>
      clientAddress === undefined ? (clientAddress = clientAddressOf(incoming)) : clientAddress;
    void (async () => {
      try {
        const call: NotedCall = {
          method: incoming.method ?? 'GET',
          pathname,
          origin,
          header: (name) => headerOf(incoming, name),
          readBody: (limit) => readOnce(limit).then(asText),
          get clientAddress() {
            return addressOnce();
          },
        };
        if (seen)
          call.noteCaller = (caller) => {
            seen.tenant = caller.tenantId;
            seen.principalKind = caller.principalKind;
          };
        const answer = await compute.dispatch(call);
        if (answer) return writeAnswer(answer, outgoing, seen);
        const left = new AbortController();
        // The handler's answer may be a stream: its access line ends when the connection does.
        outgoing.once('close', () => {
          left.abort();
          seen?.end(outgoing.headersSent ? outgoing.statusCode : null);
        });
        const request = toRequest(incoming, await readOnce(BODY_LIMIT_BYTES * 16), origin, left.signal);
        await writeResponse(await compute.handler(request, { clientAddress: addressOnce() }), outgoing, seen);
      } catch (error) {
        const tooLarge = error instanceof Error && (error as { code?: string }).code === 'PAYLOAD_TOO_LARGE';
        if (outgoing.headersSent) return void outgoing.end();
        const requestId = requestIdFrom(headerOf(incoming, 'x-request-id'));
        const code = tooLarge ? 'PAYLOAD_TOO_LARGE' : 'INTERNAL';
        if (seen) Object.assign(seen, { requestId, code });
        const gone = outgoing.destroyed;
        outgoing.writeHead(tooLarge ? 413 : 500, {
          'content-type': 'application/json; charset=utf-8',
          'x-request-id': requestId,
          connection: 'close',
        });
        outgoing.end(
          JSON.stringify({
            error: {
              code,
              message: tooLarge ? 'the request body is too large' : 'internal error',
              requestId,
            },
          }),
        );
        seen?.end(gone ? null : tooLarge ? 413 : 500);
      }
    })();
  });
  // Open event streams never finish on their own: closing the server ends them first, so it can
  // close once the requests in flight are done (the clients resume on another replica).
  const close = server.close.bind(server);
  server.close = ((callback?: (error?: Error) => void) => {
    void compute.live?.close();
    openNotes?.close();
    return close(callback);
  }) as Server['close'];
  return server;
}
