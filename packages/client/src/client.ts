/**
 * The typed client. Every call is `POST {endpoint}/{group}/{name}` with a JSON body and answers the
 * API's envelope. Types come from the method table; at run time the client needs only each
 * method's flags (method-flags.ts, generated from the table), so it never loads zod or the schemas.
 */
import { isBearerToken, isRecord } from '@better-compute/core';
import type { MethodInput, MethodOutput } from '@better-compute/core';
import type { MethodName, MethodTable } from '@better-compute/core/methods';
import { resolveEndpoint, methodRoute } from './endpoint.js';
import { methodFlags } from './method-flags.js';
import { ComputeClientError, INVALID_RESPONSE_HINT } from './errors.js';
import {
  type WatchCallbackOptions,
  type WatchedEvent,
  type WatchHandle,
  type WatchOptions,
  type WatchTransport,
  watchIterable,
  watchWithCallbacks,
} from './watch.js';

/** The fetch the client calls with: one Request in, one Response out. Global fetch fits. */
export type ClientFetch = (request: Request) => Promise<Response>;

export interface ComputeClientOptions {
  /** An origin (`https://compute.example.com`, base path `/api/compute`) or a full endpoint. */
  baseURL: string | URL;
  /** A Better IAM session token, API key or session JWT, sent as a bearer credential. */
  token?: string | undefined;
  /** The acting tenant: filled into `tenantId` of tenant-scoped methods when the input has none. */
  tenant?: string | undefined;
  fetch?: ClientFetch | undefined;
  /** Extra headers on every call. */
  headers?: Record<string, string> | undefined;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
  /** The call's request id; a new one by default. */
  requestId?: string | undefined;
  headers?: Record<string, string> | undefined;
}

/** A method's input as the client takes it: `tenantId` may be left to the client's `tenant`. */
export type CallInput<K extends MethodName> =
  MethodInput<MethodTable[K]> extends { tenantId: string }
    ? Omit<MethodInput<MethodTable[K]>, 'tenantId'> & { tenantId?: string }
    : MethodInput<MethodTable[K]>;
export type CallOutput<K extends MethodName> = MethodOutput<MethodTable[K]>;

type GroupOf<K> = K extends `${infer G}.${string}` ? G : never;
type NameIn<G extends string, K> = K extends `${G}.${infer N}` ? N : never;

/** `client.system.version({})`: one object per group, one function per method. */
export type ComputeClientGroups = {
  [G in GroupOf<MethodName>]: {
    [N in NameIn<G, MethodName>]: (
      input: CallInput<Extract<`${G}.${N}`, MethodName>>,
      options?: CallOptions,
    ) => Promise<CallOutput<Extract<`${G}.${N}`, MethodName>>>;
  };
};

export interface ComputeClientBase {
  /** The endpoint calls are posted under, e.g. `https://compute.example.com/api/compute`. */
  readonly endpoint: string;
  /** Calls a method of the table, typed. */
  call<K extends MethodName>(method: K, input: CallInput<K>, options?: CallOptions): Promise<CallOutput<K>>;
  /**
   * Calls any method by name, untyped: `group.method`, or a plugin's `plugins.ID.GROUP.METHOD`
   * (posted to `/plugins/ID/GROUP/METHOD`). What `better-compute api` uses.
   */
  request(method: string, input: unknown, options?: CallOptions): Promise<unknown>;
  /**
   * Follows the live event stream (`GET {endpoint}/watch`): with `onEvent`, calls it per event and
   * returns a handle; without, an async iterable of the events. Resumes after the last event on a
   * broken connection; stops on the signal (quietly) or on a refusal (ComputeClientError).
   */
  $watch(options: WatchCallbackOptions): WatchHandle;
  $watch(options?: WatchOptions): AsyncIterable<WatchedEvent>;
}

export type ComputeClient = ComputeClientBase & ComputeClientGroups;

/** The longest RATE_LIMITED wait the client sits out before its one retry. */
export const MAX_RETRY_WAIT_MS = 2_000;

