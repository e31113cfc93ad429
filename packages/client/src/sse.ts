/**
 * A server-sent events parser, as the HTML standard's "event stream interpretation" reads a
 * stream: lines end with CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the
 * next are one line end), `data:` lines join with LF, `:` lines are comments, a field without a
 * colon has an empty value, one space after the colon is dropped, an `id` holding NUL is ignored,
 * `retry` counts only when it is all digits, and a blank line dispatches. Bytes may be split
 * anywhere, inside a UTF-8 sequence too. A line longer than `maxLineLength` is refused, so a server
 * that never ends a line cannot grow the buffer without bound.
 */

export interface SseMessage {
  /** The `event:` field, or `message` when the frame named none. */
  event: string;
  data: string;
  /** The stream's last event id after this frame (ids persist until another `id:` changes them). */
  lastEventId: string;
}

export interface SseHandlers {
  message(message: SseMessage): void;
  /** A `retry:` field: the reconnection delay the server advises, in milliseconds. */
  retry?(ms: number): void;
  comment?(text: string): void;
}

export class SseLineTooLong extends Error {
  constructor(limit: number) {
    super(`the event stream sent a line longer than ${limit} characters`);
    this.name = 'SseLineTooLong';
  }
}

export const DEFAULT_MAX_LINE_LENGTH = 1024 * 1024;

export class SseParser {
  readonly #handlers: SseHandlers;
  readonly #maxLine: number;
  readonly #decoder = new TextDecoder('utf-8');
  #buffer = '';
  #afterCR = false;
  #first = true;
  #data: string[] = [];
  #event = '';
  #lastEventId = '';

  constructor(handlers: SseHandlers, options: { maxLineLength?: number; lastEventId?: string } = {}) {
    this.#handlers = handlers;
    this.#maxLine = options.maxLineLength ?? DEFAULT_MAX_LINE_LENGTH;
    this.#lastEventId = options.lastEventId ?? '';
  }

  /** Feeds bytes (or already decoded text). */
  push(chunk: Uint8Array | string): void {
    let text = typeof chunk === 'string' ? chunk : this.#decoder.decode(chunk, { stream: true });
    if (this.#first && text.length > 0) {
      this.#first = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code !== 10 && code !== 13) continue;
      if (code === 10 && this.#afterCR && i === start && this.#buffer === '') {
        // The LF of a CRLF whose CR ended the previous line.
        this.#afterCR = false;
        start = i + 1;
        continue;
      }
      this.#line(this.#buffer + text.slice(start, i));
      this.#buffer = '';
      this.#afterCR = code === 13;
      start = i + 1;
    }
    if (start < text.length) {
      this.#afterCR = false;
      this.#buffer += text.slice(start);
      if (this.#buffer.length > this.#maxLine) throw new SseLineTooLong(this.#maxLine);
    }
  }

  /** The stream ended: a frame without its blank line is dropped, as the standard says. */
  end(): void {
    this.#decoder.decode();
    this.#buffer = '';
    this.#data = [];
    this.#event = '';
  }

  get lastEventId(): string {
    return this.#lastEventId;
  }

  #line(line: string): void {
    if (line.length > this.#maxLine) throw new SseLineTooLong(this.#maxLine);
    if (line === '') return this.#dispatch();
    if (line.startsWith(':')) {
      this.#handlers.comment?.(line.slice(1).replace(/^ /, ''));
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    switch (field) {
      case 'data':
        this.#data.push(value);
        break;
      case 'event':
        this.#event = value;
        break;
      case 'id':
        if (!value.includes('\u0000')) this.#lastEventId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.#handlers.retry?.(Number(value));
        break;
      default:
      // Unknown fields are ignored.
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const event = this.#event;
    this.#data = [];
    this.#event = '';
    if (data.length === 0) return;
    this.#handlers.message({
      event: event || 'message',
      data: data.join('\n'),
      lastEventId: this.#lastEventId,
    });
  }
}
