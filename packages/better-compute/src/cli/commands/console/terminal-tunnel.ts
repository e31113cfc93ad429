/**
 * A terminal attached to a tunnel, shared by `console` and `exec`: the terminal is raw while the
 * remote program runs (every key goes to it, Ctrl-C included), its size follows resizes, Ctrl-]
 * detaches, and the command ends with the remote program's status: 0 returns, anything else is a
 * RemoteExitError with that status, and 255 when the tunnel itself broke.
 */
import { ComputeError } from '@better-compute/core';
import type { CommandContext } from '../../define.js';
import { CliError, RemoteExitError } from '../../errors.js';

/** Ctrl-], as telnet and docker attach use it. */
const DETACH = 0x1d;

export interface TerminalTarget {
  nodeId?: string | undefined;
  instanceId?: string | undefined;
  op: 'console' | 'exec';
}

/** Refuses before a ticket is spent what cannot work: no --url, or no terminal to attach. */
export function checkTerminalTunnel(context: Pick<CommandContext, 'global' | 'io' | 'commandName'>): void {
  if (!context.global.url)
    throw new CliError(
      'UNSUPPORTED',
      `${context.commandName} opens a WebSocket on a running server, and needs --url`,
      {
        hint: 'Pass --url https://compute.example.com (or set BETTER_COMPUTE_URL): an in-process call has no WebSocket server.',
      },
    );
  if (!context.io.terminal)
    throw new CliError(
      'UNSUPPORTED',
      `${context.commandName} needs a terminal, and this program gave it none`,
      {
        hint: 'Run it from a terminal, or pass a CliIO with terminal to runCli.',
      },
    );
}

export async function runTerminalTunnel(context: CommandContext, target: TerminalTarget): Promise<undefined> {
  checkTerminalTunnel(context);
  const terminal = context.io.terminal!;
  const size = terminal.size?.() ?? { columns: 80, rows: 24 };
  const api = await context.api();
  const opened = await api.call('tunnels.open', {
    ...(target.nodeId ? { nodeId: target.nodeId } : { instanceId: target.instanceId! }),
    op: target.op,
    cols: Math.min(1000, Math.max(1, size.columns)),
    rows: Math.min(1000, Math.max(1, size.rows)),
  });
  // Loaded before the socket opens: a message the server sends at once must find its handler.
  const { controlOf } = await import('../../tunnel-socket.js');
  const ws = await api.tunnel(opened.ticket);
  const cleanups: (() => void)[] = [];
  terminal.raw?.(true);
  try {
    const outcome = await new Promise<{ status: number | null; detached?: boolean; error?: ComputeError }>(
      (resolve) => {
        let status: number | null = null;
        let error: ComputeError | undefined;
        let received = false;
        cleanups.push(
          terminal.onInput((data) => {
            const at = data.indexOf(DETACH);
            const before = at === -1 ? data : data.subarray(0, at);
            if (before.length > 0 && ws.readyState === ws.OPEN) ws.send(before, { binary: true });
            if (at !== -1) {
              ws.close(1000, 'detached');
              resolve({ status: 0, detached: true });
            }
          }),
        );
        if (terminal.onResize)
          cleanups.push(
            terminal.onResize(({ columns, rows }) => {
              if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ t: 'resize', cols: columns, rows }));
            }),
          );
        const signal = context.io.signal;
        const onAbort = () => {
          ws.close(1000, 'detached');
          resolve({ status: 0, detached: true });
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        cleanups.push(() => signal?.removeEventListener('abort', onAbort));
        ws.on('message', (data: Buffer, isBinary: boolean) => {
          if (isBinary) {
            received = true;
            terminal.write(new Uint8Array(data));
            return;
          }
          const control = controlOf(data);
          if (control?.t === 'exit') {
            status = control.status;
            if (control.error && status === null)
              error = new ComputeError('UNAVAILABLE', control.error.message);
          } else if (control?.t === 'error') {
            // A refusal before the program started keeps its code (exec without a guest agent).
            error =
              received || control.opened !== false
                ? new ComputeError('UNAVAILABLE', control.message)
                : new ComputeError(control.code as never, control.message);
          }
        });
        ws.on('close', () => resolve(error ? { status, error } : { status }));
        // Opened paused (tunnel-socket.ts): what the server sent at once reaches the handlers above.
        ws.resume();
      },
    );
    if (outcome.detached) {
      context.log('detached from the tunnel');
      return undefined;
    }
    if (outcome.status === 0) return undefined;
    if (outcome.status !== null) throw new RemoteExitError(outcome.status);
    if (outcome.error && outcome.error.code !== 'UNAVAILABLE') throw outcome.error;
    throw new RemoteExitError(255, `the tunnel broke${outcome.error ? `: ${outcome.error.message}` : ''}`);
  } finally {
    for (const cleanup of cleanups) cleanup();
    terminal.raw?.(false);
    if (ws.readyState === ws.OPEN) ws.close(1000);
  }
}
