/**
 * A real HTTP receiver on loopback for the webhook tests: it records every request (headers and
 * raw body) and answers as told: 200, a failure (500), a redirect (302), or nothing at all (a
 * timeout), switched on cue while deliveries run.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';

type ReceiverMode = 'ok' | 'fail' | 'redirect' | 'hang';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  path: string;
  at: number;
  /** What the receiver answered. */
  answered: ReceiverMode;
}

export interface Receiver {
  /** `http://127.0.0.1:PORT/hook` */
  url: string;
  port: number;
  received: Received[];
  mode: ReceiverMode;
  /** Waits until `predicate` holds of what was received, or fails after `timeoutMs`. */
  waitFor(predicate: (received: Received[]) => boolean, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const receiver: Receiver = {
    url: '',
    port: 0,
    received: [],
    mode: 'ok',
    async waitFor(predicate, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(receiver.received)) {
        if (Date.now() > deadline)
          throw new Error(
            `the receiver did not get what was expected; it got ${receiver.received.length} request(s)`,
          );
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      return receiver.received;
    },
    close: async () => {},
  };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const answered = receiver.mode;
      receiver.received.push({
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        path: request.url ?? '',
        at: Date.now(),
        answered,
      });
      switch (answered) {
        case 'ok':
          response.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
          return;
        case 'fail':
          response
            .writeHead(500, { 'content-type': 'text/plain' })
            .end('receiver \u001b[31mbroke\u0007 on purpose');
          return;
        case 'redirect':
          response.writeHead(302, { location: `${receiver.url}/elsewhere` }).end();
          return;
        case 'hang':
          hanging.add(response);
          return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  receiver.port = typeof address === 'object' && address ? address.port : 0;
  receiver.url = `http://127.0.0.1:${receiver.port}/hook`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}
