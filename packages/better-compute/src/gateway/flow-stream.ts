/**
 * The `NodeStream` a caller holds, over any transport that reaches the daemon: the session itself
 * when this process holds it, or the internal link to the replica that does. It keeps the
 * contract's flow control end to end: writes count until the daemon acknowledges them, and bytes
 * from the daemon are acknowledged only once handed to the reader, so a paused reader stops the
 * target within the high-water mark, and one that falls 16 MiB behind is disconnected.
 */
import {
  STREAM_DISCONNECT_BYTES,
  STREAM_FRAME_BYTES,
  STREAM_HIGH_WATER_BYTES,
  STREAM_LOW_WATER_BYTES,
} from '@better-compute/core';
import type { NodeStream, NodeStreamEnd } from './node-streams.js';
/** How long a hung-up stream waits for the daemon's end before ending on its own. */
const CLOSE_GRACE_MS = 5_000;

/** The way to the daemon: what a stream sends. */
export interface StreamTransport {
  send(chunk: Uint8Array): void;
  ack(bytes: number): void;
  resize(cols: number, rows: number): void;
  close(reason?: string): void;
}

/** What the transport reports back to the stream. */
export interface StreamSink {
  opened(): void;
  data(chunk: Buffer): void;
  acked(bytes: number): void;
  ended(end: NodeStreamEnd): void;
}

export class FlowStream implements NodeStream, StreamSink {
  private transport: StreamTransport | null = null;
  private unacked = 0;
  private wantsDrain = false;
  private paused = false;
  private queue: Buffer[] = [];
  private queued = 0;
  private pendingAck = 0;
  private ending: NodeStreamEnd | null = null;
  /** The daemon's end, held while a paused reader still has bytes queued before it. */
  private deferredEnd: NodeStreamEnd | null = null;
  private closeTimer: NodeJS.Timeout | undefined;
  private readonly drainListeners: (() => void)[] = [];
  private readonly dataListeners: ((chunk: Uint8Array) => void)[] = [];
  private readonly endListeners: ((end: NodeStreamEnd) => void)[] = [];
  private openedWaiter: { resolve: () => void; reject: (end: NodeStreamEnd) => void } | null = null;
  /** Resolves once the daemon attached the target; rejects with its refusal. */
  readonly ready: Promise<void>;

  constructor(readonly id: string) {
    this.ready = new Promise((resolve, reject) => (this.openedWaiter = { resolve, reject }));
    this.ready.catch(() => {});
  }

  attach(transport: StreamTransport): void {
    this.transport = transport;
  }

  get isEnded(): boolean {
    return this.ending !== null;
  }

  /** Bytes sent and not acknowledged, and bytes received and not yet read: for tests and metrics. */
  get backlog(): { unacked: number; queued: number } {
    return { unacked: this.unacked, queued: this.queued };
  }

  write(chunk: Uint8Array): boolean {
    if (this.ending || !this.transport) return false;
    for (let at = 0; at < chunk.byteLength; at += STREAM_FRAME_BYTES) {
      const part = chunk.subarray(at, at + STREAM_FRAME_BYTES);
      this.transport.send(part);
      this.unacked += part.byteLength;
    }
    if (this.unacked > STREAM_HIGH_WATER_BYTES) this.wantsDrain = true;
    return !this.wantsDrain;
  }
  onDrain(listener: () => void): void {
    this.drainListeners.push(listener);
  }
  onData(listener: (chunk: Uint8Array) => void): void {
    this.dataListeners.push(listener);
    this.deliver();
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
    this.deliver();
    if (this.deferredEnd && this.queue.length === 0) this.ended_(this.deferredEnd);
  }
  resize(cols: number, rows: number): void {
    if (this.ending) return;
    const size = (n: number) => Math.max(1, Math.min(1000, Math.trunc(Number(n)) || 1));
    this.transport?.resize(size(cols), size(rows));
  }
  onEnd(listener: (end: NodeStreamEnd) => void): void {
    if (this.ending) {
      const end = this.ending;
      queueMicrotask(() => listener(end));
    } else this.endListeners.push(listener);
  }
  close(reason?: string): void {
    if (this.ending || this.closeTimer) return;
    this.transport?.close(reason);
    this.closeTimer = setTimeout(
      () => this.ended_({ exitStatus: null, error: { code: 'CLOSED', message: reason ?? 'closed' } }),
      CLOSE_GRACE_MS,
    );
    this.closeTimer.unref();
  }

  // StreamSink: called by the transport.
  opened(): void {
    this.openedWaiter?.resolve();
    this.openedWaiter = null;
  }
  data(chunk: Buffer): void {
    if (this.ending) return;
    this.queue.push(chunk);
    this.queued += chunk.byteLength;
    if (this.queued > STREAM_DISCONNECT_BYTES) {
      this.transport?.close('slow reader');
      this.ended_({
        exitStatus: null,
        error: { code: 'SLOW_READER', message: 'the reader fell 16 MiB behind the node' },
      });
      return;
    }
    this.deliver();
  }
  acked(bytes: number): void {
    this.unacked = Math.max(0, this.unacked - bytes);
    if (this.wantsDrain && this.unacked < STREAM_LOW_WATER_BYTES) {
      this.wantsDrain = false;
      for (const listener of this.drainListeners) listener();
    }
  }
  ended(end: NodeStreamEnd): void {
    // A paused reader gets the bytes that came before the end once it resumes, then the end.
    if (this.paused && this.queue.length > 0) this.deferredEnd = end;
    else this.ended_(end);
  }

  private ended_(end: NodeStreamEnd): void {
    if (this.ending) return;
    // Bytes that came before the end still reach a reader that is reading.
    this.deliver();
    this.ending = end;
    clearTimeout(this.closeTimer);
    this.queue = [];
    this.queued = 0;
    this.openedWaiter?.reject(end);
    this.openedWaiter = null;
    for (const listener of this.endListeners.splice(0)) listener(end);
  }

  /** Hands queued bytes to the reader while it reads, then acknowledges them in one message. */
  private deliver(): void {
    if (this.ending) return;
    while (!this.paused && this.dataListeners.length && this.queue.length) {
      const chunk = this.queue.shift()!;
      this.queued -= chunk.byteLength;
      for (const listener of this.dataListeners) listener(chunk);
      if (this.pendingAck === 0) setImmediate(() => this.flushAck());
      this.pendingAck += chunk.byteLength;
    }
  }
  private flushAck(): void {
    if (this.pendingAck > 0 && !this.ending) this.transport?.ack(this.pendingAck);
    this.pendingAck = 0;
  }
}
