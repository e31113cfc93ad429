/**
 * `GET {basePath}/watch`: the tenant's events as server-sent events (docs/live-events.md).
 *
 *   retry: 2000                      once, first
 *   id: 184467.12                    the event's position, dotted
 *   event: reservation.created       the event's type
 *   data: {…}                        the record events.list returns
 *   : keep-alive                     every 15 s while idle
 *   event: error / data: {"error":…} the last thing sent when the stream is refused while open
 *
 * The request is decided as events.list for the tenant: the same credential rules (a cookie needs
 * X-Better-Compute: 1 from the console's own origin), tenant checks, rate limit and IAM action
 * (compute:events:read), and the caps of open streams per identity and per tenant (RATE_LIMITED
 * past them; a closed stream frees its place). Anything refused before the stream starts is the
 * JSON error envelope with its status. An open stream is decided again whenever IAM changes and every 30 s; a revoked
 * credential, a suspended tenant or a withdrawn action ends it with `event: error`.
 */
import {
  ComputeError,
  type CredentialSource,
  errorResponse,
  type IamBridge,
  type Identity,
  isTenantId,
  methodAction,
  parsePosition,
  formatListCursor,
  formatStreamCursor,
  type RateLimiter,
  rateLimited,
  type StreamSlot,
  tooManyStreams,
  requestIdFrom,
  requestCredential,
  belongsInLog,
  toComputeError,
  checkedPath,
} from '@better-compute/core';
import { methods } from '@better-compute/core/methods';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { LiveHub, LiveStream } from './hub.js';
import { type DirectSink, offerDirect } from './direct.js';
import { type EventRecord, typeMatcher } from '../modules/events/index.js';
import { createGate, denied } from '../http/gate.js';
import type { HandlerLog } from '../http/handler.js';
import { SETTLED_HORIZON } from '../db/settled.js';

const MAX_WATCH_TYPES = 20;
const MAX_QUERY_LENGTH = 4096;
/** Bytes a slow reader may leave unread before its stream is ended (it resumes with Last-Event-ID). */
const MAX_BACKLOG_BYTES = 8 * 1024 * 1024;

export interface WatchOptions {
  hub: LiveHub;
  iam: IamBridge;
  trustedOrigins: readonly string[] | undefined;
  limiter: RateLimiter | undefined;
  db: () => Kysely<ComputeTables>;
  log: HandlerLog;
  /** Milliseconds between keep-alive comments (default 15 s). */
  heartbeatMs?: number | undefined;
  /** The reconnection delay the stream advises (`retry:`, default 2 s). */
  retryMs?: number | undefined;
}

const ACTION = methodAction(methods['events.list'])!;
const typeSchema = methods['events.list'].input.shape.type;

function invalid(message: string, field: string, hint: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', message, { details: { field }, hint });
}

interface WatchQuery {
  tenantId: string | undefined;
  since: string | undefined;
  types: string[] | undefined;
}

/** The query string, strictly: known keys, each once. */
function readQuery(url: URL): WatchQuery {
  if (url.search.length > MAX_QUERY_LENGTH)
    throw invalid('the query string is too long', 'query', 'Pass at most 20 type patterns.');
  const seen = new Set<string>();
  for (const key of url.searchParams.keys()) {
    if (!['tenantId', 'since', 'types'].includes(key))
      throw invalid(
        `unknown query parameter ${JSON.stringify(key.slice(0, 40))}`,
        'query',
        'The stream takes tenantId, types and since.',
      );
    if (seen.has(key))
      throw invalid(`${key} is given twice`, key, `Pass ${key} once (types is comma-separated).`);
    seen.add(key);
  }
  const get = (key: string) => url.searchParams.get(key) ?? undefined;
  const types = get('types');
  return {
    tenantId: get('tenantId'),
    since: get('since'),
    types: types === undefined ? undefined : types.split(','),
  };
}

