/**
 * Byte streams to a node: what a tunnel (console, exec, forward) asks the gateway for. The caller
 * may sit on any API replica; the stream is carried to the gateway replica that holds the node's
 * session and over that session to the daemon, which attaches the target. One contract for the
 * tunnel route that opens streams, the gateway that carries them, and the daemon that serves them.
 */

/** What the daemon attaches at the far end of a stream. */
export type NodeStreamTarget =
  /** A root login shell on a pty on the node itself (`console --node`). */
  | { kind: 'node-console'; cols: number; rows: number }
  /** An instance's serial console (`console --instance`). */
  | { kind: 'instance-console'; instanceId: string; cols: number; rows: number }
  /** A program run in an instance by its guest agent (`exec --instance`). */
  | { kind: 'instance-exec'; instanceId: string; argv: string[]; cols: number; rows: number; tty: boolean }
  /** A TCP connection to a port of an instance (`forward --instance --port`). */
  | { kind: 'instance-port'; instanceId: string; port: number }
  /** A connection to a sandbox's SSH server (`sandbox exec`): its bytes are the SSH protocol. */
  | { kind: 'sandbox-ssh'; sandboxId: string };

/** The daemon capability each target needs; a node without it is refused before a stream opens. */
export const TARGET_CAPABILITY: Record<NodeStreamTarget['kind'], string> = {
  'node-console': 'pty',
  'instance-console': 'tunnel.instance-dial',
  'instance-exec': 'tunnel.instance-dial',
  'instance-port': 'tunnel.instance-dial',
  'sandbox-ssh': 'tunnel.sandbox-ssh',
};

/** How a stream ended: the remote program's exit status, or why the stream broke. */
export interface NodeStreamEnd {
  /** 0 to 255 when a program exited; null when the stream broke or the target has no status. */
  exitStatus: number | null;
  /** Set when the stream did not end normally: the daemon's refusal, a lost session, a slow reader. */
  error?: { code: string; message: string };
}

/**
 * One open stream. Flow control is end to end: `write` answers false once the bytes not yet
 * acknowledged by the far end pass the high-water mark (4 MiB), and `drain` fires when they fall
 * under the low-water mark (1 MiB). A reader that stays 16 MiB behind is disconnected.
 */
export interface NodeStream {
  readonly id: string;
  /** Sends bytes to the target; false means wait for `onDrain` before writing more. */
  write(chunk: Uint8Array): boolean;
  onDrain(listener: () => void): void;
  /** Bytes from the target. Call `pause()` to stop the far end sending, `resume()` to go on. */
  onData(listener: (chunk: Uint8Array) => void): void;
  pause(): void;
  resume(): void;
  /** A terminal's new size, for pty and console targets. */
  resize(cols: number, rows: number): void;
  /** Fires once, when the stream ends for any reason. */
  onEnd(listener: (end: NodeStreamEnd) => void): void;
  /** Ends the stream from this side (the daemon hangs up the pty or closes the connection). */
  close(reason?: string): void;
}

/**
 * Opens streams to nodes, wherever their sessions are. Rejects with a ComputeError:
 * `UNAVAILABLE` when the node has no session on any gateway, `UNSUPPORTED` with
 * `details.reason: 'daemon-capability'` when its daemon lacks the target's capability.
 */
export interface NodeStreams {
  open(nodeId: string, target: NodeStreamTarget, options?: { signal?: AbortSignal }): Promise<NodeStream>;
}
