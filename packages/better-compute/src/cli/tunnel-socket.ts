/**
 * The client side of a tunnel: the WebSocket `{endpoint}/tunnels/{ticket}`, opened with the same
 * credential that called tunnels.open (the server checks the ticket was issued to it). A refusal
 * before the upgrade arrives as the API's error envelope and becomes its ComputeError.
 */
import { ComputeError } from '@better-compute/core';
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
    ws.once('open', () => resolve(ws));
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
