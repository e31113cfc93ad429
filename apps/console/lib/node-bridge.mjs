// node:http to the web-standard handler and back, for /api/*: IAM's and compute's routes and the
// event stream, which is written chunk by chunk as it is produced.
const BODY_LIMIT = 4 * 1024 * 1024;

export class BodyTooLarge extends Error {}

async function readBody(incoming) {
  const declared = Number(incoming.headers['content-length'] ?? 0);
  if (declared > BODY_LIMIT) throw new BodyTooLarge();
  const chunks = [];
  let size = 0;
  for await (const chunk of incoming) {
    size += chunk.length;
    if (size > BODY_LIMIT) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export async function toRequest(incoming, origin, signal) {
  const headers = new Headers();
  for (let i = 0; i < incoming.rawHeaders.length; i += 2)
    headers.append(incoming.rawHeaders[i], incoming.rawHeaders[i + 1]);
  const method = incoming.method ?? 'GET';
  const init = { method, headers, signal };
  if (method !== 'GET' && method !== 'HEAD') {
    const body = await readBody(incoming);
    if (body.length) init.body = new Uint8Array(body);
  }
  return new Request(new URL(incoming.url ?? '/', origin), init);
}

export async function writeResponse(response, outgoing) {
  const headers = {};
  response.headers.forEach((value, key) => {
    if (key !== 'set-cookie') headers[key] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers['set-cookie'] = cookies;
  if (!response.body || !String(headers['content-type'] ?? '').startsWith('text/event-stream')) {
    const body = Buffer.from(await response.arrayBuffer());
    outgoing.writeHead(response.status, { ...headers, 'content-length': body.length });
    outgoing.end(body);
    return;
  }
  outgoing.socket?.setNoDelay(true);
  outgoing.writeHead(response.status, { ...headers, connection: 'close' });
  outgoing.flushHeaders();
  const reader = response.body.getReader();
  const gone = () => void reader.cancel().catch(() => {});
  outgoing.once('close', gone);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || outgoing.destroyed) break;
      if (!outgoing.write(value))
        await new Promise((resolve) => {
          outgoing.once('drain', resolve);
          outgoing.once('close', resolve);
        });
    }
  } finally {
    outgoing.off('close', gone);
    if (!outgoing.destroyed) outgoing.end();
  }
}

export function writeError(outgoing, status, code, message) {
  if (outgoing.headersSent) return void outgoing.end();
  const body = JSON.stringify({ error: { code, message } });
  outgoing.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  outgoing.end(body);
}
