/**
 * QEMU's machine protocol over a VM's unix socket, and the serial console kept in a bounded ring.
 * QEMU serves one QMP client at a time, so the runtime opens a connection per operation and closes
 * it right after, leaving the socket free for the next caller. The QEMU guest agent speaks the same
 * protocol from inside the guest, without a greeting (`openGuestAgent`).
 */
import { connect, type Socket } from 'node:net';

/** The largest QMP reply read before the connection is dropped (QEMU's replies are small). */
const QMP_LINE_LIMIT = 1 << 20;

export class QmpConnection {
  private buffer = '';
  private pending: Array<{
    resolve: (message: Record<string, unknown>) => void;
    reject: (e: Error) => void;
  }> = [];
  private closedError: Error | null = null;
  /** A guest agent's sync in progress: replies are dropped until the one carrying this id. */
  private syncing: { id: number; done: () => void } | null = null;

  private constructor(
    private readonly socket: Socket,
    /** Who answers, for messages: QMP or the guest agent. */
    private readonly who: string,
  ) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      if (this.buffer.length > QMP_LINE_LIMIT) return this.fail(new Error('QMP sent an oversized reply'));
      let newline: number;
      while ((newline = this.buffer.indexOf('\n')) >= 0) {
        // A guest agent's delimited sync answers after a 0xFF byte, which UTF-8 decodes as U+FFFD.
        const line = this.buffer
          .slice(0, newline)
          .replace(/^[\s\uFFFD]+/, '')
          .trim();
        this.buffer = this.buffer.slice(newline + 1);
        if (!line) continue;
        let message: Record<string, unknown>;
        try {
          message = JSON.parse(line) as Record<string, unknown>;
        } catch {
          return this.fail(new Error('QMP sent a line that is not JSON'));
        }
        if (this.syncing) {
          if (message.return === this.syncing.id) this.syncing.done();
          continue;
        }
        if (!('event' in message)) this.pending.shift()?.resolve(message);
      }
    });
    socket.on('error', (error) => this.fail(error));
    socket.on('close', () => this.fail(new Error('the QMP socket closed')));
  }

  private fail(error: Error): void {
    this.closedError ??= error;
    for (const waiter of this.pending.splice(0)) waiter.reject(error);
    this.socket.destroy();
  }

  /** Connects, reads the greeting and leaves negotiation mode; gives up after timeoutMs. */
  static open(path: string, timeoutMs = 10_000): Promise<QmpConnection> {
    return QmpConnection.connected(path, timeoutMs, 'QMP', async (qmp) => {
      await new Promise<Record<string, unknown>>((resolve, reject) => qmp.pending.push({ resolve, reject }));
      await qmp.execute('qmp_capabilities');
    });
  }

  /** Connects to `path` and runs `handshake`, within timeoutMs or not at all. */
  private static async connected(
    path: string,
    timeoutMs: number,
    who: string,
    handshake: (connection: QmpConnection) => Promise<void>,
  ): Promise<QmpConnection> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect(path, () => resolve(s));
      s.once('error', reject);
    });
    const connection = new QmpConnection(socket, who);
    const timer = setTimeout(
      () => connection.fail(new Error(`${who} did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    try {
      await handshake(connection);
    } catch (error) {
      connection.close();
      throw error;
    } finally {
      clearTimeout(timer);
    }
    return connection;
  }

  /**
   * Connects to a guest agent's socket and synchronises: a 0xFF byte resets the agent's parser,
   * and replies left from an earlier client are dropped until the one to this sync's id. Fails
   * after timeoutMs, when no agent runs in the guest (yet).
   */
  static openGuestAgent(path: string, timeoutMs: number): Promise<QmpConnection> {
    return QmpConnection.connected(path, timeoutMs, 'the guest agent', async (agent) => {
      const id = Math.floor(Math.random() * 2 ** 31);
      await new Promise<void>((resolve, reject) => {
        agent.syncing = { id, done: () => ((agent.syncing = null), resolve()) };
        agent.pending.push({ resolve: () => undefined, reject });
        agent.socket.write(
          Buffer.concat([
            Buffer.from([0xff]),
            Buffer.from(`{"execute":"guest-sync-delimited","arguments":{"id":${id}}}\n`),
          ]),
        );
      });
      agent.pending.splice(0);
    });
  }

  execute(command: string, args?: Record<string, unknown>): Promise<unknown> {
    if (this.closedError) return Promise.reject(this.closedError);
    return new Promise((resolve, reject) => {
      this.pending.push({
        resolve: (message) => {
          if ('error' in message) {
            const error = message.error as { desc?: string } | undefined;
            reject(new Error(`${this.who} ${command}: ${String(error?.desc ?? 'failed')}`));
          } else resolve(message.return);
        },
        reject,
      });
      this.socket.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}) })}\n`);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Runs one QMP command on a fresh connection. */
export async function qmpOnce(
  path: string,
  command: string,
  args?: Record<string, unknown>,
): Promise<unknown> {
  const qmp = await QmpConnection.open(path);
  try {
    return await qmp.execute(command, args);
  } finally {
    qmp.close();
  }
}

/** The last `capacity` bytes of a console, with listeners for what arrives next. */
export class ConsoleRing {
  private chunks: Buffer[] = [];
  private size = 0;
  private readonly listeners = new Set<(chunk: Buffer) => void>();
  constructor(readonly capacity = 64 * 1024) {}

  push(chunk: Buffer): void {
    for (const listener of this.listeners) listener(chunk);
    const kept = chunk.length > this.capacity ? chunk.subarray(chunk.length - this.capacity) : chunk;
    this.chunks.push(kept);
    this.size += kept.length;
    while (this.size > this.capacity) {
      const first = this.chunks[0]!;
      const excess = this.size - this.capacity;
      if (first.length <= excess) {
        this.chunks.shift();
        this.size -= first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.size -= excess;
      }
    }
  }

  contents(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }

  /** Calls `listener` with every chunk from now on; returns the call that stops it. */
  listen(listener: (chunk: Buffer) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves with the first match of `pattern` in the text that arrives (or is already there). */
  waitFor(pattern: RegExp, timeoutMs: number, signal?: AbortSignal): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      // Only the tail is searched again as text arrives, so a long console costs no more than a short one.
      let text = this.contents().toString('latin1');
      const check = () => {
        const match = text.match(pattern);
        if (match) {
          finish();
          resolve(match);
        }
        if (text.length > 2 * this.capacity) text = text.slice(-this.capacity);
      };
      const stop = this.listen((chunk) => {
        text += chunk.toString('latin1');
        check();
      });
      const onAbort = () => {
        finish();
        reject(new Error('cancelled'));
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      function finish() {
        clearTimeout(timer);
        stop();
        signal?.removeEventListener('abort', onAbort);
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      if (signal?.aborted) return onAbort();
      check();
    });
  }
}
