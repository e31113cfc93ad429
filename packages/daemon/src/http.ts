/** The daemon's calls to the public routes (nodes.join, nodes.claim), and the URLs it derives. */

/** `https://host` or `https://host/custom/compute` → the compute endpoint (`/api/compute` by default). */
export function endpointOf(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`--url ${url.slice(0, 200)} is not a URL`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
    throw new Error('--url must be an http(s) URL');
  const local =
    ['localhost', '127.0.0.1', '[::1]'].includes(parsed.hostname) || parsed.hostname.endsWith('.localhost');
  if (parsed.protocol === 'http:' && !local)
    throw new Error(
      '--url must be https for a server that is not on this machine (the join token would cross the network in clear)',
    );
  if (parsed.pathname === '/' || parsed.pathname === '') parsed.pathname = '/api/compute';
  parsed.pathname = parsed.pathname.replace(/\/+$/, '');
  parsed.search = '';
  parsed.hash = '';
  return parsed;
}

export function sessionUrl(url: string): string {
  const endpoint = endpointOf(url);
  endpoint.protocol = endpoint.protocol === 'https:' ? 'wss:' : 'ws:';
  endpoint.pathname = `${endpoint.pathname}/gateway/session`;
  return endpoint.toString();
}

export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Control characters from a server's words never reach the terminal or the journal. */
export function safe(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, ' ').slice(0, 2000);
}

export async function callPublic<T>(url: string, method: string, body: unknown): Promise<T> {
  const endpoint = endpointOf(url);
  const response = await fetch(`${endpoint.toString()}/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  let answer: { data?: T; error?: { code?: string; message?: string } };
  try {
    answer = (await response.json()) as typeof answer;
  } catch {
    throw new ApiError('INVALID_RESPONSE', `${method} answered ${response.status} with no JSON`);
  }
  if (answer.error || answer.data === undefined)
    throw new ApiError(
      safe(answer.error?.code ?? 'INVALID_RESPONSE'),
      safe(answer.error?.message ?? 'no data'),
    );
  return answer.data;
}
