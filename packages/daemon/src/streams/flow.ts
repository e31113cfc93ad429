/** Flow control of one direction of a stream, at the bounds core's stream-flow sets. */
import {
  STREAM_DISCONNECT_BYTES,
  STREAM_HIGH_WATER_BYTES,
  STREAM_LOW_WATER_BYTES,
} from '@better-compute/core';

/** Counts bytes sent and acknowledged; says when to pause, resume, or give up on the reader. */
export class SendWindow {
  private unacked = 0;
  private paused = false;

  constructor(
    private readonly onPause: () => void,
    private readonly onResume: () => void,
  ) {}

  get outstanding(): number {
    return this.unacked;
  }

  /** Records bytes sent; true while the sender may go on. */
  sent(bytes: number): boolean {
    this.unacked += bytes;
    if (!this.paused && this.unacked > STREAM_HIGH_WATER_BYTES) {
      this.paused = true;
      this.onPause();
    }
    return !this.paused;
  }

  /** Records the far end's acknowledgement (never below zero: a peer's number is input). */
  acked(bytes: number): void {
    this.unacked = Math.max(0, this.unacked - bytes);
    if (this.paused && this.unacked < STREAM_LOW_WATER_BYTES) {
      this.paused = false;
      this.onResume();
    }
  }

  /** The reader is so far behind that the stream should end. */
  overrun(): boolean {
    return this.unacked > STREAM_DISCONNECT_BYTES;
  }
}

/** A data frame: the stream id (4 bytes, big-endian), then the bytes. */
export function dataFrame(streamId: number, chunk: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(4 + chunk.byteLength);
  frame.writeUInt32BE(streamId, 0);
  frame.set(chunk, 4);
  return frame;
}

export function readDataFrame(frame: Buffer): { streamId: number; chunk: Buffer } | null {
  if (frame.byteLength < 4) return null;
  return { streamId: frame.readUInt32BE(0), chunk: frame.subarray(4) };
}
