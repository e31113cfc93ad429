/**
 * The instance stream targets: `instance-console` (the VM's serial console, from the runtime's
 * bounded console ring) and `instance-port` (a TCP connection to a port of the guest, through the
 * runtime's `dial`). `instance-exec` is refused: guests have no agent to run a command.
 *
 * A factory answers at once but the runtime opens its end asynchronously, so bytes written before
 * the connection is up wait in a bounded queue, and an instance this node does not have, or whose
 * VM does not run, ends the stream with the reason instead of attaching.
 */
import type { Duplex } from 'node:stream';
import { STREAM_DISCONNECT_BYTES } from '@better-compute/core';
import type { SandboxRuntimes } from '../runtimes/index.js';
import type { RuntimeDriver } from '../runtimes/driver.js';
import {
  type AttachedTarget,
  registerStreamTarget,
  StreamRefusal,
  type StreamOutput,
  type StreamTargetRequest,
} from './registry.js';

/**
 * Bytes held for a target still connecting. They are not acknowledged meanwhile, so a sender that
 * keeps the window stops at its high-water mark; one past the disconnect mark ignores it.
 */
const PENDING_LIMIT = STREAM_DISCONNECT_BYTES;
/** The shape of the control plane's ids; anything else never reaches the runtime's paths. */
const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

type StreamError = { code: string; message: string };

function instanceIdOf(request: StreamTargetRequest): string {
  const id = request.instanceId;
  if (typeof id !== 'string' || !INSTANCE_ID.test(id))
    throw new StreamRefusal('INVALID_ARGUMENT', 'the stream names no valid instance id');
  return id;
}

function portOf(request: StreamTargetRequest): number {
  const port = request.port;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65_535)
    throw new StreamRefusal('INVALID_ARGUMENT', 'the port must be a whole number from 1 to 65535');
  return port;
}

/** Checks the instance is here and running, then opens the runtime's end. */
async function openRunning(driver: RuntimeDriver, id: string, open: () => Promise<Duplex>): Promise<Duplex> {
  const status = await driver.status(id);
  if (!status.exists)
    throw Object.assign(new Error(`instance ${id} is not on this node`), { code: 'NOT_FOUND' });
  if (!status.running)
    throw Object.assign(new Error(`instance ${id} is not running on this node`), { code: 'INVALID_STATE' });
  return open();
}

/**
 * Joins a duplex the runtime is opening to the stream: data both ways, flow control through the
 * duplex's own pause, and one `end` however it finishes (closed by either side, or failed).
 */
export function attachDuplex(opening: Promise<Duplex>, output: StreamOutput, what: string): AttachedTarget {
  let duplex: Duplex | null = null;
  let pending: { chunk: Buffer; taken: () => void }[] = [];
  let pendingBytes = 0;
  let paused = false;
  let closed = false;
  let ended = false;
  const finish = (error?: StreamError) => {
    if (ended) return;
    ended = true;
    output.end(null, error);
  };
  const hangUp = (error?: StreamError) => {
    closed = true;
    duplex?.destroy();
    finish(error);
  };
  opening.then(
    (opened) => {
      if (closed) {
        opened.destroy();
        return;
      }
      duplex = opened;
      opened.on('data', (chunk: Buffer) => output.data(chunk));
      opened.on('end', () => hangUp());
      opened.on('close', () => finish());
      opened.on('error', (error: Error) =>
        finish({ code: 'FAILED', message: `${what}: ${error.message}`.slice(0, 500) }),
      );
      for (const { chunk, taken } of pending) opened.write(chunk, () => taken());
      pending = [];
      pendingBytes = 0;
      if (paused) opened.pause();
    },
    (error: Error & { code?: unknown }) => {
      closed = true;
      const code = typeof error.code === 'string' && /^[A-Z_]+$/.test(error.code) ? error.code : 'FAILED';
      finish({ code, message: `${what}: ${error.message}`.slice(0, 500) });
    },
  );
  return {
    write(chunk, taken) {
      if (closed) return;
      if (duplex) {
        duplex.write(Buffer.from(chunk), () => taken());
        return;
      }
      // Held until the target opens, unacknowledged: the sender stops at its high-water mark.
      pendingBytes += chunk.byteLength;
      if (pendingBytes > PENDING_LIMIT)
        return hangUp({ code: 'RESOURCE_EXHAUSTED', message: `${what}: too much input before it opened` });
      pending.push({ chunk: Buffer.from(chunk), taken });
    },
    pause() {
      paused = true;
      duplex?.pause();
    },
    resume() {
      paused = false;
      duplex?.resume();
    },
    close() {
      hangUp();
    },
  };
}

/** Registers the instance targets over a runtime driver (the agent's QEMU driver). */
export function registerInstanceTargets(driver: RuntimeDriver): void {
  registerStreamTarget('instance-console', (request, output) => {
    const id = instanceIdOf(request);
    // The console ring is bounded by the runtime: a reader too far behind is cut off there.
    const opening = openRunning(driver, id, () => driver.openConsole(id));
    return attachDuplex(opening, output, `the console of ${id}`);
  });
  registerStreamTarget('instance-port', (request, output) => {
    const id = instanceIdOf(request);
    const port = portOf(request);
    const opening = openRunning(driver, id, () => driver.dial(id, port));
    return attachDuplex(opening, output, `port ${port} of ${id}`);
  });
  registerStreamTarget('instance-exec', () => {
    throw new StreamRefusal(
      'UNSUPPORTED',
      'bcd refuses instance exec until guests have an agent; use console --instance for a terminal',
    );
  });
}

/** Registers `sandbox-ssh`: a connection to a sandbox's SSH server, on whichever runtime runs it. */
export function registerSandboxTargets(driver: Pick<SandboxRuntimes, 'dialSsh'>): void {
  registerStreamTarget('sandbox-ssh', (request, output) => {
    const id = typeof request.sandboxId === 'string' ? request.sandboxId : '';
    if (!/^sbx_[A-Za-z0-9]{1,64}$/.test(id))
      throw new StreamRefusal('INVALID_ARGUMENT', 'a sandbox-ssh stream names its sandbox (sandboxId)');
    const opening = driver.dialSsh(id).catch((error: Error) => {
      throw Object.assign(new Error(error.message), { code: 'NOT_FOUND' });
    });
    return attachDuplex(opening, output, `the SSH server of ${id}`);
  });
}