function checkedTypes(types: string[]): string[] {
  if (types.length > MAX_WATCH_TYPES)
    throw invalid(
      `types takes at most ${MAX_WATCH_TYPES} patterns (got ${types.length})`,
      'types',
      'Use prefixes (reservation.*) to cover several types with one pattern.',
    );
  return types.map((type) => {
    const checked = typeSchema.safeParse(type.trim());
    if (!checked.success || checked.data === undefined)
      throw invalid(
        `types: ${JSON.stringify(type.slice(0, 100))} ${checked.success ? 'is empty' : checked.error.issues[0]?.message}`,
        'types',
        'Pass types like reservation.created or prefixes like reservation.* or node., comma-separated.',
      );
    return checked.data;
  });
}

/**
 * Where a stream without a position starts: after the newest settled event, skipping the events
 * committed since then that are already visible (they happened before the stream opened; an
 * event that commits later with a lower position is still ahead of the stream, so it is sent).
 */
async function headOf(
  db: Kysely<ComputeTables>,
  tenantId: string,
): Promise<{ cursor: string; before: Set<string> }> {
  // One statement, so one horizon: the newest event below it, and every visible event above it.
  const { rows } = await sql<{ tx: string; tx_index: number; settled: boolean }>`
    with horizon as materialized (select ${SETTLED_HORIZON} as h)
    (select tx_id::text as tx, tx_index, true as settled
       from compute.events, horizon
      where tenant_id = ${tenantId} and tx_id < horizon.h
      order by tx_id desc, tx_index desc limit 1)
    union all
    (select tx_id::text, tx_index, false
       from compute.events, horizon
      where tenant_id = ${tenantId} and tx_id >= horizon.h)`.execute(db);
  const position = (row: { tx: string; tx_index: number }) =>
    formatListCursor({ tx: row.tx, index: row.tx_index });
  const settled = rows.find((row) => row.settled);
  return {
    cursor: settled ? position(settled) : '0:0',
    before: new Set(rows.filter((row) => !row.settled).map(position)),
  };
}

/**
 * The credential as events.list takes it. A cookie needs the CSRF rule's X-Better-Compute: 1 and a
 * trusted Origin; a browser sends no Origin on a same-origin GET, so there Sec-Fetch-Site:
 * same-origin stands for it (a cross-site page cannot forge either header).
 */
function credentialSource(request: Request, url: URL): CredentialSource {
  const header = (name: string) => request.headers.get(name);
  return {
    method: request.method === 'GET' ? 'POST' : request.method,
    origin: url.origin,
    header(name) {
      if (name === 'origin' && header('origin') === null && header('sec-fetch-site') === 'same-origin')
        return url.origin;
      return header(name);
    },
  };
}

const frames = new WeakMap<EventRecord, Uint8Array>();
const frameEncoder = new TextEncoder();

/**
 * An event's frame, encoded once: the streams of a tenant get the same record objects from one
 * read, so a thousand watchers cost one serialisation.
 */
