/**
 * Everything a command touches comes through a CliIO, so programs and tests run commands without a
 * real terminal. `processIO()` is the one place that reads the process: commands never read
 * `process.env` or write `process.stdout` themselves.
 */
import { writeSync } from 'node:fs';

/** The interactive terminal `console` and `exec` attach to. */
export interface CliTerminal {
  /** Calls `listener` with each chunk typed; returns a function that stops listening. */
  onInput(listener: (data: Uint8Array) => void): () => void;
  write(data: Uint8Array | string, channel?: 'stdout' | 'stderr'): void;
  size?(): { columns: number; rows: number };
  onResize?(listener: (size: { columns: number; rows: number }) => void): () => void;
  /** Switches raw mode (every key to the program, Ctrl-C included). */
  raw?(enabled: boolean): void;
}

export interface CliIO {
  /** A result, on stdout. */
  out(message: string): void;
  /** Bytes on stdout as they are, line ends included (serve's access lines); absent, out() is used. */
  outBytes?(data: Uint8Array): void;
  /** Progress and failures, on stderr. */
  err?(message: string): void;
  /**
   * A transient status line on stderr, rewritten in place (elapsed time while a command waits);
   * null clears it. Only where stderr is a terminal: absent otherwise, so logs and pipes get the
   * `err` lines alone.
   */
  status?(line: string | null): void;
  /** The environment commands read; `process.env` is never read implicitly. */
  env: Record<string, string | undefined>;
  /** All of standard input, for `--data -` and `auth login`. */
  stdin?(): Promise<string>;
  /** Relative paths and configuration discovery start here. */
  cwd?: string;
  /** Remote calls go through it. */
  fetch?: (request: Request) => Promise<Response>;
  /** Ends long-running commands (`serve`, `dev`, `forward`). */
  signal?: AbortSignal;
  terminal?: CliTerminal;
  /** Runs a program with inherited stdio and resolves with its exit status (255 after a signal). */
  spawn?(command: string, args: string[]): Promise<number>;
}

/**
 * console.log and console.error, without their cost at start: the first console write builds
 * node's stream machinery (about 6 ms, most of what `better-compute version` spends), while a
 * blocking write to the descriptor needs none. A descriptor that would block falls back to console.
 */
function writeLine(fd: 1 | 2, message: string): void {
  writeBytes(fd, Buffer.from(`${message}\n`, 'utf8'));
}

/** `data` to the descriptor whole; a descriptor that would block gets the rest through console. */
function writeBytes(fd: 1 | 2, data: Uint8Array): void {
  let offset = 0;
  try {
    while (offset < data.length) offset += writeSync(fd, data, offset);
  } catch {
    const rest = Buffer.from(data.buffer, data.byteOffset + offset, data.length - offset)
      .toString('utf8')
      .replace(/\n$/, '');
    if (fd === 1) console.log(rest);
    else console.error(rest);
  }
}

/** Bytes to a descriptor as they are (no line end): the status line's redraws. */
function writeRaw(fd: 1 | 2, text: string): void {
  try {
    writeSync(fd, text);
  } catch {
    // A terminal that would block loses a redraw; the next one comes within a second.
  }
}

/**
 * The process's own IO: console.log and console.error, process.env, the real stdin, cwd and fetch,
 * a signal that aborts on SIGINT or SIGTERM, the process's terminal and child_process.spawn.
 * The signal handlers are installed only when a command reads `signal`, so Ctrl-C keeps its
 * default meaning for every other command, and a second Ctrl-C still ends the process.
 */
export function processIO(): CliIO {
  let controller: AbortController | undefined;
  // The status line shown now, cleared before any other line reaches the terminal.
  let shown = false;
  const clear = () => {
    if (shown) writeRaw(2, '\r\x1b[K');
    shown = false;
  };
  return {
    out: (message) => {
      clear();
      writeLine(1, message);
    },
    outBytes: (data) => {
      clear();
      writeBytes(1, data);
    },
    err: (message) => {
      clear();
      writeLine(2, message);
    },
    ...(process.stderr.isTTY
      ? {
          status(line: string | null) {
            if (line === null) return clear();
            const width = Math.max(20, (process.stderr.columns ?? 80) - 1);
            writeRaw(2, `\r\x1b[K${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
            shown = true;
          },
        }
      : {}),
    env: process.env,
    cwd: process.cwd(),
    fetch: (request) => fetch(request),
    async stdin() {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin as AsyncIterable<Buffer | string>)
        chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      return Buffer.concat(chunks).toString('utf8');
    },
    get signal() {
      if (!controller) {
        const created = new AbortController();
        controller = created;
        const stop = (signal: NodeJS.Signals) => created.abort(new Error(`received ${signal}`));
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      }
      return controller.signal;
    },
    terminal: {
      onInput(listener) {
        const onData = (chunk: Buffer) => listener(new Uint8Array(chunk));
        process.stdin.on('data', onData);
        process.stdin.resume();
        return () => {
          process.stdin.off('data', onData);
          process.stdin.pause();
        };
      },
      write(data, channel = 'stdout') {
        (channel === 'stderr' ? process.stderr : process.stdout).write(data);
      },
      size: () => ({ columns: process.stdout.columns ?? 80, rows: process.stdout.rows ?? 24 }),
      onResize(listener) {
        const onResize = () =>
          listener({ columns: process.stdout.columns ?? 80, rows: process.stdout.rows ?? 24 });
        process.stdout.on('resize', onResize);
        return () => process.stdout.off('resize', onResize);
      },
      raw(enabled) {
        if (process.stdin.isTTY) process.stdin.setRawMode(enabled);
      },
    },
    async spawn(command, args) {
      const { spawn } = await import('node:child_process');
      return new Promise((resolve, reject) => {
        const child = spawn(command, args, { stdio: 'inherit' });
        child.once('error', reject);
        child.once('exit', (code, signal) => resolve(signal !== null ? 255 : (code ?? 255)));
      });
    },
  };
}
