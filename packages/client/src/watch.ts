/**
 * `client.$watch`: the deployment's live event stream (`GET {endpoint}/watch`) read with fetch,
 * not EventSource, so it sends the client's Authorization header. It resumes after the last event
 * it saw (Last-Event-ID) whenever the connection breaks: after the server's `retry:` delay when the
 * server ended the stream, with doubling, capped and jittered backoff after a failure. A refusal
 * (the server's 4xx before the stream, or its `event: error` with a 4xx code while open) stops it
 * with a ComputeClientError carrying the server's code; so does nothing else but the caller's
 * AbortSignal, which stops it quietly.
 */
import {
  backoffDelay,
  ComputeError,
  formatStreamCursor,
  jittered,
  parsePosition,
} from '@better-compute/core';
import { ComputeClientError } from './errors.js';
import { SseParser, type SseMessage } from './sse.js';

/** One event of the stream: the record events.list returns, with the stream's cursor (its dotted id). */
export interface WatchedEvent {
  /** The stream's cursor after this event, `184467.12`: pass it as `since` to resume after it. */
  cursor: string;
  id: string;
  /** The outbox position in the list form, `184467:12`. */
  position: string;
  type: string;
  tenantId: string;
  subject: { type: string; id: string | null };
  data: Record<string, unknown>;
  actor: string | null;
  requestId: string | null;
  occurredAt: string;
}

export type WatchState = 'connecting' | 'open' | 'retrying' | 'stopped';

export interface WatchStatus {
  state: WatchState;
  /** Failures in a row (0 while open). */
  attempt: number;
  /** For `retrying`: how long until the next connection. */
  delayMs?: number;
  /** For `retrying` after a failure, and for `stopped` by a refusal. */
  error?: ComputeClientError;
}

export interface WatchOptions {
  /** The tenant whose events to follow; default the client's tenant, else the credential's. */
  tenantId?: string | undefined;
  /** Up to 20 type patterns: `reservation.created`, `reservation.*`, `node.`. */
  types?: readonly string[] | undefined;
  /** Start after this position (`184467.12` or `184467:12`); default: from now. */
  since?: string | undefined;
  /**
   * Where the stream is served: an absolute path on the endpoint's origin (`/api/compute/watch`,
   * `/watch`); default `{endpoint}/watch`.
   */
  path?: string | undefined;
  signal?: AbortSignal | undefined;
  headers?: Record<string, string> | undefined;
  onStatus?: ((status: WatchStatus) => void) | undefined;
  /** The first delay after a failure; doubles per failure in a row. Default 1 000 ms. */
  initialBackoffMs?: number | undefined;
  /** The longest delay between attempts. Default 60 000 ms. */
  maxBackoffMs?: number | undefined;
  /** The longest line the stream may send. Default 1 MiB. */
  maxLineLength?: number | undefined;
}

export interface WatchCallbackOptions extends WatchOptions {
  onEvent(event: WatchedEvent): void | Promise<void>;
  /** Called once when the watch stops: without an error when aborted, with the refusal otherwise. */
  onStop?: ((error?: ComputeClientError) => void) | undefined;
}

export interface WatchHandle {
  stop(): void;
  /** Resolves when stopped by the signal or stop(); rejects with the refusal. */
  readonly done: Promise<void>;
}

export interface WatchTransport {
  endpoint: string;
  fetch: (request: Request) => Promise<Response>;
  /** The client's own headers (Authorization among them). */
  headers(): Record<string, string>;
  tenant: string | undefined;
  /** Replaces every header value the client sent in a message. */
  hide(message: string): string;
}

const REFUSAL_STATUS = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Checks the options a watch is given, before connecting. */
function watchUrl(transport: WatchTransport, options: WatchOptions): URL {
  const endpoint = new URL(transport.endpoint);
  if (options.path !== undefined && !/^\/[A-Za-z0-9._~/-]*$/.test(options.path))
    throw new ComputeClientError('INVALID_ARGUMENT', 'path must be an absolute path such as /watch', {
      details: { field: 'path' },
    });
  const url = new URL(options.path ?? `${endpoint.pathname}/watch`, endpoint.origin);
  const tenantId = options.tenantId ?? transport.tenant;
  if (tenantId !== undefined) url.searchParams.set('tenantId', tenantId);
  if (options.types !== undefined) {
    if (options.types.length === 0 || options.types.length > 20)
      throw new ComputeClientError('INVALID_ARGUMENT', 'types takes 1 to 20 patterns', {
        details: { field: 'types' },
      });
    url.searchParams.set('types', options.types.join(','));
  }
  return url;
}

