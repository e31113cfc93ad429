/** The daemon's calls to the public routes (nodes.join, nodes.claim), and the URLs it derives. */
import { request as httpsRequest } from 'node:https';
import { rootCertificates } from 'node:tls';

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
export function safe(text: unknown): string {
  // A caller's `error.message` is not a string when something threw a value that is not an Error.
  return String(text ?? '')
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, ' ')
    .slice(0, 2000);
}

/**
 * POSTs JSON and reads the answer. With `ca` (a --ca-file's PEM), an https server is checked
 * against those certificates as well as the system's, so a deployment whose API serves a
 * certificate from its own machine CA can be joined; fetch has no way to add a CA per call.
 */
async function postJson(
  target: URL,
  body: string,
  ca: string | null,
): Promise<{ status: number; text: string }> {
  if (!ca || target.protocol !== 'https:') {
    const response = await fetch(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(30_000),
    });
    return { status: response.status, text: await response.text() };
  }
  return new Promise((resolve, reject) => {
    const request = httpsRequest(
      target,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        ca: [...rootCertificates, ca],
        timeout: 30_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          // A public route's answer is small; a server that streams more is not one of ours.
          if (size > 1 << 20) request.destroy(new Error('the answer is larger than 1 MiB'));
          else chunks.push(chunk);
        });
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error('no answer in 30 s')));
    request.on('error', reject);
    request.end(body);
  });
}

/** Why a server could not be reached, in words an operator can act on. */
function unreachable(endpoint: URL, error: unknown, withCa: boolean): string {
  let cause: unknown = error;
  while (cause instanceof Error && cause.cause) cause = cause.cause;
  const code = (cause as { code?: string } | null)?.code ?? '';
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code))
    return `the certificate of ${endpoint.origin} is not trusted (${code})${withCa ? '' : '; if it comes from the deployment’s machine CA, pass --ca-file with that CA’s certificate'}`;
  return `${endpoint.origin} did not answer (${safe(code || (cause instanceof Error ? cause.message : 'no answer'))})`;
}

export async function callPublic<T>(
  url: string,
  method: string,
  body: unknown,
  ca: string | null = null,
): Promise<T> {
  const endpoint = endpointOf(url);
  const target = new URL(`${endpoint.toString()}/${method.replaceAll('.', '/')}`);
  const response = await postJson(target, JSON.stringify(body), ca).catch((error: unknown) => {
    throw new ApiError('UNAVAILABLE', unreachable(endpoint, error, ca !== null));
  });
  let answer: { data?: T; error?: { code?: string; message?: string } };
  try {
    answer = JSON.parse(response.text) as typeof answer;
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