function frameOf(event: EventRecord): Uint8Array {
  let frame = frames.get(event);
  if (!frame) {
    const id = formatStreamCursor(parsePosition(event.position, 'list'));
    frame = frameEncoder.encode(`id: ${id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    frames.set(event, frame);
  }
  return frame;
}

export function createWatch(options: WatchOptions): (request: Request) => Promise<Response> {
  const gate = createGate(options.iam, options.trustedOrigins);
  const encoder = new TextEncoder();
  const retryMs = options.retryMs ?? 2000;
  const heartbeatMs = options.heartbeatMs ?? 15_000;

  /** Everything a request must pass before its stream opens; throws the refusal. */
  async function decide(request: Request, url: URL) {
    checkedPath(url.pathname);
    if (request.method !== 'GET')
      throw new ComputeError(
        'NOT_FOUND',
        `no route ${request.method} ${url.pathname}; the stream is read with GET`,
        {
          hint: 'Open the stream with GET, sending Accept: text/event-stream.',
        },
      );
    const query = readQuery(url);
    const credential = requestCredential(credentialSource(request, url), options.trustedOrigins);
    if (!credential)
      throw new ComputeError('UNAUTHENTICATED', 'the event stream needs a credential', {
        hint: 'Send "Authorization: Bearer <token>" (BETTER_COMPUTE_TOKEN), or sign in with better-compute auth login.',
      });
    const identity = await gate.identify(credential.token);
    const tenantId = query.tenantId ?? identity.tenantId;
    if (!isTenantId(tenantId))
      throw invalid(
        'tenantId must be a tenant id such as acme',
        'tenantId',
        'Pass ?tenantId= a tenant id, or leave it out for your own.',
      );
    await gate.checkTenant(identity, tenantId);
    if (options.limiter) {
      const waitMs = options.limiter.take(identity.principalId);
      if (waitMs > 0) throw rateLimited(waitMs);
    }
    const types = query.types === undefined ? undefined : checkedTypes(query.types);
    const lastEventId = request.headers.get('last-event-id');
    // A position is at most 31 characters; a longer one is refused without being quoted back.
    for (const [field, value] of [
      ['Last-Event-ID', lastEventId],
      ['since', query.since],
    ] as const)
      if (value && value.length > 64)
        throw invalid(
          `${field} is not an outbox position (it is ${value.length} characters long)`,
          field,
          'Pass a position like 184467.12.',
        );
    const resume = lastEventId !== null && lastEventId.trim() !== '' ? lastEventId : query.since;
    const since =
      resume === undefined
        ? undefined
        : parsePosition(
            resume,
            'either',
            lastEventId !== null && lastEventId.trim() !== '' ? 'Last-Event-ID' : 'since',
          );
    await authorized(identity, tenantId);
    return { identity, token: credential.token, tenantId, types, since };
  }

  async function authorized(identity: Identity, tenantId: string): Promise<void> {
    const [decision] = await options.iam.authorize(identity, [
      { action: ACTION, resource: { type: 'tenant', id: tenantId, tenantId } },
    ]);
    if (!decision?.allowed)
      throw denied(
        `${ACTION} is not allowed on tenant ${tenantId}`,
        { action: ACTION, reason: decision?.reason ?? 'no decision' },
        `Your roles in tenant ${tenantId} do not grant ${ACTION}: ask an administrator of ${tenantId} to bind a role that does (better-iam bindings).`,
      );
  }

  /**
   * Streams opened with one credential for one tenant share each new decision: a thousand of them
   * cost IAM one check when its change feed fires, not a thousand at once.
   */
  const deciding = new Map<string, Promise<void>>();
  function decideAgain(token: string, tenantId: string): Promise<void> {
    const key = `${tenantId}\u0000${token}`;
    let decision = deciding.get(key);
    if (!decision) {
      decision = (async () => {
        const identity = await gate.identify(token);
        await gate.checkTenant(identity, tenantId);
        await authorized(identity, tenantId);
      })().finally(() => deciding.delete(key));
      deciding.set(key, decision);
    }
    return decision;
  }

  return async function watch(request: Request): Promise<Response> {
    const requestId = requestIdFrom(request.headers.get('x-request-id'));
    const url = new URL(request.url);
    let decided: Awaited<ReturnType<typeof decide>>;
    // The stream's place under the caps of open streams (per identity, per tenant), given back when
    // it closes, however it closes.
    let slot: StreamSlot | undefined;
    try {
      decided = await decide(request, url);
      const taken = options.limiter?.openStream(decided.identity.principalId, decided.identity.tenantId);
      if (taken && !('release' in taken)) throw tooManyStreams(taken);
      slot = taken;
    } catch (error) {
      const failure = toComputeError(error);
      if (belongsInLog(failure, error))
        options.log({ level: 'error', message: 'watch refused', requestId, error });
      return errorResponse(failure, requestId);
    }
    const { token, tenantId, types, since } = decided;
    const matchers = types?.map(typeMatcher);
    const wanted = (type: string) => !matchers || matchers.some((match) => match(type));
    const hub = options.hub;
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    // Where the bytes go: held until a consumer shows itself, then to the host's connection (a
    // takeover, live/direct.ts) or into the web stream (its reader's first pull).
    let sink: DirectSink | null = null;
    let held: Uint8Array[] | null = [];
    let heldBytes = 0;
    let closed = false;
    let heartbeat: ReturnType<typeof setInterval> | undefined;
    let rechecking = false;
    // Events committed before the stream opened that the hub will still read past its start.
    let before = new Set<string>();

    const emit = (chunk: Uint8Array) => {
      if (sink) sink.write(chunk);
      else if (held) {
        held.push(chunk);
        heldBytes += chunk.byteLength;
      } else controller.enqueue(chunk);
    };
    const backlog = () => (sink ? sink.backlog : held ? heldBytes : -(controller.desiredSize ?? 0));
    /** The held bytes into the web stream, which its reader now reads. */
    const toWebStream = () => {
      if (!held) return;
      for (const chunk of held) controller.enqueue(chunk);
      held = null;
      if (closed) controller.close();
    };
    const close = () => {
      if (closed) return;
      closed = true;
      slot?.release();
      if (heartbeat) clearInterval(heartbeat);
      hub.remove(stream);
      if (sink) return sink.end();
      if (held) return; // given to whichever consumer comes (or dropped with the body)
      try {
        controller.close();
      } catch {
        // Already closed or cancelled by the reader.
      }
    };
    const write = (chunk: string | Uint8Array) => {
      if (closed) return;
      emit(typeof chunk === 'string' ? encoder.encode(chunk) : chunk);
      if (backlog() > MAX_BACKLOG_BYTES) {
        refuse(new ComputeError('UNAVAILABLE', 'the reader fell too far behind; resume with Last-Event-ID'));
      }
    };
    const refuse = (error: ComputeError) => {
      if (closed) return;
      const body = {
        error: { code: error.code, message: error.message, ...(error.hint ? { hint: error.hint } : {}) },
      };
      emit(encoder.encode(`event: error\ndata: ${JSON.stringify(body)}\n\n`));
      close();
    };

    const stream: LiveStream = {
      tenantId,
      cursor: null,
      deliver(events: readonly EventRecord[]) {
        for (const event of events) {
          if (before.delete(event.position)) continue;
          if (wanted(event.type)) write(frameOf(event));
        }
      },
      async reauthorize() {
        if (closed || rechecking) return;
        rechecking = true;
        try {
          await decideAgain(token, tenantId);
        } catch (error) {
          const failure = toComputeError(error);
          // IAM that cannot answer now is no refusal: the next check decides.
          if (failure.code !== 'UNAVAILABLE' && failure.code !== 'INTERNAL') refuse(failure);
        } finally {
          rechecking = false;
        }
      },
      end: close,
    };

    // No high-water mark: the stream asks for bytes (pull) only once a reader reads, which is how
    // the held bytes learn that the web stream, not a takeover, is their consumer.
    const body = new ReadableStream<Uint8Array>(
      {
        start(c) {
          controller = c;
        },
        pull() {
          toWebStream();
        },
        cancel() {
          held = null;
          close();
        },
      },
      { highWaterMark: 0, size: (chunk) => chunk.byteLength },
    );
    offerDirect(body, {
      attach(taking) {
        if (sink || !held) return;
        for (const chunk of held) taking.write(chunk);
        held = null;
        sink = taking;
        if (closed) taking.end();
      },
      cancel: close,
    });
    request.signal?.addEventListener('abort', close, { once: true });
    write(`retry: ${retryMs}\n: stream of ${tenantId}\n\n`);
    heartbeat = setInterval(() => write(': keep-alive\n\n'), heartbeatMs);
    heartbeat.unref?.();
    try {
      if (since) stream.cursor = formatListCursor(since);
      else ({ cursor: stream.cursor, before } = await headOf(options.db(), tenantId));
      await hub.add(stream);
      if (closed) hub.remove(stream);
    } catch (error) {
      options.log({ level: 'error', message: 'watch failed to start', requestId, error });
      refuse(new ComputeError('UNAVAILABLE', 'the event stream could not start; retry shortly'));
    }
    return new Response(body, {
      status: 200,
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        'x-request-id': requestId,
      },
    });
  };
}
