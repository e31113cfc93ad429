/**
 * Where calls go. The guide's rules: an origin (`https://compute.example.com`) gets the default
 * base path `/api/compute`; a URL with a path (`https://host/custom/compute`) is the endpoint as it
 * is. Plain `http:` is allowed only for loopback names, so a token never crosses a network in
 * clear text.
 */
import { ComputeError } from '@better-compute/core';

/**
 * A word of the caller's inside a message: quoted, or described when it looks like a credential
 * (a token pasted where a method or URL was meant must not end up in a terminal or a log).
 */
function shown(word: string): string {
  return word.length > 40 || /_[A-Za-z0-9+/=.-]{20,}/.test(word) || /[A-Za-z0-9+/=]{32,}/.test(word)
    ? 'a value that looks like a credential (not shown)'
    : `"${word}"`;
}

/** The base path compute's routes are mounted at when the URL names only an origin. */
export const DEFAULT_BASE_PATH = '/api/compute';

/** Whether a host name is this machine: localhost, 127.0.0.1, [::1] or a *.localhost name. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]' || host.endsWith('.localhost');
}

/**
 * The endpoint calls are posted under, without a trailing slash. Throws INVALID_ARGUMENT for a
 * URL that is malformed, has credentials, a query or a fragment, or uses plain http to another
 * machine.
 */
export function resolveEndpoint(baseURL: string | URL): URL {
  let url: URL;
  try {
    url = new URL(String(baseURL));
  } catch {
    throw new ComputeError('INVALID_ARGUMENT', `not a URL: ${shown(String(baseURL))}`, {
      hint: 'Pass an origin such as https://compute.example.com, or a full endpoint.',
      details: { field: 'url' },
    });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ComputeError('INVALID_ARGUMENT', `the URL must use https (got ${url.protocol})`, {
      details: { field: 'url' },
    });
  }
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `plain http is allowed only for localhost; use https://${url.host}${url.pathname === '/' ? '' : url.pathname}`,
      {
        hint: 'A token must never cross a network in clear text: serve the API over https.',
        details: { field: 'url' },
      },
    );
  }
  if (url.username || url.password || url.search || url.hash) {
    throw new ComputeError('INVALID_ARGUMENT', 'the URL must not carry credentials, a query or a fragment', {
      details: { field: 'url' },
    });
  }
  const path = url.pathname.replace(/\/+$/, '');
  url.pathname = path === '' ? DEFAULT_BASE_PATH : path;
  return url;
}

/**
 * The path of a method under the endpoint: `system.version` → `/system/version`, a plugin's
 * `plugins.ID.GROUP.METHOD` → `/plugins/ID/GROUP/METHOD`.
 */
export function methodRoute(method: string): string {
  const parts = method.split('.');
  const plain = /^[A-Za-z][A-Za-z0-9-]*$/;
  const valid =
    parts.every((part) => plain.test(part)) &&
    (parts.length === 2 || (parts.length === 4 && parts[0] === 'plugins'));
  if (!valid) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${shown(method)} is not a method name like group.method or plugins.ID.GROUP.METHOD`,
      {
        details: { field: 'method' },
      },
    );
  }
  return `/${parts.join('/')}`;
}
