/**
 * The envelope every API answers with, shared by compute's handler and IAM's routes:
 * `{ "data": … }` on success, `{ "error": { code, message, details?, hint?, requestId } }` on
 * failure, with the HTTP status taken from the error code.
 */
import { ComputeError, type ComputeErrorJSON, httpStatusOf } from './errors.js';
import { hideSecrets, hideSecretsIn } from './secrets-shown.js';

/** The largest request body any route accepts. */
export const BODY_LIMIT_BYTES = 64 * 1024;

export interface ErrorEnvelope {
  error: ComputeErrorJSON & { requestId: string };
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

/**
 * An answer before it becomes a Response: hosts that write to a socket directly (the Node adapter)
 * skip building a Response at all.
 */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function dataAnswer(
  data: unknown,
  requestId: string,
  status = 200,
  headers?: Record<string, string>,
): Answer {
  // A literal of one shape rather than spreads: this runs once per successful call.
  const base: Record<string, string> = {
    'content-type': JSON_HEADERS['content-type'],
    'cache-control': JSON_HEADERS['cache-control'],
    'x-request-id': requestId,
  };
  return {
    status,
    headers: headers === undefined ? base : Object.assign(base, headers),
    body: JSON.stringify({ data }),
  };
}

export function errorAnswer(error: ComputeError, requestId: string): Answer {
  const json = error.toJSON();
  // A message or hint may quote what the caller sent, which may be a token pasted by mistake.
  json.message = hideSecrets(json.message);
  if (json.hint !== undefined) json.hint = hideSecrets(json.hint);
  if (json.details !== undefined) json.details = hideSecretsIn(json.details);
  const body: ErrorEnvelope = { error: { ...json, requestId } };
  const headers: Record<string, string> = { ...JSON_HEADERS, 'x-request-id': requestId };
  const retryAfterMs = error.details?.retryAfterMs;
  if (typeof retryAfterMs === 'number')
    headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfterMs / 1000)));
  return { status: httpStatusOf(error.code), headers, body: JSON.stringify(body) };
}

export function toResponse(answer: Answer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}

export function dataResponse(
  data: unknown,
  requestId: string,
  status = 200,
  headers: Record<string, string> = {},
): Response {
  return toResponse(dataAnswer(data, requestId, status, headers));
}

export function errorResponse(error: ComputeError, requestId: string): Response {
  return toResponse(errorAnswer(error, requestId));
}

/**
 * Any thrown value as the ComputeError an answer carries. Unknown throws become INTERNAL with a
 * fixed message, and an operator-only error keeps its code with a fixed message: the original stays
 * as the cause, for the server's log, and never reaches the answer. A caller logs whatever came
 * back as another object than it threw.
 */
export function toComputeError(error: unknown): ComputeError {
  if (error instanceof ComputeError) {
    if (!error.operatorOnly) return error;
    return new ComputeError(error.code, `the deployment cannot serve this call now (${error.code})`, {
      hint: 'Try again shortly; the server log tells its operators why.',
      cause: error,
    });
  }
  return new ComputeError('INTERNAL', 'internal error', { cause: error });
}

/**
 * Whether a failure goes to the server's log: INTERNAL, and whatever its answer does not tell (an
 * unknown throw, an operator-only error: toComputeError answered another object than was thrown).
 */
export function belongsInLog(answered: ComputeError, thrown: unknown): boolean {
  return answered.code === 'INTERNAL' || answered !== thrown;
}

/**
 * Reads a JSON body of at most `limit` bytes. A declared Content-Length over the limit is refused
 * before reading; a body without one is counted as it streams.
 */
export async function readJsonBody(request: Request, limit = BODY_LIMIT_BYTES): Promise<unknown> {
  return parseJsonBody(await readBodyText(request, limit));
}

/** Reads a request body of at most `limit` bytes as text (see readJsonBody). */
export async function readBodyText(request: Request, limit = BODY_LIMIT_BYTES): Promise<string> {
  const tooLarge = () => payloadTooLarge(limit);
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) throw tooLarge();
  let text: string;
  if (!request.body) {
    text = '';
  } else if (declared !== null) {
    text = await request.text();
    if (Buffer.byteLength(text) > limit) throw tooLarge();
  } else {
    const reader = request.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel();
        throw tooLarge();
      }
      chunks.push(value);
    }
    text = Buffer.concat(chunks).toString('utf8');
  }
  return text;
}

/** Parses a request body already read; an empty body is `{}`. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new ComputeError('INVALID_ARGUMENT', 'the request body is not valid JSON', {
      hint: 'Send a JSON object, for example {"tenantId":"acme"}.',
    });
  }
}

/** The error for a body over the limit. */
export function payloadTooLarge(limit = BODY_LIMIT_BYTES): ComputeError {
  return new ComputeError('PAYLOAD_TOO_LARGE', `the request body is larger than ${limit / 1024} KiB`, {
    details: { limitBytes: limit },
  });
}

/** The request id of a call: the caller's `x-request-id` when it is sane, else a new one. */
export function requestIdOf(request: Request): string {
  return requestIdFrom(request.headers.get('x-request-id'));
}

/** The caller's request id when it is sane (letters, digits, `._:-`, at most 128), else a new one. */
export function requestIdFrom(given: string | null | undefined): string {
  if (given && /^[A-Za-z0-9._:-]{1,128}$/.test(given)) return given;
  return `req_${crypto.randomUUID().replaceAll('-', '')}`;
}
