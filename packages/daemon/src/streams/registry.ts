/**
 * The stream targets this daemon can attach: `node-console` (a root login shell on a pty) is
 * built in; a runtime adds its own (an instance's console, a port) with one `registerStreamTarget`
 * call. A stream asking for a kind nobody registered is refused with a clear reason.
 */

/** What the gateway asks for (the shape of `NodeStreamTarget` in the control plane). */
export interface StreamTargetRequest {
  kind: string;
  [field: string]: unknown;
}

/** How an attached target talks back: bytes to the far end, and its end. */
export interface StreamOutput {
  data(chunk: Uint8Array): void;
  /** Once; `exitStatus` 0 to 255 when a program exited, null otherwise. */
  end(exitStatus: number | null, error?: { code: string; message: string }): void;
}

/** A target once attached. `pause` and `resume` are how flow control stops it producing. */
export interface AttachedTarget {
  /**
   * Bytes from the far end. `taken` is called once the target has taken them (a socket flushed
   * them to the kernel, a terminal wrote them): only then are they acknowledged, so a slow target
   * holds the sender to the high-water mark instead of filling the daemon's memory.
   */
  write(chunk: Uint8Array, taken: () => void): void;
  resize?(cols: number, rows: number): void;
  pause(): void;
  resume(): void;
  /** Hangs up (the far end closed the stream); the target still calls `end` once. */
  close(): void;
}

export type StreamTargetFactory = (request: StreamTargetRequest, output: StreamOutput) => AttachedTarget;

/** Thrown by a factory for a request it will not serve; the message goes back to the caller. */
export class StreamRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const targets = new Map<string, StreamTargetFactory>();

/** Registers (or replaces) the factory for a target kind. */
export function registerStreamTarget(kind: string, factory: StreamTargetFactory): void {
  targets.set(kind, factory);
}

export function streamTargetFactory(kind: string): StreamTargetFactory | undefined {
  return targets.get(kind);
}
