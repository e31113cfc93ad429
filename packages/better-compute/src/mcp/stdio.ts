/**
 * MCP over standard input and output: one JSON-RPC message a line, as the SDK's stdio transport
 * reads them, over the CLI's terminal (so the command touches no `process`). It differs from the
 * SDK's in what a hostile or careless client can do to it: a line is gathered as a list of chunks
 * (not copied again at each chunk), and a line past `maxMessageBytes` is dropped, answered with
 * PAYLOAD_TOO_LARGE when its request id can be read, and the server goes on; the SDK's closes the
 * transport, and with it the server, at its 10 MiB buffer.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';

/** The largest message read: room for a body the API refuses (64 KiB) many times over. */
export const MAX_STDIO_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface LineTransportOptions {
  /** Calls `listener` with each chunk read; returns a function that stops reading. */
  onInput(listener: (data: Uint8Array) => void): () => void;
  /** Writes to standard output (only protocol goes there). */
  write(data: string): void;
  maxMessageBytes?: number | undefined;
  /** Diagnostics, for standard error. */
  log?: ((message: string) => void) | undefined;
}

/** How much of a dropped line is kept to find its id: the SDK writes `id` last, others first. */
const EDGE = 512;
const ID_LAST = /"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,128}")\s*\}\s*$/;
const ID_FIRST = /^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,128}")/;

export class LineTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  readonly #options: LineTransportOptions;
  readonly #max: number;
  #parts: Buffer[] = [];
  #size = 0;
  /** While a line past the limit is being dropped: its first and last bytes. */
  #dropping: { head: Buffer; tail: Buffer } | null = null;
  #stop: (() => void) | undefined;
  #closed = false;

  constructor(options: LineTransportOptions) {
    this.#options = options;
    this.#max = options.maxMessageBytes ?? MAX_STDIO_MESSAGE_BYTES;
  }

  async start(): Promise<void> {
    this.#stop = this.#options.onInput((data) =>
      this.#read(Buffer.from(data.buffer, data.byteOffset, data.byteLength)),
    );
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) return;
    this.#options.write(`${JSON.stringify(message)}\n`);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stop?.();
    this.#parts = [];
    this.onclose?.();
  }

  #read(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      this.#take(chunk.subarray(start, end));
      this.#lineEnded();
      start = end + 1;
    }
    if (start < chunk.length) this.#take(chunk.subarray(start));
  }

  /** Adds a piece of the current line, or keeps the edges of one being dropped. */
  #take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.#dropping) {
      this.#dropping.tail = Buffer.concat([this.#dropping.tail, piece]).subarray(-EDGE);
      return;
    }
    if (this.#size + piece.length > this.#max) {
      const line = Buffer.concat([...this.#parts, piece]);
      this.#dropping = { head: Buffer.from(line.subarray(0, EDGE)), tail: Buffer.from(line.subarray(-EDGE)) };
      this.#parts = [];
      this.#size = 0;
      return;
    }
    // Copied: the chunk's memory may be reused by the reader.
    this.#parts.push(Buffer.from(piece));
    this.#size += piece.length;
  }

  #lineEnded(): void {
    if (this.#dropping) {
      const { head, tail } = this.#dropping;
      this.#dropping = null;
      this.#refuseLarge(head.toString('utf8'), tail.toString('utf8'));
      return;
    }
    const line = (this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts))
      .toString('utf8')
      .replace(/\r$/, '');
    this.#parts = [];
    this.#size = 0;
    if (line.trim() === '') return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch {
      this.#options.log?.('mcp: a line on standard input is not a JSON-RPC message; it was ignored');
      return;
    }
    this.onmessage?.(message);
  }

  /** A line past the limit: its request answered PAYLOAD_TOO_LARGE when its id can be read. */
  #refuseLarge(head: string, tail: string): void {
    const limit = `${Math.round(this.#max / (1024 * 1024))} MiB`;
    const found = ID_LAST.exec(tail) ?? ID_FIRST.exec(head);
    this.#options.log?.(`mcp: a message larger than ${limit} was dropped`);
    if (!found) return;
    const id = JSON.parse(found[1]!) as string | number;
    const error = {
      code: 'PAYLOAD_TOO_LARGE',
      message: `the message is larger than ${limit}`,
      hint: 'Send less: a method takes a body of at most 64 KiB.',
    };
    void this.send({
      jsonrpc: '2.0',
      id,
      error: { code: -32600, message: `${error.code}: ${error.message}`, data: { error } },
    });
  }
}
