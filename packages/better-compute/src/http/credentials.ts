/**
 * Where a request's credential comes from, and the CSRF rule for cookies: a browser sends cookies
 * on its own, so a cookie credential counts only on a POST that also carries `X-Better-Compute: 1`
 * (which a cross-site form cannot set) from an Origin the deployment trusts. Bearer tokens need
 * neither: a page cannot attach them without the user's script.
 */
import { ComputeError } from '@better-compute/core';
import type { ApiCall } from './handler.js';

export const SESSION_COOKIE = 'better-iam.session';

export type RequestCredential = { kind: 'bearer' | 'cookie'; token: string } | null;

function cookieValue(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const index = part.indexOf('=');
    if (index > 0 && part.slice(0, index).trim() === name)
      return decodeURIComponent(part.slice(index + 1).trim());
  }
  return undefined;
}

/**
 * The request's credential. Without a configured list, the only trusted Origin is the request's own
 * (the console served by the same host).
 */
export function credentialOf(
  request: ApiCall,
  trustedOrigins: readonly string[] | undefined,
): RequestCredential {
  const authorization = request.header('authorization');
  if (authorization) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) {
      throw new ComputeError('UNAUTHENTICATED', 'the Authorization header must be "Bearer <token>"');
    }
    return { kind: 'bearer', token: match[1]! };
  }
  const cookie = cookieValue(request.header('cookie'), SESSION_COOKIE);
  if (!cookie) return null;
  const origin = request.header('origin');
  const trusted = trustedOrigins ?? [request.origin];
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
        hint: 'Send the session as "Authorization: Bearer <token>", or call from the console’s own origin.',
      },
    );
  }
  return { kind: 'cookie', token: cookie };
}
