/**
 * A thin node:http adapter for the web-standard handler. It reads a body of at most 1 MiB into
 * memory (the handler's own limit is 64 KiB and it answers 413 from Content-Length first), builds a
 * Request, and streams the Response back.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

const HARD_BODY_CAP = 1024 * 1024;

async function readBody(request: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > HARD_BODY_CAP) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function toRequest(incoming: IncomingMessage, body: Buffer | undefined, origin: string): Request {
  const headers = new Headers();
  for (let i = 0; i < incoming.rawHeaders.length; i += 2) headers.append(incoming.rawHeaders[i]!, incoming.rawHeaders[i + 1]!);
  const init: RequestInit = { method: incoming.method ?? 'GET', headers };
  if (body && body.length > 0) init.body = new Uint8Array(body);
  return new Request(new URL(incoming.url ?? '/', origin), init);
}

async function writeResponse(response: Response, outgoing: ServerResponse): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, key) => {
    if (key === 'set-cookie') return;
    headers[key] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers['set-cookie'] = cookies;
  if (!response.body) {
    outgoing.writeHead(response.status, headers).end();
    return;
  }
  outgoing.writeHead(response.status, headers);
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) outgoing.write(chunk);
  outgoing.end();
}

export function createNodeServer(handler: (request: Request) => Promise<Response>): Server {
  return createServer((incoming, outgoing) => {
    const origin = `http://${incoming.headers.host ?? 'localhost'}`;
    void (async () => {
      try {
        const hasBody = incoming.method !== 'GET' && incoming.method !== 'HEAD';
        const body = hasBody ? await readBody(incoming) : undefined;
        if (body === null) {
          outgoing
            .writeHead(413, { 'content-type': 'application/json; charset=utf-8', connection: 'close' })
            .end(JSON.stringify({ error: { code: 'PAYLOAD_TOO_LARGE', message: 'the request body is too large', requestId: '' } }));
          return;
        }
        await writeResponse(await handler(toRequest(incoming, body, origin)), outgoing);
      } catch {
        if (!outgoing.headersSent) outgoing.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
        outgoing.end(JSON.stringify({ error: { code: 'INTERNAL', message: 'internal error', requestId: '' } }));
      }
    })();
  });
}
