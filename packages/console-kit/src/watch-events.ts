/**
 * The live event stream for a browser or any fetch: `GET {watchUrl}` read as server-sent events
 * with fetch rather than EventSource, so it can send an Authorization header (or, in the console,
 * `X-Better-Compute: 1` beside the session cookie). It keeps the `id:` of the last event and sends
 * it as Last-Event-ID on every reconnection, so it resumes exactly after that event. When the server
 * ends the stream it reconnects after the server's `retry:` delay; after a failure it waits with
 * doubling backoff capped at `maxBackoffMs`. A refusal (a 4xx other than 408 and 429, before the
 * stream or as its final `event: error`) stops it: retrying with the same credential cannot help.
 */
import { backoffDelay } from '@better-compute/core';
import { ComputeClientError, SseParser, type SseMessage, type WatchedEvent } from '@better-compute/client';

export type WatchEventsStatus = 'connecting' | 'open' | 'retrying' | 'stopped';

export interface WatchEventsState {
  status: WatchEventsStatus;
  /** Failures in a row (0 once open). */
  attempt: number;
  /** While retrying: the wait before the next connection. */
  delayMs?: number;
  /** The failure behind a retry, or the refusal that stopped the stream. */
  error?: ComputeClientError;
}

export interface WatchEventsOptions {
  /** The stream's URL, `https://console.example.com/api/compute/watch`; query parameters are kept. */
  url: string | URL;
  /** Up to 20 type patterns (`reservation.*`, `node.`); all types by default. */
  types?: readonly string[] | undefined;
  /** Resume after this event id (a stream cursor, `184467.12`). */
  lastEventId?: string | undefined;
  /** Headers for each connection: a function is called per connection, so a token can rotate. */
  headers?: Record<string, string> | (() => Record<string, string>) | undefined;
  onEvent(event: WatchedEvent): void | Promise<void>;
  onStatus?: ((state: WatchEventsState) => void) | undefined;
  signal?: AbortSignal | undefined;
  fetch?: ((request: Request) => Promise<Response>) | undefined;
  /** The first wait after a failure; doubles per failure in a row. Default 1 000 ms. */
  initialBackoffMs?: number | undefined;
  /** The longest wait after failures. Default 60 000 ms. */
  maxBackoffMs?: number | undefined;
  /** Fetch credentials mode; `same-origin` (the cookie on one's own origin) by default. */
  credentials?: RequestCredentials | undefined;
}

export interface EventWatch {
  stop(): void;
  /** The id of the last event delivered, which the next connection resumes after. */
  lastEventId(): string | undefined;
  /** Resolves once stopped; never rejects (a refusal is reported through onStatus). */
  readonly done: Promise<void>;
}

