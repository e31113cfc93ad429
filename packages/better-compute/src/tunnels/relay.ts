/**
 * Bytes between a tunnel's WebSocket and its node stream, with flow control both ways
 * (node-streams.ts's bounds): what the client sends is written to the stream, and the socket stops
 * reading while the stream holds more than its high-water mark; what the node sends goes to the
 * client, and the stream is paused while more than 4 MiB wait in the socket, resumed under 1 MiB.
 * A client more than 16 MiB behind is disconnected, never buffered without bound.
 */
import { WebSocket, type RawData } from 'ws';
import {
  STREAM_DISCONNECT_BYTES,
  STREAM_HIGH_WATER_BYTES,
  STREAM_LOW_WATER_BYTES,
} from '@better-compute/core';
import type { NodeStream, NodeStreamEnd } from '../gateway/node-streams.js';

function bytesOf(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** Relays until either side ends; returns a function that stops relaying and closes the stream. */
export function relay(
  ws: WebSocket,
  stream: NodeStream,
  handlers: { onEnd(end: NodeStreamEnd): void },
): () => void {
  let paused = false;
  let closed = false;

  const sent = () => {
    if (paused && ws.bufferedAmount < STREAM_LOW_WATER_BYTES) {
      paused = false;
      stream.resume();
    }
  };
  stream.onData((chunk) => {
    if (closed || ws.readyState !== WebSocket.OPEN) return;
    ws.send(chunk, { binary: true }, sent);
    if (ws.bufferedAmount > STREAM_DISCONNECT_BYTES) {
      stop('the client fell more than 16 MiB behind');
      ws.close(4008, 'slow reader');
      return;
    }
    if (!paused && ws.bufferedAmount > STREAM_HIGH_WATER_BYTES) {
      paused = true;
      stream.pause();
    }
  });
  stream.onDrain(() => {
    if (!closed && ws.isPaused) ws.resume();
  });
  stream.onEnd((end) => {
    if (closed) return;
    closed = true;
    handlers.onEnd(end);
  });
  ws.on('message', (data, isBinary) => {
    if (closed) return;
    if (isBinary) {
      if (!stream.write(new Uint8Array(bytesOf(data)))) ws.pause();
      return;
    }
    let message: { t?: unknown; cols?: unknown; rows?: unknown };
    try {
      message = JSON.parse(bytesOf(data).toString('utf8')) as typeof message;
    } catch {
      return;
    }
    const size = (value: unknown) =>
      typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 1000;
    if (message?.t === 'resize' && size(message.cols) && size(message.rows))
      stream.resize(message.cols as number, message.rows as number);
  });

  // The route held the socket paused until now: read what the client sent meanwhile.
  if (ws.isPaused) ws.resume();

  function stop(reason: string) {
    if (closed) return;
    closed = true;
    stream.close(reason);
  }
  ws.on('close', () => stop('the client closed the tunnel'));
  return () => stop('the tunnel was closed');
}
