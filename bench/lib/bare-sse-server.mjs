// The baseline of bench/watch: a bare node:http server-sent events broadcaster. GET /watch opens a
// stream; POST /publish with a JSON body sends it to every open stream as one frame (id, event,
// data), then answers 204. No database, no authorization, no outbox: the floor of a Node SSE fan-out.
import { createServer } from 'node:http';

const streams = new Set();
let sequence = 0;
const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url.startsWith('/watch')) {
    response.socket.setNoDelay(true);
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
    });
    response.write('retry: 2000\n\n');
    streams.add(response);
    response.on('close', () => streams.delete(response));
    return;
  }
  if (request.method === 'POST' && request.url === '/publish') {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const frame = Buffer.from(`id: ${++sequence}.0\nevent: site.created\ndata: ${body}\n\n`);
      for (const stream of streams) stream.write(frame);
      response.writeHead(204, { 'content-length': 0 });
      response.end();
    });
    return;
  }
  response.writeHead(404, { 'content-length': 0 });
  response.end();
});
server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => {
  for (const stream of streams) stream.destroy();
  server.close(() => process.exit(0));
});
