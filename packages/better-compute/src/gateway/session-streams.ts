/**
 * The gateway's end of the streams multiplexed on one daemon session (the daemon's end is
 * packages/daemon/src/streams/mux.ts): it numbers the streams, frames their bytes (4-byte stream
 * id, then data) and routes what the daemon sends to each stream's sink.
 */
import { MAX_NODE_STREAMS } from '@better-compute/core';
import type { NodeStreamTarget } from './node-streams.js';
import type { StreamSink, StreamTransport } from './flow-stream.js';

export interface SessionStreams {
  open(target: NodeStreamTarget, sink: StreamSink): StreamTransport | null;
  onMessage(message: StreamMessage): void;
  onBinary(frame: Buffer): void;
  /** The session ended: every stream ends with `code`. */
  closeAll(code: string, message: string): void;
}

type StreamMessage =
  | { t: 'stream.opened'; sid: number }
  | { t: 'stream.ack'; sid: number; bytes: number }
  | {
      t: 'stream.end';
      sid: number;
      exitStatus: number | null;
      error?: { code: string; message: string } | undefined;
    };

export function createSessionStreams(io: {
  sendJson(message: Record<string, unknown>): void;
  sendBinary(frame: Buffer): void;
}): SessionStreams {
  const sinks = new Map<number, StreamSink>();
  let nextId = 1;

  return {
    open(target, sink) {
      if (sinks.size >= MAX_NODE_STREAMS) return null;
      const sid = nextId;
      nextId = nextId >= 0xffffffff ? 1 : nextId + 1;
      sinks.set(sid, sink);
      io.sendJson({ t: 'stream.open', sid, target });
      return {
        send(chunk) {
          if (!sinks.has(sid)) return;
          const frame = Buffer.allocUnsafe(4 + chunk.byteLength);
          frame.writeUInt32BE(sid, 0);
          frame.set(chunk, 4);
          io.sendBinary(frame);
        },
        ack(bytes) {
          if (sinks.has(sid)) io.sendJson({ t: 'stream.ack', sid, bytes });
        },
        resize(cols, rows) {
          if (sinks.has(sid)) io.sendJson({ t: 'stream.resize', sid, cols, rows });
        },
        close(reason) {
          if (sinks.has(sid)) io.sendJson({ t: 'stream.close', sid, reason: reason?.slice(0, 200) ?? null });
        },
      };
    },
    onMessage(message) {
      const sink = sinks.get(message.sid);
      if (!sink) return;
      switch (message.t) {
        case 'stream.opened':
          sink.opened();
          return;
        case 'stream.ack':
          sink.acked(message.bytes);
          return;
        case 'stream.end':
          sinks.delete(message.sid);
          sink.ended({
            exitStatus: message.exitStatus,
            ...(message.error ? { error: message.error } : {}),
          });
          return;
      }
    },
    onBinary(frame) {
      if (frame.byteLength < 4) return;
      const sink = sinks.get(frame.readUInt32BE(0));
      // Copied out of the socket's buffer: a reader may hold the chunk after this turn.
      sink?.data(Buffer.from(frame.subarray(4)));
    },
    closeAll(code, message) {
      const all = [...sinks.values()];
      sinks.clear();
      for (const sink of all) sink.ended({ exitStatus: null, error: { code, message } });
    },
  };
}
