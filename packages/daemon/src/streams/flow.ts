/**
 * Flow control of one direction of a stream, as the control plane's node-streams contract sets
 * it: the sender stops above 4 MiB not yet acknowledged, goes on under 1 MiB, and a reader 16 MiB
 * behind is disconnected. The figures are the contract's; the daemon keeps its own copy so the
 * bundle needs nothing from the control plane.
 */
export const STREAM_HIGH_WATER_BYTES = 4 * 1024 * 1024;
export const STREAM_LOW_WATER_BYTES = 1024 * 1024;
export const STREAM_DISCONNECT_BYTES = 16 * 1024 * 1024;
/** The largest data frame: bytes above it are sent in several frames. */
export const STREAM_FRAME_BYTES = 64 * 1024;

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
