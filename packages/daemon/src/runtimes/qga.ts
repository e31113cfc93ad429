/**
 * Programs run inside a guest through the QEMU guest agent (`guest-exec`): how the node gives a
 * qemu sandbox its identity. The agent listens on a virtio serial port whose host end is the VM's
 * `qga.sock`; it runs as the guest's root, which is the node's to use (the node owns the VM).
 */
import { RuntimeError } from './image-cache.js';
import { QmpConnection } from './qmp.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Connects to the guest's agent, trying again until it answers (it starts early in the guest's boot). */
export async function waitForGuestAgent(
  path: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<QmpConnection> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    if (signal?.aborted) throw new RuntimeError('cancelled while waiting for the guest agent');
    const left = deadline - Date.now();
    if (left <= 0)
      throw new RuntimeError(
        `the guest agent did not answer within ${timeoutMs} ms${last ? ` (${last})` : ''}`,
      );
    try {
      return await QmpConnection.openGuestAgent(path, Math.min(left, 2_000));
    } catch (error) {
      last = (error as Error).message;
      await sleep(Math.min(200, Math.max(left, 0)));
    }
  }
}

export interface GuestRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs a program in the guest with `input` on its standard input and waits for it to exit. */
export async function guestRun(
  agent: QmpConnection,
  path: string,
  args: string[],
  input: string,
  timeoutMs: number,
): Promise<GuestRun> {
  const started = (await agent.execute('guest-exec', {
    path,
    arg: args,
    'input-data': Buffer.from(input).toString('base64'),
    'capture-output': true,
  })) as { pid?: number };
  if (typeof started?.pid !== 'number') throw new RuntimeError('the guest agent started no process');
  const deadline = Date.now() + timeoutMs;
  for (let wait = 10; ; wait = Math.min(wait * 2, 100)) {
    const status = (await agent.execute('guest-exec-status', { pid: started.pid })) as {
      exited?: boolean;
      exitcode?: number;
      signal?: number;
      'out-data'?: string;
      'err-data'?: string;
    };
    if (status.exited) {
      const text = (data: string | undefined) => Buffer.from(data ?? '', 'base64').toString('utf8');
      return {
        exitCode: status.exitcode ?? 128 + (status.signal ?? 0),
        stdout: text(status['out-data']),
        stderr: text(status['err-data']),
      };
    }
    if (Date.now() > deadline)
      throw new RuntimeError(`${path} in the guest did not finish within ${timeoutMs} ms`);
    await sleep(wait);
  }
}
