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

/** Text JSON writes as it is between quotes: most fields (ids, routes, codes) are nothing else. */
const PLAIN_TEXT = /^[\w .:@/+=,~-]*$/;
/** A JSON string, or null: the one place a line's text fields are quoted. */
const jsonText = (value: string | null): string =>
  value === null ? 'null' : PLAIN_TEXT.test(value) ? `"${value}"` : JSON.stringify(value);

/**
 * An access log writing each entry as one line in the format, to `write`. The JSON line is built
 * as text in the documented order, quoting each text field: half the time of JSON.stringify over
 * a new object, on every request (docs/decisions/access-log-writes.md).
 */
export function accessLogger(format: LogFormat, write: (line: string) => void): (entry: AccessEntry) => void {
  return format === 'json'
    ? (entry) =>
        write(
          `{"log":"access","time":${jsonText(entry.time)},"requestId":${jsonText(entry.requestId)},` +
            `"httpMethod":${jsonText(entry.httpMethod)},"path":${jsonText(entry.path)},` +
            `"method":${jsonText(entry.method)},"tenant":${jsonText(entry.tenant)},` +
            `"principalKind":${jsonText(entry.principalKind)},"status":${entry.status},` +
            `"code":${jsonText(entry.code)},"durationMs":${entry.durationMs}}`,
        )
    : (entry) => write(textLine(entry));
}

/** What an open note needs of its answer: whether its client is gone. */
interface Connection {
  readonly destroyed: boolean;
}

let lastMillisecond = -1;
let lastIsoTime = '';
/** An instant as ISO 8601 to the millisecond; requests arriving in the same millisecond share one string. */
function isoTime(millisecond: number): string {
  if (millisecond !== lastMillisecond) {
    lastMillisecond = millisecond;
    lastIsoTime = new Date(millisecond).toISOString();
  }
  return lastIsoTime;
}

/**
 * One request's access line in the making: the pipeline notes the caller, the answer its request
 * id and code, and `end` writes the line once, however many ways the request ends (an answer
 * written, an error, the connection closing under a stream).
 */
export class AccessNote implements AccessEntry {
  time = '';
  requestId: string | null = null;
  code: string | null = null;
  tenant: string | null = null;
  principalKind: string | null = null;
  status = 0;
  durationMs = 0;
  private ended = false;
  /** The server's notes still open (OpenNotes), which this one leaves as it ends. */
  private openNotes: Map<AccessNote, Connection> | null = null;
  // The wall clock for the line's time (it follows the host's clock as it is set); the monotonic
  // one for the duration.
  private readonly arrived = Date.now();
  private readonly started = performance.now();

  constructor(
    private readonly log: (entry: AccessEntry) => void,
    readonly httpMethod: string,
    readonly path: string,
    readonly method: string | null,
  ) {}

  /** Lists the note in a server's open notes until it ends (OpenNotes.track). */
  listIn(openNotes: Map<AccessNote, Connection>, connection: Connection): void {
    openNotes.set(this, connection);
    this.openNotes = openNotes;
  }

  /**
   * The answer's status, or null when the client left before one was sent (`CLIENT_CLOSED`). The
   * note itself is the entry handed to the log: one object per request, not two.
   */
  end(status: number | null): void {
    if (this.ended) return;
    this.ended = true;
    this.openNotes?.delete(this);
    this.time = isoTime(this.arrived);
    this.durationMs = Math.round((performance.now() - this.started) * 10) / 10;
    if (status === null) this.code = 'CLIENT_CLOSED';
    this.status = status ?? 0;
    this.log(this);
  }
}

/**
 * The access notes of one server's requests not answered yet, looked at once a second: a client
 * that left a request its handler never answers (a hung call, a stream that never started) gets its
 * `CLIENT_CLOSED` line within the second, with one timer per server instead of a `close` listener
 * per request (docs/decisions/access-log-writes.md).
 */
export class OpenNotes {
  private readonly open = new Map<AccessNote, Connection>();
  private readonly timer: NodeJS.Timeout;

  constructor(everyMs = 1000) {
    this.timer = setInterval(() => this.sweep(), everyMs).unref();
  }

  /** Watches `note` until it ends; `connection` is its answer's (`destroyed` once the client left). */
  track(note: AccessNote, connection: Connection): void {
    note.listIn(this.open, connection);
  }

  /** Ends the notes whose client left (each leaves the set as it ends). */
  sweep(): void {
    for (const [note, connection] of this.open) if (connection.destroyed) note.end(null);
  }

  /** The number of requests still open: for tests and the server's own shutdown. */
  get size(): number {
    return this.open.size;
  }

  /** Stops the timer, after a last look: the server is closing. */
  close(): void {
    this.sweep();
    clearInterval(this.timer);
  }
}

/** Bytes of lines held at most before they are written at once, whatever the time. */
const BATCH_BYTES = 64 * 1024;
/** How long a line may wait for others before it is written (nginx's `access_log … flush=`). */
const BATCH_WAIT_MS = 100;

export interface LineBatch {
  /** Holds one line (without its line end) for the next write. */
  line(text: string): void;
  /** Writes the lines held now, if any. */
  flush(): void;
  /** Writes what is held and lets the batch go: the process's exit no longer holds it. */
  close(): void;
}

/** Every batch's flush, called once when the process exits however it ends. */
const flushAtExit = new Set<() => void>();
let exitHooked = false;

/**
 * Lines gathered and handed to `write` together, as UTF-8 with a line end after each, at most
 * 100 ms after the first of them, or sooner past 64 KiB. A busy replica answers hundreds of
 * requests in that time: one write for all their access lines instead of a system call each,
 * which on a pipe or a file is most of what a line costs (docs/operations.md). Each line is
 * encoded into the batch's buffer as it comes, so no line's text outlives its request (held
 * strings would survive the garbage collector's young generation and be copied by it). `write`
 * must be done with the bytes when it returns: the buffer is reused. The order of lines is kept;
 * `close` writes what is held when the server stops, and the process's exit writes what is left
 * if it ends another way. The timer holds no process open.
 */
export function lineBatch(write: (bytes: Uint8Array) => void): LineBatch {
  const buffer = Buffer.allocUnsafe(BATCH_BYTES);
  let used = 0;
  let timer: NodeJS.Timeout | null = null;
  function flush(): void {
    if (timer) clearTimeout(timer);
    timer = null;
    if (used === 0) return;
    const bytes = buffer.subarray(0, used);
    used = 0;
    write(bytes);
  }
  flushAtExit.add(flush);
  if (!exitHooked) {
    exitHooked = true;
    process.once('exit', () => flushAtExit.forEach((each) => each()));
  }
  return {
    line(text) {
      // A UTF-16 unit takes at most 3 bytes in UTF-8: room for that, and the line end.
      const most = text.length * 3 + 1;
      if (used + most > BATCH_BYTES) flush();
      if (most > BATCH_BYTES) return write(Buffer.from(`${text}\n`, 'utf8'));
      used += buffer.write(text, used, 'utf8');
      buffer[used++] = 0x0a;
      if (!timer) timer = setTimeout(flush, BATCH_WAIT_MS).unref();
    },
    flush,
    close() {
      flush();
      flushAtExit.delete(flush);
    },
  };
}
