/**
 * Streams multiplexed on the daemon's session. The gateway opens one (`stream.open` with an id it
 * picks and a target), sends bytes as binary frames (4-byte stream id, then data), acknowledges
 * what it consumed (`stream.ack`), resizes (`stream.resize`) and hangs up (`stream.close`); the
 * daemon answers `stream.opened`, sends the target's bytes the same way, acknowledges what it
 * wrote to the target, and ends each stream once (`stream.end`, with the exit status or why).
 * Everything is bounded: streams per session, frame sizes, and the bytes in flight (flow.ts).
 */
import { MAX_NODE_STREAMS, STREAM_FRAME_BYTES } from '@better-compute/core';
import { dataFrame, readDataFrame, SendWindow } from './flow.js';
import {
  type AttachedTarget,
  StreamRefusal,
  streamTargetFactory,
  type StreamTargetRequest,
} from './registry.js';

/** How long a target may take to end after a hang-up before the stream is ended for it. */
const HANGUP_GRACE_MS = 5_000;

export interface StreamMuxIo {
  sendJson(message: Record<string, unknown>): void;
  sendBinary(frame: Buffer): void;
  log(line: string): void;
}

interface OpenStream {
  id: number;
  kind: string;
  target: AttachedTarget | null;
  window: SendWindow;
  ended: boolean;
  pendingAck: number;
  hangup?: NodeJS.Timeout;
}

export interface StreamMux {
  /** Handles a `stream.*` message; false for any other message. */
  onMessage(message: Record<string, unknown>): boolean;
  onBinary(frame: Buffer): void;
  /** The session dropped: every target is hung up. */
  closeAll(): void;
  readonly size: number;
}

const streamIdOf = (value: unknown): number | null =>
  typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= 0xffffffff ? value : null;

export function createStreamMux(io: StreamMuxIo): StreamMux {
  const streams = new Map<number, OpenStream>();

  function end(stream: OpenStream, exitStatus: number | null, error?: { code: string; message: string }) {
    if (stream.ended) return;
    stream.ended = true;
    clearTimeout(stream.hangup);
    flushAck(stream);
    streams.delete(stream.id);
    io.sendJson({ t: 'stream.end', sid: stream.id, exitStatus, ...(error ? { error } : {}) });
  }

  function flushAck(stream: OpenStream) {
    if (stream.pendingAck === 0) return;
    io.sendJson({ t: 'stream.ack', sid: stream.id, bytes: stream.pendingAck });
    stream.pendingAck = 0;
  }

  function open(id: number, request: StreamTargetRequest) {
    if (streams.has(id)) return;
    const refuse = (code: string, message: string) =>
      io.sendJson({ t: 'stream.end', sid: id, exitStatus: null, error: { code, message } });
    if (streams.size >= MAX_NODE_STREAMS)
      return refuse('RESOURCE_EXHAUSTED', `this node already has ${MAX_NODE_STREAMS} streams open`);
    const factory = streamTargetFactory(request.kind);
    if (!factory)
      return refuse(
        'UNSUPPORTED',
        `this daemon has no ${request.kind.slice(0, 64)} target (no runtime here registered one)`,
      );
    const stream: OpenStream = {
      id,
      kind: request.kind,
      target: null,
      ended: false,
      pendingAck: 0,
      window: new SendWindow(
        () => stream.target?.pause(),
        () => stream.target?.resume(),
      ),
    };
    streams.set(id, stream);
    try {
      stream.target = factory(request, {
        data(chunk) {
          if (stream.ended) return;
          for (let at = 0; at < chunk.byteLength; at += STREAM_FRAME_BYTES) {
            const part = chunk.subarray(at, at + STREAM_FRAME_BYTES);
            io.sendBinary(dataFrame(id, part));
            stream.window.sent(part.byteLength);
          }
          // A target that cannot stop producing meets the bound: the reader is too far behind.
          if (stream.window.overrun()) {
            end(stream, null, { code: 'SLOW_READER', message: 'the reader fell 16 MiB behind' });
            stream.target?.close();
          }
        },
        end: (exitStatus, error) => end(stream, exitStatus, error),
      });
    } catch (error) {
      streams.delete(id);
      stream.ended = true;
      const code = error instanceof StreamRefusal ? error.code : 'FAILED';
      return refuse(code, (error as Error).message.slice(0, 500));
    }
    io.sendJson({ t: 'stream.opened', sid: id });
  }

  return {
    get size() {
      return streams.size;
    },
    onMessage(message) {
      if (typeof message.t !== 'string' || !message.t.startsWith('stream.')) return false;
      const id = streamIdOf(message.sid);
      if (id === null) return true;
      const stream = streams.get(id);
      switch (message.t) {
        case 'stream.open': {
          const target = message.target as StreamTargetRequest | undefined;
          if (!target || typeof target !== 'object' || typeof target.kind !== 'string') {
            io.sendJson({
              t: 'stream.end',
              sid: id,
              exitStatus: null,
              error: { code: 'INVALID_ARGUMENT', message: 'the stream names no target' },
            });
            return true;
          }
          open(id, target);
          return true;
        }
        case 'stream.ack': {
          const bytes = Number(message.bytes);
          if (stream && Number.isSafeInteger(bytes) && bytes > 0) stream.window.acked(bytes);
          return true;
        }
        case 'stream.resize':
          if (stream?.target?.resize && typeof message.cols === 'number' && typeof message.rows === 'number')
            stream.target.resize(message.cols, message.rows);
          return true;
        case 'stream.close':
          if (stream && !stream.ended) {
            stream.target?.close();
            stream.hangup = setTimeout(
              () => end(stream, null, { code: 'CLOSED', message: 'hung up' }),
              HANGUP_GRACE_MS,
            );
            stream.hangup.unref();
          }
          return true;
        default:
          return true;
      }
    },
    onBinary(frame) {
      const parsed = readDataFrame(frame);
      if (!parsed) return;
      const stream = streams.get(parsed.streamId);
      if (!stream || stream.ended || !stream.target) return;
      const bytes = parsed.chunk.byteLength;
      // Acknowledged once the target has taken them, in one message per turn of the event loop.
      stream.target.write(parsed.chunk, () => {
        if (stream.ended) return;
        if (stream.pendingAck === 0) setImmediate(() => flushAck(stream));
        stream.pendingAck += bytes;
      });
    },
    closeAll() {
      for (const stream of [...streams.values()]) {
        stream.ended = true;
        clearTimeout(stream.hangup);
        stream.target?.close();
      }
      streams.clear();
    },
  };
}
