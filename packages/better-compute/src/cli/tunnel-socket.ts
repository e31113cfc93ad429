/**
 * The client side of a tunnel: the WebSocket `{endpoint}/tunnels/{ticket}`, opened with the same
 * credential that called tunnels.open (the server checks the ticket was issued to it). A refusal
 * before the upgrade arrives as the API's error envelope and becomes its ComputeError.
 */
import type { Socket } from 'node:net';
import {
  ComputeError,
  STREAM_DISCONNECT_BYTES,
  STREAM_HIGH_WATER_BYTES,
  STREAM_LOW_WATER_BYTES,
} from '@better-compute/core';
import type { WebSocket } from 'ws';

/** The text frames the server sends besides the bytes. */
export type TunnelControl =
  | { t: 'exit'; status: number | null; error?: { code: string; message: string } }
  | { t: 'error'; code: string; message: string; opened?: boolean };

export async function openTunnelSocket(
  endpoint: string,
  ticket: string,
  token: string | undefined,
): Promise<WebSocket> {
  const { WebSocket } = await import('ws');
  const url = new URL(`${endpoint.replace(/\/+$/, '')}/tunnels/${encodeURIComponent(ticket)}`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      maxPayload: 32 * 1024 * 1024,
      handshakeTimeout: 20_000,
    });
    // Paused before anyone awaits it: frames that came in the same read as the upgrade's answer
    // (a node that refused at once, a server's banner) are otherwise emitted on the next tick,
    // before the caller's handlers exist, and lost. The caller resumes once they are attached.
    ws.once('open', () => {
      ws.pause();
      resolve(ws);
    });
    ws.once('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        let error: { code?: string; message?: string; hint?: string } | undefined;
        try {
          error = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: typeof error }).error;
        } catch {
          error = undefined;
        }
        reject(
          new ComputeError(
            (error?.code as never) ?? 'UNAVAILABLE',
            error?.message ?? `the tunnel was refused (HTTP ${response.statusCode})`,
            error?.hint ? { hint: error.hint } : {},
          ),
        );
      });
    });
    ws.once('error', (error) =>
      reject(new ComputeError('UNAVAILABLE', `the tunnel could not connect: ${error.message}`)),
    );
  });
}

/** A text frame of the server, or null for anything else. */
export function controlOf(data: Buffer): TunnelControl | null {
  try {
    const parsed = JSON.parse(data.toString('utf8')) as TunnelControl;
    return parsed && (parsed.t === 'exit' || parsed.t === 'error') ? parsed : null;
  } catch {
    return null;
  }
}

/**
 * Carries one local TCP connection over a tunnel's WebSocket, bounded both ways: the local socket
 * pauses while more than the high-water mark waits unsent and resumes under the low-water mark;
 * a local reader further behind than the disconnect mark is dropped (the WebSocket's receiving side
 * cannot be paused). The tunnel has no half-close: either side ending ends the connection.
 */
export function bridgeSocket(ws: WebSocket, socket: Socket, onDropped: (reason: string) => void): void {
  socket.on('data', (chunk: Buffer) => {
    ws.send(chunk, { binary: true }, () => {
      if (socket.isPaused() && ws.bufferedAmount < STREAM_LOW_WATER_BYTES) socket.resume();
    });
    if (ws.bufferedAmount > STREAM_HIGH_WATER_BYTES) socket.pause();
  });
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary) return;
    socket.write(data);
    if (socket.writableLength > STREAM_DISCONNECT_BYTES) {
      onDropped('a local reader fell more than 16 MiB behind; its connection was closed');
      socket.destroy();
      ws.close(1000);
    }
  });
  const hangUp = () => ws.close(1000);
  socket.on('close', hangUp);
  socket.on('end', hangUp);
  socket.on('error', hangUp);
  // What the remote sent last is still written out before the local side is closed.
  ws.on('close', () => {
    socket.end();
    setTimeout(() => socket.destroy(), 10_000).unref();
  });
  socket.resume();
  ws.resume();
}
