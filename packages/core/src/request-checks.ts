/**
 * The checks every API request goes through before its method runs, shared by compute's pipeline
 * and IAM's so the two route sets answer alike (docs/request-checks.md):
 *
 * - the credential: `Authorization: Bearer …`, or the session cookie under the CSRF rule (a POST with
 *   `X-Better-Compute: 1` from a trusted Origin; a browser sends cookies on its own, a cross-site form
 *   cannot set that header);
 * - the body: a JSON object whose every string can be stored (no NUL, no unpaired surrogate);
 * - the input: the method's schema, with failures in one shape, `details.issues[]` of
 *   `{ path: (string | number)[], code, message }`.
 */
import type { z } from 'zod';
import { ComputeError } from './errors.js';

export const SESSION_COOKIE = 'better-iam.session';

export type RequestCredential = { kind: 'bearer' | 'cookie'; token: string } | null;

/** What the credential step reads of a request. */
export interface CredentialSource {
  method: string;
  /** The origin the request was addressed to: the one trusted Origin when the deployment names none. */
  origin: string;
  header(name: string): string | null;
}

/** One refused field of an input: where it is, zod's code (or `unstorable`), and why. */
export interface InputIssue {
  path: (string | number)[];
  code: string;
  message: string;
}

/**
 * A cookie's value, percent-decoded when it is well formed. A malformed escape (`%`, `%zz`) is kept
 * as it was sent: such a value is no session token, so authentication refuses it like any unknown one.
 */
export function cookieValue(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const index = part.indexOf('=');
    if (index <= 0 || part.slice(0, index).trim() !== name) continue;
    const raw = part.slice(index + 1).trim();
    try {
      return decodeURIComponent(raw);
    } catch {
      return raw;
    }
  }
  return undefined;
}

/** Whether a host name is this machine's: loopback addresses and `*.localhost`. */
export function isLoopbackHostname(hostname: string): boolean {
  return (
    hostname === 'localhost' ||
    hostname.endsWith('.localhost') ||
    hostname === '[::1]' ||
    hostname === '::1' ||
    /^127(\.\d{1,3}){3}$/.test(hostname)
  );
}

/** Whether an Origin header names a loopback origin (`http://127.0.0.1:8080`, `http://localhost`). */
export function isLoopbackOrigin(origin: string): boolean {
  try {
    return isLoopbackHostname(new URL(origin).hostname);
  } catch {
    return false;
  }
}

/**
 * The request's credential. A cookie counts only on a POST with `X-Better-Compute: 1` from a trusted
 * Origin: the configured list, or, without one, the request's own origin when that is a loopback one
 * (a deployment reached by name must list its console's origin in `trustedOrigins`).
 */
export function requestCredential(
  request: CredentialSource,
  trustedOrigins: readonly string[] | undefined,
): RequestCredential {
  const authorization = request.header('authorization');
  if (authorization !== null) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization.trim());
    if (!match) {
      throw new ComputeError('UNAUTHENTICATED', 'the Authorization header must be "Bearer <token>"', {
        hint: 'Send "Authorization: Bearer <session token, API key or session JWT>".',
      });
    }
    return { kind: 'bearer', token: match[1]! };
  }
  const cookie = cookieValue(request.header('cookie'), SESSION_COOKIE);
  if (!cookie) return null;
  const origin = request.header('origin');
  const trusted = trustedOrigins ?? (isLoopbackOrigin(request.origin) ? [request.origin] : []);
  if (
    request.method !== 'POST' ||
    request.header('x-better-compute') !== '1' ||
    !origin ||
    !trusted.includes(origin)
  ) {
    throw new ComputeError(
      'ACCESS_DENIED',
      'a cookie credential needs a POST with X-Better-Compute: 1 from a trusted Origin',
      {
        details: { reason: 'csrf' },
        hint:
          trustedOrigins === undefined && !isLoopbackOrigin(request.origin)
            ? 'This deployment names no trustedOrigins, so it takes cookies only from loopback origins: add the console’s origin to trustedOrigins, or send "Authorization: Bearer <token>".'
            : 'Send the session as "Authorization: Bearer <token>", or call from the console’s own origin.',
      },
    );
  }
  return { kind: 'cookie', token: cookie };
}

/**
 * Refuses a request path that could mean two things: a dot segment (`.`, `..`, or their
 * percent-encoded forms), an encoded slash or backslash, or an encoded NUL. A host normalising the
 * URL would otherwise route `/api/iam/%2e%2e/compute/…` to compute's routes.
 */
export function checkedPath(pathname: string): string {
  const ambiguous = pathname.split('/').some((segment) => {
    const lower = segment.toLowerCase();
    return (
      lower === '.' ||
      lower === '..' ||
      /^(\.|%2e){1,2}$/.test(lower) ||
      lower.includes('%2f') ||
      lower.includes('%5c') ||
      lower.includes('%00') ||
      lower.includes('\\')
    );
  });
  if (ambiguous) {
    throw new ComputeError('INVALID_ARGUMENT', 'the request path has a dot segment or an encoded slash', {
      hint: 'Call methods at their plain path, POST {base}/{group}/{name}.',
    });
  }
  return pathname;
}

// NUL, which PostgreSQL's text cannot hold, and a UTF-16 surrogate without its pair, which has no
// UTF-8 form: both would be refused, or silently changed, by the store.
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Every string of a parsed body (keys included) that the store cannot hold, by path. */
export function unstorableText(
  value: unknown,
  path: (string | number)[] = [],
  found: InputIssue[] = [],
): InputIssue[] {
  if (found.length >= 10) return found;
  if (typeof value === 'string') {
    if (UNSTORABLE.test(value))
      found.push({
        path,
        code: 'unstorable',
        message: 'must not contain NUL or an unpaired surrogate',
      });
  } else if (Array.isArray(value)) {
    value.forEach((item, index) => unstorableText(item, [...path, index], found));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (UNSTORABLE.test(key))
        found.push({
          path: [...path, key],
          code: 'unstorable',
          message: 'a key must not contain NUL or an unpaired surrogate',
        });
      unstorableText(item, [...path, key], found);
    }
  }
  return found;
}

/** The shape of an INVALID_ARGUMENT for refused fields: the first one in the message, all in details. */
export function invalidInput(issues: InputIssue[]): ComputeError {
  const first = issues[0];
  const where = first && first.path.length ? first.path.join('.') : 'input';
  return new ComputeError(
    'INVALID_ARGUMENT',
    first ? `${where}: ${first.message}` : 'the input is not valid',
    {
      details: { issues },
    },
  );
}

/**
 * A request body as a JSON object, refused as INVALID_ARGUMENT when it is another JSON value or
 * holds text the store cannot hold. (Parse it first with `parseJsonBody`.)
 */
export function checkedBody(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ComputeError('INVALID_ARGUMENT', 'the request body must be a JSON object', {
      hint: 'Send a JSON object, for example {"tenantId":"acme"}.',
    });
  }
  const unstorable = unstorableText(body);
  if (unstorable.length) throw invalidInput(unstorable);
  return body as Record<string, unknown>;
}

/** The method's input parsed by its schema, or INVALID_ARGUMENT in the one shape. */
export function validatedInput<S extends z.ZodType>(schema: S, raw: unknown): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw invalidInput(
    parsed.error.issues.map((issue) => ({
      path: issue.path.map((key) => (typeof key === 'number' ? key : String(key))),
      code: issue.code,
      message: issue.message,
    })),
  );
}
