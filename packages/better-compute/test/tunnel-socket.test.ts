/**
 * The CLI's end of a tunnel: frames the server sends with its answer to the upgrade (a node that
 * refused at once, a server's banner) reach handlers attached after the socket is handed over.
 */
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { openTunnelSocket } from '../src/cli/tunnel-socket.js';

describe('openTunnelSocket', () => {
  it('hands the socket over paused, so frames that came with the upgrade are not lost', async () => {
    const http = createServer();
    const wss = new WebSocketServer({ noServer: true });
    // The answer to the upgrade, a banner, the exit and the close all go out in one write.
    http.on('upgrade', (request, socket, head) => {
      socket.cork();
      wss.handleUpgrade(request, socket, head, (ws) => {
        ws.send(Buffer.from('SSH-2.0-banner\r\n'), { binary: true });
        ws.send(JSON.stringify({ t: 'exit', status: 7 }));
        ws.close(1000, 'ended');
        process.nextTick(() => socket.uncork());
      });
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const port = (http.address() as { port: number }).port;
    try {
      for (let round = 0; round < 5; round++) {
        const ws = await openTunnelSocket(`http://127.0.0.1:${port}/api/compute`, 'tkt_test', undefined);
        // Handlers attached a turn of the event loop later still see every frame.
        await new Promise((resolve) => setImmediate(resolve));
        const seen: string[] = [];
        const closed = new Promise<void>((resolve) => ws.on('close', () => resolve()));
        ws.on('message', (data: Buffer, isBinary: boolean) =>
          seen.push(isBinary ? `bytes ${data.toString('utf8').trim()}` : data.toString('utf8')),
        );
        ws.resume();
        await closed;
        expect(seen).toEqual(['bytes SSH-2.0-banner', '{"t":"exit","status":7}']);
      }
    } finally {
      wss.close();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
  });
});
