// Statement capture inside a benchmark's server process: every statement the server's `pg`
// clients send while a capture is open, as they reach the driver (after the server's own wrappers:
// prepared name, text, parameters), with the write to the socket it shared with others (the
// server's pipelining corks the socket, writes `begin`, a held statement and the next one, then
// uncorks). The benchmark opens and closes a capture over the IPC channel around one call, and
// replays what it got straight through `pg` (bench/lib/replay.mjs).
import net from 'node:net';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Hooks the `pg` that the build at `distUrl` loads; answers capture requests on `process`. */
export function installCapture(distUrl) {
  if (!process.send) return;
  // The build's own `pg` (a build elsewhere has its own node_modules): its CommonJS entry is the
  // module its ESM entry wraps, so patching its prototypes reaches the server's clients.
  const pgPath = createRequire(fileURLToPath(distUrl)).resolve('pg');
  const pg = createRequire(fileURLToPath(distUrl))('pg');
  // Which write a statement went out in: every outermost cork starts a new one (the driver corks
  // again inside to send a prepared statement's messages; that is still the same write).
  let writes = 0;
  const cork = net.Socket.prototype.cork;
  net.Socket.prototype.cork = function (...args) {
    if (this.writableCorked === 0) this.benchWrite = ++writes;
    return cork.apply(this, args);
  };
  let log = null;
  let poolSize = null;
  // Clients are numbered as they are first seen, so a capture tells which connection sent what.
  const clientIds = new WeakMap();
  let nextClient = 0;
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config, values, callback) {
    if (log) {
      if (!clientIds.has(this)) clientIds.set(this, ++nextClient);
      const stream = this.connection?.stream;
      const isConfig = config !== null && typeof config === 'object';
      log.push({
        client: clientIds.get(this),
        name: isConfig ? (config.name ?? null) : null,
        text: isConfig ? config.text : config,
        values: (isConfig ? config.values : values) ?? [],
        write: stream && stream.writableCorked > 0 ? stream.benchWrite : null,
      });
    }
    return query.call(this, config, values, callback);
  };
  const connect = pg.Pool.prototype.connect;
  pg.Pool.prototype.connect = function (...args) {
    poolSize = this.options?.max ?? poolSize;
    return connect.apply(this, args);
  };
  process.on('message', (message) => {
    if (message?.capture === 'start') {
      log = [];
      process.send({ started: true });
    } else if (message?.capture === 'stop') {
      process.send({ captured: log ?? [], poolSize, pg: pgPath });
      log = null;
    }
  });
}