function toClientError(error: unknown, status: number): ComputeClientError {
  if (error instanceof ComputeClientError) return error;
  if (error instanceof ComputeError)
    return new ComputeClientError(error.code, error.message, { status, hint: error.hint, cause: error });
  return new ComputeClientError('UNAVAILABLE', error instanceof Error ? error.message : String(error), {
    status,
    cause: error,
  });
}

/**
 * Runs the watch, calling `emit` for each event in order (awaited, so a slow consumer slows the
 * read rather than piling events up). Resolves when aborted; rejects with a refusal.
 */
export async function runWatch(
  transport: WatchTransport,
  options: WatchOptions,
  emit: (event: WatchedEvent) => void | Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  const initial = options.initialBackoffMs ?? 1000;
  const cap = options.maxBackoffMs ?? 60_000;
  let serverRetryMs = 2000;
  let failures = 0;
  const report = (status: WatchStatus) => options.onStatus?.(status);
  try {
    const url = watchUrl(transport, options);
    let lastEventId =
      options.since !== undefined
        ? formatStreamCursor(parsePosition(options.since, 'either', 'since'))
        : undefined;
    while (!signal.aborted) {
      report({ state: 'connecting', attempt: failures });
      let failure: ComputeClientError | undefined;
      let opened = false;
      try {
        const headers: Record<string, string> = {
          ...transport.headers(),
          ...options.headers,
          accept: 'text/event-stream',
          'cache-control': 'no-store',
        };
        if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
        const response = await transport.fetch(new Request(url, { method: 'GET', headers, signal }));
        const type = response.headers.get('content-type') ?? '';
        if (response.status !== 200 || !type.startsWith('text/event-stream') || !response.body) {
          const error = await refusalOf(response);
          if (REFUSAL_STATUS(response.status)) throw error;
          failure = error;
        } else {
          opened = true;
          failures = 0;
          report({ state: 'open', attempt: 0 });
          const queue: SseMessage[] = [];
          const parser = new SseParser(
            {
              message: (message) => void queue.push(message),
              retry: (ms) => (serverRetryMs = ms),
            },
            { maxLineLength: options.maxLineLength, lastEventId: lastEventId ?? '' },
          );
          const reader = response.body.getReader();
          // Stopping must not wait for the next chunk (a keep-alive may be 15 s away).
          const cancel = () => void reader.cancel().catch(() => {});
          signal.addEventListener('abort', cancel, { once: true });
          try {
            for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              parser.push(value);
              for (const message of queue.splice(0)) {
                if (message.event === 'error') {
                  const error = streamError(message.data);
                  if (REFUSAL_STATUS(error.status)) throw error;
                  failure = error;
                  break;
                }
                const event = JSON.parse(message.data) as Omit<WatchedEvent, 'cursor'>;
                lastEventId = message.lastEventId;
                await emit({ cursor: message.lastEventId, ...event });
                if (signal.aborted) break;
              }
              if (signal.aborted) break;
              if (failure) break;
            }
          } finally {
            signal.removeEventListener('abort', cancel);
            await reader.cancel().catch(() => {});
          }
        }
      } catch (error) {
        if (signal.aborted) break;
        const clientError = toClientError(error, 0);
        if (clientError.code !== 'UNAVAILABLE' && REFUSAL_STATUS(clientError.status)) throw clientError;
        failure =
          clientError.code === 'UNAVAILABLE' && !(error instanceof ComputeClientError)
            ? new ComputeClientError(
                'UNAVAILABLE',
                `the event stream at ${url.origin} broke: ${transport.hide(clientError.message)}`,
                { status: 0, hint: 'Check --url and that the server is running; the watch keeps retrying.' },
              )
            : clientError;
      }
      if (signal.aborted) break;
      let delayMs: number;
      if (failure || !opened) {
        failures++;
        // Jittered, so watchers a restart cut off spread out.
        delayMs = jittered(backoffDelay(failures, initial, cap));
      } else delayMs = serverRetryMs;
      report({ state: 'retrying', attempt: failures, delayMs, ...(failure ? { error: failure } : {}) });
      await sleep(delayMs, signal);
    }
    report({ state: 'stopped', attempt: failures });
  } catch (error) {
    const refusal = toClientError(error, 0);
    report({ state: 'stopped', attempt: failures, error: refusal });
    throw refusal;
  }
}