/** A new request id, the same shape the server makes. */
export function newRequestId(): string {
  return `req_${crypto.randomUUID().replaceAll('-', '')}`;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Reads the envelope of an answer: its `data`, or a ComputeClientError with the server's code,
 * message, details and hint (the server's advice is more precise than any default of the caller).
 */
export async function readEnvelope(
  response: Response,
  method: string,
  sentRequestId: string,
): Promise<unknown> {
  const requestId = response.headers.get('x-request-id') ?? sentRequestId;
  const text = await response.text();
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (isRecord(body) && isRecord(body.error) && typeof body.error.code === 'string') {
    const error = body.error;
    return Promise.reject(
      new ComputeClientError(
        error.code as string,
        typeof error.message === 'string' ? error.message : (error.code as string),
        {
          status: response.status,
          requestId: typeof error.requestId === 'string' ? error.requestId : requestId,
          method,
          ...(isRecord(error.details) ? { details: error.details } : {}),
          ...(typeof error.hint === 'string' && error.hint !== '' ? { hint: error.hint } : {}),
        },
      ),
    );
  }
  if (response.ok && isRecord(body) && 'data' in body) return body.data;
  throw new ComputeClientError(
    'INVALID_RESPONSE',
    `${method}: the server answered HTTP ${response.status} without the API's envelope`,
    {
      status: response.status,
      requestId,
      method,
      hint: INVALID_RESPONSE_HINT,
    },
  );
}

// A header value: visible ASCII and inner spaces or tabs, no line breaks or other controls.
const HEADER_VALUE = /^[\x20-\x7e\t]*$/;

/**
 * The token as it is sent: surrounding whitespace (a trailing line break of a file) is trimmed;
 * anything else outside visible ASCII is refused, without quoting the token.
 */
function checkedToken(token: string): string {
  const trimmed = token.trim();
  if (!isBearerToken(trimmed)) {
    throw new ComputeClientError(
      'INVALID_ARGUMENT',
      'the token must be one line of printable characters without spaces',
      {
        status: 0,
        details: { field: 'token' },
        hint: 'Pass the token alone: no quotes, spaces or line breaks inside it.',
      },
    );
  }
  return trimmed;
}

function checkedHeaders(headers: Record<string, string> | undefined, field: string): Record<string, string> {
  if (!headers) return {};
  for (const [name, value] of Object.entries(headers)) {
    if (
      !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) ||
      typeof value !== 'string' ||
      !HEADER_VALUE.test(value)
    ) {
      throw new ComputeClientError(
        'INVALID_ARGUMENT',
        `${field}: a header name must be a token and its value one line of printable characters`,
        { status: 0, details: { field } },
      );
    }
  }
  return headers;
}

/** A message with every header value the client sent replaced by …, in case a fetch quotes one. */
function withoutSecrets(message: string, secrets: readonly string[]): string {
  let text = message;
  for (const secret of secrets) text = text.split(secret).join('…');
  return text;
}

function retryWaitOf(error: ComputeClientError, response: Response | undefined): number | undefined {
  const fromDetails = error.details?.retryAfterMs;
  if (typeof fromDetails === 'number' && Number.isFinite(fromDetails) && fromDetails >= 0) return fromDetails;
  const header = response?.headers.get('retry-after');
  if (header && /^\d+$/.test(header)) return Number(header) * 1000;
  return undefined;
}

/**
 * A client for one deployment.
 *
 * @example
 * const client = createComputeClient({ baseURL: 'https://compute.example.com', token, tenant: 'acme' });
 * const { version } = await client.system.version({});
 */
export function createComputeClient(options: ComputeClientOptions): ComputeClient {
  const endpoint = resolveEndpoint(options.baseURL).href;
  const fetchImpl: ClientFetch = options.fetch ?? ((request) => fetch(request));
  // Checked here, before any request: a token with a line break or a space would otherwise fail
  // inside fetch, whose message quotes the whole header value.
  const token = options.token ? checkedToken(options.token) : undefined;
  const extraHeaders = checkedHeaders(options.headers, 'headers');
  // Every header value the client sends, so no message of it ever quotes one.
  const secrets = [token, ...Object.values(extraHeaders)].filter(
    (value): value is string => typeof value === 'string' && value.length >= 4,
  );

  async function send(method: string, body: unknown, callOptions: CallOptions): Promise<unknown> {
    const requestId = callOptions.requestId ?? newRequestId();
    const url = endpoint + methodRoute(method);
    const callHeaders = checkedHeaders(callOptions.headers, 'call headers');
    const headers: Record<string, string> = {
      ...extraHeaders,
      ...callHeaders,
      'content-type': 'application/json',
      accept: 'application/json',
      'x-request-id': requestId,
    };
    if (token) headers.authorization = `Bearer ${token}`;
    const hidden = [...secrets, ...Object.values(callHeaders).filter((value) => value.length >= 4)];
    const payload = JSON.stringify(body ?? {});
    for (let attempt = 0; ; attempt++) {
      let response: Response | undefined;
      let request: Request;
      try {
        request = new Request(url, {
          method: 'POST',
          headers,
          body: payload,
          ...(callOptions.signal ? { signal: callOptions.signal } : {}),
        });
      } catch {
        // Never the cause's message: it quotes the header value it refused.
        throw new ComputeClientError('INVALID_ARGUMENT', `${method}: the request could not be built`, {
          requestId,
          method,
          status: 0,
          hint: 'Check the token and headers given to the client: one line of printable characters each.',
        });
      }
      try {
        response = await fetchImpl(request);
      } catch (cause) {
        const aborted = callOptions.signal?.aborted === true;
        throw new ComputeClientError(
          'UNAVAILABLE',
          aborted
            ? `${method}: the call was aborted`
            : `${method}: could not reach ${new URL(endpoint).origin}: ${withoutSecrets(cause instanceof Error ? cause.message : String(cause), hidden)}`,
          {
            requestId,
            method,
            cause,
            status: 0,
            hint: aborted ? undefined : 'Check --url (BETTER_COMPUTE_URL) and that the server is running.',
          },
        );
      }
      try {
        return await readEnvelope(response, method, requestId);
      } catch (error) {
        // One retry, and only after a short wait: a longer limit is the caller's to handle.
        if (attempt === 0 && error instanceof ComputeClientError && error.code === 'RATE_LIMITED') {
          const wait = retryWaitOf(error, response);
          if (wait !== undefined && wait <= MAX_RETRY_WAIT_MS) {
            await sleep(wait, callOptions.signal);
            continue;
          }
        }
        throw error;
      }
    }
  }

  async function prepared(method: string, input: unknown): Promise<unknown> {
    if (!isRecord(input)) return input;
    const meta = methodFlags[method];
    if (!meta) return input;
    let body = input;
    if (meta.tenantScoped && body.tenantId === undefined && options.tenant)
      body = { ...body, tenantId: options.tenant };
    // A create carries an idempotency key, so the retry after RATE_LIMITED cannot create twice.
    if (meta.idempotent && body.idempotencyKey === undefined)
      body = { ...body, idempotencyKey: newRequestId().slice(4) };
    return body;
  }

  const watchTransport: WatchTransport = {
    endpoint,
    fetch: fetchImpl,
    tenant: options.tenant,
    headers: () => ({ ...extraHeaders, ...(token ? { authorization: `Bearer ${token}` } : {}) }),
    hide: (message) => withoutSecrets(message, secrets),
  };
  function $watch(watchOptions: WatchCallbackOptions): WatchHandle;
  function $watch(watchOptions?: WatchOptions): AsyncIterable<WatchedEvent>;
  function $watch(
    watchOptions: WatchOptions | WatchCallbackOptions = {},
  ): WatchHandle | AsyncIterable<WatchedEvent> {
    if (watchOptions.headers) checkedHeaders(watchOptions.headers, 'watch headers');
    return 'onEvent' in watchOptions
      ? watchWithCallbacks(watchTransport, watchOptions)
      : watchIterable(watchTransport, watchOptions);
  }

  const base: ComputeClientBase = {
    endpoint,
    $watch,
    async call(method, input, callOptions = {}) {
      return (await send(method, await prepared(method, input), callOptions)) as never;
    },
    async request(method, input, callOptions = {}) {
      methodRoute(method);
      return send(method, await prepared(method, input), callOptions);
    },
  };

  const groups = new Map<string, Record<string, unknown>>();
  return new Proxy(base, {
    get(target, property, receiver) {
      if (typeof property !== 'string' || property in target)
        return Reflect.get(target, property, receiver) as unknown;
      // `then` must stay undefined, or awaiting the client would treat it as a promise.
      if (property === 'then') return undefined;
      let group = groups.get(property);
      if (!group) {
        const groupName = property;
        group = new Proxy({} as Record<string, unknown>, {
          get(_, name) {
            if (typeof name !== 'string' || name === 'then') return undefined;
            return (input: unknown, callOptions?: CallOptions) =>
              base.request(`${groupName}.${name}`, input, callOptions);
          },
        });
        groups.set(property, group);
      }
      return group;
    },
  }) as ComputeClient;
}
