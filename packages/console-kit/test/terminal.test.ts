/**
 * console-kit's terminal part without React, against a real WebSocket server speaking the tunnel
 * route's protocol: the ticket from `open` names the socket, keys typed into the terminal reach the
 * remote as bytes, the size goes as a resize message on open, the remote's bytes are drawn, and its
 * exit status is said in the status store; `close()` detaches. xterm.js needs a page's DOM, which
 * Node has not: the terminal it would draw is a recorder with xterm's shape (the browser tests drive
 * the real one), and `ResizeObserver` is a no-op for the same reason.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mountTerminal, TERMINAL_CONNECTED_TEXT, type Xterm } from '../src/index.js';

const globals = globalThis as unknown as Record<string, unknown>;
const saved = { WebSocket: globals.WebSocket, ResizeObserver: globals.ResizeObserver };

interface Received {
  path: string;
  bytes: string[];
  controls: unknown[];
}

let port = 0;
const received: Received[] = [];
const server = createServer();
const sockets = new WebSocketServer({ server });
sockets.on('connection', (socket, request) => {
  const seen: Received = { path: request.url ?? '', bytes: [], controls: [] };
  received.push(seen);
  socket.on('message', (data, isBinary) => {
    if (!isBinary) {
      seen.controls.push(JSON.parse(String(data)));
      return;
    }
    const text = Buffer.from(data as Buffer).toString('utf8');
    seen.bytes.push(text);
    // A shell that echoes, and exits with 3 when told to.
    socket.send(Buffer.from(`echo:${text}`));
    if (text === 'exit 3\r') {
      socket.send(JSON.stringify({ t: 'exit', status: 3 }));
      socket.close(1000);
    }
  });
});

class RecordingTerminal {
  static last: RecordingTerminal | undefined;
  cols = 120;
  rows = 30;
  written: string[] = [];
  disposed = false;
  #typed: ((data: string) => void) | undefined;
  constructor() {
    RecordingTerminal.last = this;
  }
  loadAddon() {}
  open() {}
  focus() {}
  write(data: Uint8Array | string) {
    this.written.push(typeof data === 'string' ? data : new TextDecoder().decode(data));
  }
  onData(listener: (data: string) => void) {
    this.#typed = listener;
    return { dispose: () => (this.#typed = undefined) };
  }
  onResize() {
    return { dispose() {} };
  }
  type(data: string) {
    this.#typed?.(data);
  }
  dispose() {
    this.disposed = true;
  }
}
const xterm = async (): Promise<Xterm> =>
  ({
    Terminal: RecordingTerminal,
    FitAddon: class {
      fit() {}
      activate() {}
      dispose() {}
    },
  }) as unknown as Xterm;

beforeAll(async () => {
  globals.WebSocket = WebSocket;
  globals.ResizeObserver = class {
    observe() {}
    disconnect() {}
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  globals.WebSocket = saved.WebSocket;
  globals.ResizeObserver = saved.ResizeObserver;
  sockets.close();
  await new Promise((resolve) => server.close(resolve));
});

const tunnelUrl = (ticket: string) =>
  `ws://127.0.0.1:${port}/api/compute/tunnels/${encodeURIComponent(ticket)}`;

describe('mountTerminal', () => {
  it('connects with the ticket, sends keys as bytes and its size, draws the remote and says its exit', async () => {
    const part = mountTerminal({} as HTMLElement, {
      open: async () => ({ ticket: 'tkt one' }),
      xterm,
      tunnelUrl,
    });
    expect(part.get()).toMatchObject({ phase: 'connecting', text: 'Connecting…' });
    const phases: string[] = [];
    part.subscribe(() => phases.push(part.get().phase));
    await expect.poll(() => part.get().text).toBe(TERMINAL_CONNECTED_TEXT);
    const terminal = RecordingTerminal.last!;
    terminal.type('ls\r');
    await expect.poll(() => terminal.written.join('')).toBe('echo:ls\r');
    terminal.type('exit 3\r');
    await expect.poll(() => part.get().text).toBe('The remote program exited with status 3.');
    expect(part.get().phase).toBe('ended');
    expect(phases).toEqual(['connected', 'ended']);
    const seen = received.at(-1)!;
    expect(seen.path).toBe('/api/compute/tunnels/tkt%20one');
    expect(seen.controls).toEqual([{ t: 'resize', cols: 120, rows: 30 }]);
    expect(seen.bytes).toEqual(['ls\r', 'exit 3\r']);
    part.close();
    expect(terminal.disposed).toBe(true);
  });

  it('says why it could not connect when the ticket is refused, and close() detaches a live one', async () => {
    const refused = new Error('compute:nodes:console is not allowed');
    const failed = mountTerminal({} as HTMLElement, {
      open: async () => Promise.reject(refused),
      xterm,
      tunnelUrl,
    });
    await expect.poll(() => failed.get().phase).toBe('failed');
    expect(failed.get()).toEqual({ phase: 'failed', text: 'Not connected.', error: refused });

    const before = received.length;
    const live = mountTerminal({} as HTMLElement, {
      open: async () => ({ ticket: 'two' }),
      xterm,
      tunnelUrl,
    });
    await expect.poll(() => live.get().phase).toBe('connected');
    expect(received).toHaveLength(before + 1);
    live.close();
    // Detached: the status stays as it was, and nothing more is said.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(live.get().phase).toBe('connected');
    expect(RecordingTerminal.last!.disposed).toBe(true);
  });
});