/** The server's envelope of a refusal before the stream, as a ComputeClientError. */
async function refusalOf(response: Response): Promise<ComputeClientError> {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  let body: unknown;
  try {
    body = JSON.parse(await response.text());
  } catch {
    body = undefined;
  }
  const error = (body as { error?: { code?: unknown; message?: unknown; hint?: unknown; details?: unknown } })
    ?.error;
  if (error && typeof error.code === 'string' && typeof error.message === 'string')
    return new ComputeClientError(error.code, error.message, {
      status: response.status,
      ...(requestId ? { requestId } : {}),
      ...(typeof error.hint === 'string' ? { hint: error.hint } : {}),
      ...(error.details && typeof error.details === 'object'
        ? { details: error.details as Record<string, unknown> }
        : {}),
    });
  return new ComputeClientError(
    response.status >= 500 || response.status === 429 ? 'UNAVAILABLE' : 'INVALID_RESPONSE',
    `the event stream answered ${response.status} without the API's envelope`,
    {
      status: response.status,
      hint: 'Check that the URL and --path point at a better-compute stream (/watch or /api/compute/watch).',
    },
  );
}

/** A final `event: error` frame, as a ComputeClientError (its status from its code). */
function streamError(data: string): ComputeClientError {
  try {
    const { error } = JSON.parse(data) as { error: { code: string; message: string; hint?: string } };
    const probe = new ComputeError(error.code, error.message);
    return new ComputeClientError(error.code, error.message, {
      status: probe.status,
      ...(error.hint ? { hint: error.hint } : {}),
    });
  } catch {
    return new ComputeClientError(
      'INVALID_RESPONSE',
      'the event stream sent an error frame that is not JSON',
      {
        status: 502,
      },
    );
  }
}

/** The async-iterator form: events as they come; ends when the signal aborts, throws a refusal. */
export function watchIterable(transport: WatchTransport, options: WatchOptions): AsyncIterable<WatchedEvent> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<WatchedEvent> {
      const stop = new AbortController();
      const outer = options.signal;
      const onAbort = () => stop.abort();
      outer?.addEventListener('abort', onAbort, { once: true });
      if (outer?.aborted) stop.abort();
      // One event at a time: the reader waits for each `next()` before reading on.
      let handoff: { event: WatchedEvent; taken: () => void } | null = null;
      let wake: (() => void) | null = null;
      let finished = false;
      let failure: unknown;
      const running = runWatch(
        transport,
        options,
        (event) =>
          new Promise<void>((taken) => {
            handoff = { event, taken };
            wake?.();
          }),
        stop.signal,
      ).then(
        () => void (finished = true),
        (error: unknown) => {
          finished = true;
          failure = error;
        },
      );
      void running.finally(() => {
        outer?.removeEventListener('abort', onAbort);
        wake?.();
      });
      return {
        async next(): Promise<IteratorResult<WatchedEvent>> {
          for (;;) {
            const ready = handoff as { event: WatchedEvent; taken: () => void } | null;
            if (ready) {
              handoff = null;
              ready.taken();
              return { value: ready.event, done: false };
            }
            if (finished) {
              if (failure !== undefined) {
                const error = failure;
                failure = undefined;
                throw error;
              }
              return { value: undefined, done: true };
            }
            await new Promise<void>((resolve) => (wake = resolve));
            wake = null;
          }
        },
        async return(): Promise<IteratorResult<WatchedEvent>> {
          stop.abort();
          const pending = handoff as { taken: () => void } | null;
          pending?.taken();
          await running;
          return { value: undefined, done: true };
        },
      };
    },
  };
}

/** The callback form. */
export function watchWithCallbacks(transport: WatchTransport, options: WatchCallbackOptions): WatchHandle {
  const stop = new AbortController();
  const outer = options.signal;
  const onAbort = () => stop.abort();
  outer?.addEventListener('abort', onAbort, { once: true });
  if (outer?.aborted) stop.abort();
  const done = runWatch(transport, options, options.onEvent, stop.signal).then(
    () => {
      outer?.removeEventListener('abort', onAbort);
      options.onStop?.();
    },
    (error: ComputeClientError) => {
      outer?.removeEventListener('abort', onAbort);
      options.onStop?.(error);
      throw error;
    },
  );
  // The callback form reports through onStop; an unobserved rejection must not crash the process.
  done.catch(() => {});
  return { stop: () => stop.abort(), done };
}
