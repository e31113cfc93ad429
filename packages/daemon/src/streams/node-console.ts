/**
 * The `node-console` target: an interactive login shell on a pty, as the user the daemon runs as
 * (root on a node), in its home directory, with a clean environment so nothing of the daemon's own
 * leaks into it. The window size comes with the request and with each resize; the shell's exit
 * status goes back when it ends.
 */
import { readFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { registerStreamTarget, StreamRefusal, type StreamTargetRequest } from './registry.js';

type Pty = typeof import('@lydell/node-pty');
/** How long the pty of an exited shell must stay quiet before the stream ends. */
const QUIET_MS = 100;
let pty: Pty | null = null;

/** Loads node-pty's prebuilt binary; false (and no `pty` capability) where it does not load. */
export async function loadPty(): Promise<boolean> {
  if (pty) return true;
  try {
    const loaded = (await import('@lydell/node-pty')) as Partial<Pty> & { default?: Pty };
    pty = typeof loaded.spawn === 'function' ? (loaded as Pty) : (loaded.default ?? null);
    return pty !== null;
  } catch {
    return false;
  }
}

function windowSize(request: StreamTargetRequest): { cols: number; rows: number } {
  const size = (value: unknown, fallback: number) =>
    typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 1000 ? value : fallback;
  return { cols: size(request.cols, 80), rows: size(request.rows, 24) };
}

/**
 * The flags that make `shell` an interactive login shell. A shell decides by itself that it is
 * interactive only when it sees a terminal on its standard input and error; -i says so outright,
 * so it prints its prompt and reads its rc files whatever it made of the pty (issue 31: a console
 * with no prompt). tcsh takes -l only alone, and is interactive on a terminal anyway.
 */
function interactiveLoginFlags(shell: string): string[] {
  return /(^|\/)t?csh$/.test(shell) ? ['-l'] : ['-l', '-i'];
}

function loginShell(): string {
  try {
    const shell = userInfo().shell;
    if (shell && shell.startsWith('/')) return shell;
  } catch {
    // No passwd entry for this uid (some containers): the POSIX shell.
  }
  return '/bin/sh';
}

export function registerNodeConsole(): void {
  registerStreamTarget('node-console', (request, output) => {
    if (!pty) throw new StreamRefusal('UNSUPPORTED', 'this daemon cannot open a pty (node-pty did not load)');
    const { cols, rows } = windowSize(request);
    const shell = loginShell();
    const home = homedir();
    const user = userInfo().username;
    // The login shell runs under a small sh that outlives it by a moment. When a pty's session
    // leader exits, the kernel hangs the terminal up and drops what the pty still holds, so output
    // printed just before `exit` would be lost; with the wrapper as leader, the shell's last bytes
    // are read before the hangup. The wrapper exits with the shell's status.
    const terminal = pty.spawn(
      '/bin/sh',
      ['-c', '"$0" "$@"; status=$?; sleep 0.2; exit "$status"', shell, ...interactiveLoginFlags(shell)],
      {
        name: 'xterm-256color',
        cols,
        rows,
        cwd: home,
        env: {
          HOME: home,
          USER: user,
          LOGNAME: user,
          SHELL: shell,
          TERM: 'xterm-256color',
          LANG: process.env.LANG ?? 'C.UTF-8',
          PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        },
      },
    );
    // The shell may exit with output still in the pty (always so while the reader is paused): the
    // end goes once the reader is reading and the pty has been quiet a moment, so no byte is lost.
    let ended = false;
    let exitStatus: number | null = null;
    let paused = false;
    let quiet: NodeJS.Timeout | undefined;
    const settle = () => {
      if (ended || exitStatus === null || paused) return;
      clearTimeout(quiet);
      quiet = setTimeout(() => {
        ended = true;
        output.end(exitStatus);
      }, QUIET_MS);
    };
    // A paused pty is not read, so its last output would still be in it at the hangup, and node-pty
    // also destroys a socket left paused 200 ms after the exit. So while paused we watch for the
    // login shell's end and then read the rest, which is at most the pty's own buffer (a few KiB):
    // the bound on how far the reader may fall behind still holds.
    let exitWatch: NodeJS.Timeout | undefined;
    const shellRuns = () => {
      try {
        const children = readFileSync(`/proc/${terminal.pid}/task/${terminal.pid}/children`, 'utf8');
        return children.trim() !== '';
      } catch {
        return false;
      }
    };
    const watchForExit = () => {
      clearInterval(exitWatch);
      exitWatch = setInterval(() => {
        if (shellRuns()) return;
        clearInterval(exitWatch);
        paused = false;
        terminal.resume();
      }, 20);
    };
    terminal.onData((text) => {
      output.data(Buffer.from(text, 'utf8'));
      settle();
    });
    terminal.onExit(({ exitCode, signal }) => {
      clearInterval(exitWatch);
      // A shell killed by a signal reports 128 + the signal, as shells do.
      exitStatus = signal ? Math.min(255, 128 + signal) : Math.max(0, Math.min(255, exitCode));
      settle();
    });
    return {
      write: (chunk, taken) => {
        terminal.write(Buffer.from(chunk).toString('utf8'));
        taken();
      },
      resize: (newCols, newRows) => {
        const size = windowSize({ kind: 'node-console', cols: newCols, rows: newRows });
        terminal.resize(size.cols, size.rows);
      },
      pause: () => {
        paused = true;
        clearTimeout(quiet);
        terminal.pause();
        watchForExit();
      },
      resume: () => {
        paused = false;
        clearInterval(exitWatch);
        terminal.resume();
        settle();
      },
      close: () => {
        clearInterval(exitWatch);
        try {
          terminal.kill('SIGHUP');
        } catch {
          // Already gone.
        }
      },
    };
  });
}
