// The baseline: a bare node:http server answering a fixed JSON body, as little work as a JSON
// endpoint can do.
import http from 'node:http';

const body = JSON.stringify({ data: { product: 'better-compute', version: '0.0.0', apiVersion: 1 } });
const server = http.createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    response.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    response.end(body);
  });
});
server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