/** Whether an HTTP status (or a stream error's) is a refusal, after which reconnecting cannot help. */
export function isRefusalStatus(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

async function refusalOf(response: Response): Promise<ComputeClientError> {
  const text = await response.text().catch(() => '');
  try {
    const { error } = JSON.parse(text) as { error: { code: string; message: string; hint?: string } };
    if (typeof error.code === 'string' && typeof error.message === 'string')
      return new ComputeClientError(error.code, error.message, {
        status: response.status,
        ...(error.hint ? { hint: error.hint } : {}),
      });
  } catch {
    // Not the API's envelope: described below.
  }
  return new ComputeClientError(
    response.status >= 500 || response.status === 429 ? 'UNAVAILABLE' : 'INVALID_RESPONSE',
    `the event stream answered ${response.status}`,
    { status: response.status },
  );
}

function streamError(data: string): ComputeClientError {
  try {
    const { error } = JSON.parse(data) as { error: { code: string; message: string; hint?: string } };
    // Its status is the code's own (ACCESS_DENIED 403, UNAVAILABLE 503, …).
    return new ComputeClientError(error.code, error.message, error.hint ? { hint: error.hint } : {});
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

/** Follows the stream until stopped or refused; see the file's comment. */
export function watchEvents(options: WatchEventsOptions): EventWatch {
  const stopper = new AbortController();
  const signal = stopper.signal;
  const outer = options.signal;
  const onOuterAbort = () => stopper.abort();
  if (outer?.aborted) stopper.abort();
  else outer?.addEventListener('abort', onOuterAbort, { once: true });
  const doFetch = options.fetch ?? ((request: Request) => globalThis.fetch(request));
  const initial = options.initialBackoffMs ?? 1000;
  const cap = options.maxBackoffMs ?? 60_000;
  let lastEventId = options.lastEventId;
  const report = (state: WatchEventsState) => options.onStatus?.(state);

  const url = new URL(String(options.url), globalThis.location?.href);
  if (options.types?.length) url.searchParams.set('types', options.types.join(','));

  async function run(): Promise<void> {
    let serverRetryMs = 2000;
    let failures = 0;
    while (!signal.aborted) {
      report({ status: 'connecting', attempt: failures });
      let failure: ComputeClientError | undefined;
      let opened = false;
      try {
        const extra = typeof options.headers === 'function' ? options.headers() : (options.headers ?? {});
        const headers: Record<string, string> = { ...extra, accept: 'text/event-stream' };
        if (lastEventId) headers['last-event-id'] = lastEventId;
        const response = await doFetch(
          new Request(url, {
            method: 'GET',
            headers,
            signal,
            cache: 'no-store',
            credentials: options.credentials ?? 'same-origin',
          }),
        );
        const type = response.headers.get('content-type') ?? '';
        if (response.status !== 200 || !type.startsWith('text/event-stream') || !response.body) {
          const error = await refusalOf(response);
          if (isRefusalStatus(response.status))
            return report({ status: 'stopped', attempt: failures, error });
          failure = error;
        } else {
          opened = true;
          failures = 0;
          report({ status: 'open', attempt: 0 });
          const queue: SseMessage[] = [];
          const parser = new SseParser(
            { message: (message) => void queue.push(message), retry: (ms) => (serverRetryMs = ms) },
            { lastEventId: lastEventId ?? '' },
          );
          const reader = response.body.getReader();
          const cancel = () => void reader.cancel().catch(() => {});
          signal.addEventListener('abort', cancel, { once: true });
          try {
            reading: for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              parser.push(value);
              for (const message of queue.splice(0)) {
                if (message.event === 'error') {
                  const error = streamError(message.data);
                  if (isRefusalStatus(error.status))
                    return report({ status: 'stopped', attempt: failures, error });
                  failure = error;
                  break reading;
                }
                const event = JSON.parse(message.data) as Omit<WatchedEvent, 'cursor'>;
                lastEventId = message.lastEventId;
                await options.onEvent({ cursor: message.lastEventId, ...event });
                if (signal.aborted) break reading;
              }
            }
          } finally {
            signal.removeEventListener('abort', cancel);
            await reader.cancel().catch(() => {});
          }
        }
      } catch (error) {
        if (signal.aborted) break;
        failure =
          error instanceof ComputeClientError
            ? error
            : new ComputeClientError(
                'UNAVAILABLE',
                `the event stream broke: ${error instanceof Error ? error.message : String(error)}`,
                { status: 0, cause: error },
              );
      }
      if (signal.aborted) break;
      let delayMs: number;
      if (failure || !opened) {
        failures++;
        delayMs = backoffDelay(failures, initial, cap);
      } else delayMs = serverRetryMs;
      report({ status: 'retrying', attempt: failures, delayMs, ...(failure ? { error: failure } : {}) });
      await sleep(delayMs, signal);
    }
    report({ status: 'stopped', attempt: 0 });
  }

  const done = run()
    .catch((error: unknown) =>
      report({
        status: 'stopped',
        attempt: 0,
        error: new ComputeClientError('INTERNAL', error instanceof Error ? error.message : String(error), {
          status: 500,
        }),
      }),
    )
    .finally(() => outer?.removeEventListener('abort', onOuterAbort));
  return { stop: () => stopper.abort(), lastEventId: () => lastEventId, done };
}
