/**
 * The browser's side of the one origin: the typed compute client and Better IAM's routes, both
 * authenticated by the session cookie, which compute and IAM accept only on POSTs carrying
 * `X-Better-Compute: 1` from this origin.
 */
import { ComputeClientError, createComputeClient, type ComputeClient } from '@better-compute/client';

export const CSRF_HEADERS = { 'x-better-compute': '1' } as const;

export function browserClient(tenantId: string): ComputeClient {
  return createComputeClient({
    baseURL: window.location.origin,
    tenant: tenantId,
    headers: { ...CSRF_HEADERS },
    fetch: (request) => globalThis.fetch(request),
  });
}

interface Envelope {
  data?: unknown;
  error?: { code: string; message: string; hint?: string; details?: Record<string, unknown> };
}

/** Calls Better IAM at /api/iam/{path}; throws a ComputeClientError with the server's code and hint. */
export async function iamCall<T>(path: string, input: Record<string, unknown>): Promise<T> {
  let response: Response;
  try {
    response = await fetch(`/api/iam/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...CSRF_HEADERS },
      body: JSON.stringify(input),
      credentials: 'same-origin',
    });
  } catch (error) {
    throw new ComputeClientError('UNAVAILABLE', 'the console could not be reached', {
      status: 0,
      hint: 'Check your connection and try again.',
      cause: error,
    });
  }
  let envelope: Envelope;
  try {
    envelope = (await response.json()) as Envelope;
  } catch {
    throw new ComputeClientError('INVALID_RESPONSE', `the server answered ${response.status} without JSON`, {
      status: response.status,
    });
  }
  if (envelope.error)
    throw new ComputeClientError(envelope.error.code, envelope.error.message, {
      status: response.status,
      ...(envelope.error.hint ? { hint: envelope.error.hint } : {}),
      ...(envelope.error.details ? { details: envelope.error.details } : {}),
    });
  return envelope.data as T;
}

/** A fresh idempotency key for a create the console sends. */
export function idempotencyKey(): string {
  return `console-${crypto.randomUUID()}`;
}
