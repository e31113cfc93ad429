/**
 * One access line per API request (docs/operations.md, docs/decisions/access-logs.md): who asked
 * what, how it ended and how long it took. Built only from the request line, the route table, the
 * caller the pipeline noted and the answer's status, code and request id: never a header, a body,
 * a query string or a credential, and a path that looks like it carries one is masked.
 */
import { hideSecrets, safeText } from '@better-compute/core';

export type LogFormat = 'json' | 'text';

export interface AccessEntry {
  /** When the request arrived (ISO 8601, UTC). */
  time: string;
  /** The id the answer carries (`x-request-id`, the error envelope's `requestId`). */
  requestId: string | null;
  httpMethod: string;
  /** The path without its query string. */
  path: string;
  /** The API method the path routes to (`system.version`); null for IAM's routes and unknown paths. */
  method: string | null;
  /** The tenant the call acted in, once the credential and tenant steps knew it. */
  tenant: string | null;
  /** `person`, `service-account` or `agent`; null for a call without a credential. */
  principalKind: string | null;
  status: number;
  /** `OK`, or the error envelope's code; `CLIENT_CLOSED` when the client left before an answer. */
  code: string | null;
  durationMs: number;
}

/** Longer paths are cut: a line stays a line, whatever a client sends. */
const PATH_LIMIT = 512;

/** A request path as it may be logged: cut, and masked where it looks like a credential. */
export function loggablePath(pathname: string): string {
  const cut = pathname.length > PATH_LIMIT ? `${pathname.slice(0, PATH_LIMIT)}…` : pathname;
  return hideSecrets(cut);
}

/** The error code of an error envelope (`{"error":{"code":…}}`, compute's and IAM's), else null. */
export function envelopeCode(status: number, body: string | Buffer): string | null {
  if (status < 400) return 'OK';
  // An envelope is small; anything larger is no envelope of ours and is not parsed.
  if (body.length > 16_384) return null;
  try {
    const code = (JSON.parse(body.toString()) as { error?: { code?: unknown } }).error?.code;
    return typeof code === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(code) ? code : null;
  } catch {
    return null;
  }
}

function textLine(entry: AccessEntry): string {
  const who = entry.principalKind ? `${entry.principalKind}@${entry.tenant ?? '-'}` : (entry.tenant ?? '-');
  return safeText(
    [
      entry.time,
      entry.requestId ?? '-',
      entry.httpMethod,
      entry.path,
      entry.method ?? '-',
      who,
      entry.status,
      entry.code ?? '-',
      `${entry.durationMs}ms`,
    ].join(' '),
  );
}

/** An access log writing each entry as one line in the format, to `write`. */
export function accessLogger(format: LogFormat, write: (line: string) => void): (entry: AccessEntry) => void {
  // A literal of one fixed shape, in the documented order: V8 serialises it on its fast path,
  // where spreading the entry into a new object first costs a copy per request.
  return format === 'json'
    ? (entry) =>
        write(
          JSON.stringify({
            log: 'access',
            time: entry.time,
            requestId: entry.requestId,
            httpMethod: entry.httpMethod,
            path: entry.path,
            method: entry.method,
            tenant: entry.tenant,
            principalKind: entry.principalKind,
            status: entry.status,
            code: entry.code,
            durationMs: entry.durationMs,
          }),
        )
    : (entry) => write(textLine(entry));
}

/** Lines held at most before they are written at once, whatever the turn of the event loop. */
const BATCH_BYTES = 64 * 1024;

export interface LineBatch {
  /** Holds one line (without its line end) for the next write. */
  line(text: string): void;
  /** Writes the lines held now, if any: before the process stops. */
  flush(): void;
}

/**
 * Lines gathered and handed to `write` together (joined by line ends, without the last one) once
 * per turn of the event loop, or sooner past 64 KiB. A busy replica answers many requests a turn:
 * one write for all their access lines instead of a system call each, which on a pipe or a file
 * is most of what a line costs (docs/operations.md). The order of lines is kept; `flush` writes
 * what is held when the server stops.
 */
export function lineBatch(write: (text: string) => void): LineBatch {
  let held: string[] = [];
  let bytes = 0;
  let scheduled = false;
  function flush(): void {
    scheduled = false;
    if (held.length === 0) return;
    const lines = held;
    held = [];
    bytes = 0;
    write(lines.join('\n'));
  }
  return {
    line(text) {
      held.push(text);
      bytes += text.length;
      if (bytes >= BATCH_BYTES) return flush();
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}
