// The replay floor: the statements a server sent for one call (bench/lib/capture.mjs), sent again
// straight through `pg` with no server: the same text under the same prepared name, parameters of
// the same shape (new ids, times moved to now), in the same writes to the socket (what the server
// pipelined goes out corked together), one pool of the server's size. Also: what a stretch of WAL
// holds for one database (pg_waldump), so the server and its replay are compared on the rows,
// index entries and bytes they wrote, whatever else the cluster did meanwhile.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { newId } from '../../packages/core/dist/index.js';

// Ids a call mints (reservation, event, audit entry, request) and SHA-256 digests (the idempotency
// key's scope and input hashes, as 32 bytes or 64 hex digits): each replayed pair gets its own, the
// same one wherever the capture had the same one (the release names the reservation its reserve
// made). The advisory lock a key is claimed under is named by its scope hash's first 8 bytes (a
// signed 64-bit number): it follows the fresh hash, or every replayed reserve would wait on one lock.
const MINTED = /\b(rsv|evt|aud|req)_[0-7][0-9a-hjkmnp-tv-z]{25}\b/g;
const DIGEST = /^[0-9a-f]{64}$/;
const lockName = (digest) => digest.readBigInt64BE(0).toString();

/** A function that rewrites a captured parameter for one replayed pair; `calls`: the capture. */
export function freshValues(shiftMs, calls) {
  const bytesOf = (value) => (Buffer.isBuffer(value) ? value : Buffer.from(value, 'hex'));
  const lockedBy = new Map();
  for (const call of calls)
    for (const value of call.values)
      if (
        (Buffer.isBuffer(value) && value.length === 32) ||
        (typeof value === 'string' && DIGEST.test(value))
      )
        lockedBy.set(lockName(bytesOf(value)), value);
  const minted = new Map();
  const mint = (id) => {
    let fresh = minted.get(id);
    if (!fresh) {
      fresh = `${id.slice(0, id.indexOf('_'))}_${newId('request').slice(4)}`;
      minted.set(id, fresh);
    }
    return fresh;
  };
  const digest = (value) => {
    let fresh = minted.get(value);
    if (!fresh) {
      fresh = randomBytes(32).toString('hex');
      minted.set(value, fresh);
    }
    return fresh;
  };
  const digestBytes = (value) => {
    const key = `bytes:${value.toString('hex')}`;
    let fresh = minted.get(key);
    if (!fresh) {
      fresh = randomBytes(32);
      minted.set(key, fresh);
    }
    return fresh;
  };
  const rewrite = (value) => {
    if (value instanceof Date) return new Date(value.getTime() + shiftMs);
    if (Buffer.isBuffer(value) && value.length === 32) return digestBytes(value);
    if (typeof value === 'string' && lockedBy.has(value))
      return lockName(bytesOf(rewrite(lockedBy.get(value))));
    if (typeof value === 'string') return DIGEST.test(value) ? digest(value) : value.replace(MINTED, mint);
    if (Array.isArray(value)) return value.map(rewrite);
    return value;
  };
  return rewrite;
}

/**
 * Replays one captured transaction (the statements of one call) on connections of `pool`: one per
 * connection the server used, held for the call. Statements the server wrote together are written
 * together (corked), and all of them answered before the next write, as the server's pipelining
 * does; the others one at a time. A failure rolls its transaction back and is counted.
 */
export async function replayCall(pool, calls, rewrite) {
  const clients = new Map();
  let failed = 0;
  try {
    let i = 0;
    while (i < calls.length) {
      const first = calls[i];
      let j = i + 1;
      if (first.write !== null)
        while (j < calls.length && calls[j].write === first.write && calls[j].client === first.client) j++;
      let client = clients.get(first.client);
      if (!client) {
        client = await pool.connect();
        clients.set(first.client, client);
      }
      const batch = calls.slice(i, j).map((c) => {
        const values = c.values.map(rewrite);
        if (c.name) return { name: c.name, text: c.text, values };
        return values.length ? { text: c.text, values } : c.text;
      });
      const stream = client.connection.stream;
      stream.cork();
      let sent;
      try {
        sent = batch.map((q) => client.query(q));
      } finally {
        stream.uncork();
      }
      const settled = await Promise.allSettled(sent);
      if (settled.some((s) => s.status === 'rejected')) {
        failed++;
        replayCall.firstError ??= settled.find((s) => s.status === 'rejected').reason;
        await client.query('rollback').catch(() => {});
        // Skip the rest of this connection's transaction.
        while (j < calls.length && calls[j].client === first.client) j++;
      }
      i = j;
    }
  } finally {
    for (const client of clients.values()) client.release();
  }
  return failed;
}

/** How the captured calls went to PostgreSQL: statements, round trips (writes answered), connections. */
export function shapeOf(calls) {
  const statements = calls.filter((c) => !/^\s*(begin|commit|rollback)\s*$/i.test(c.text)).length;
  let trips = 0;
  for (let i = 0; i < calls.length; i++)
    if (calls[i].write === null || calls[i].write !== calls[i - 1]?.write) trips++;
  return { statements, trips, connections: new Set(calls.map((c) => c.client)).size };
}

/**
 * What the WAL between two positions holds for the database `oid` (pg_waldump on the local
 * cluster's pg_wal): bytes, records, row versions written (heap inserts, updates, HOT updates,
 * deletes), row locks, and index entries (b-tree leaf and posting-list inserts). Commit records
 * count for the transactions that wrote in the database. Null when pg_waldump cannot read it.
 * With a `detail` map, its records and bytes are also added up there by record type and relation
 * (`rmgr desc relfilenode`).
 */
export function walOf(waldump, walDir, oid, start, end, detail = null) {
  return new Promise((resolve) => {
    const child = spawn(waldump, ['-p', walDir, '-s', start, '-e', end], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const totals = {
      bytes: 0,
      // The same without full-page images, which follow the cluster's checkpoints, not the work.
      withoutImages: 0,
      records: 0,
      inserts: 0,
      updates: 0,
      hot: 0,
      deletes: 0,
      locks: 0,
      indexEntries: 0,
      fpi: 0,
    };
    const ours = new Set();
    const commits = new Map();
    const rel = ` rel 1663/${oid}/`;
    let rest = '';
    const line = (text) => {
      const tot = /len \(rec\/tot\):\s*(\d+)\/\s*(\d+), tx:\s*(\d+)/.exec(text);
      if (!tot) return;
      const bytes = Number(tot[2]);
      const tx = tot[3];
      if (text.startsWith('rmgr: Transaction')) {
        if (/desc: COMMIT/.test(text)) commits.set(tx, (commits.get(tx) ?? 0) + bytes);
        return;
      }
      if (!text.includes(rel)) return;
      if (tx !== '0') ours.add(tx);
      totals.bytes += bytes;
      totals.withoutImages += Number(tot[1]);
      if (detail) {
        const key = `${/^rmgr: (\S+)/.exec(text)[1]} ${/desc: (\S+)/.exec(text)?.[1]} ${/ rel \d+\/\d+\/(\d+)/.exec(text)[1]}`;
        const seen = detail.get(key) ?? { records: 0, bytes: 0 };
        seen.records++;
        seen.bytes += bytes;
        detail.set(key, seen);
      }
      totals.records++;
      if (/ FPW/.test(text)) totals.fpi++;
      const desc = /desc: (\S+)/.exec(text)?.[1];
      if (text.startsWith('rmgr: Heap ')) {
        if (desc === 'INSERT') totals.inserts++;
        else if (desc === 'UPDATE') totals.updates++;
        else if (desc === 'HOT_UPDATE') totals.hot++;
        else if (desc === 'DELETE') totals.deletes++;
        else if (desc === 'LOCK') totals.locks++;
      } else if (text.startsWith('rmgr: Heap2') && desc === 'MULTI_INSERT') {
        totals.inserts += Number(/MULTI_INSERT (\d+)/.exec(text)?.[1] ?? 1);
      } else if (text.startsWith('rmgr: Btree') && (desc === 'INSERT_LEAF' || desc === 'INSERT_POST')) {
        totals.indexEntries++;
      }
    };
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop();
      for (const text of lines) line(text);
    });
    child.on('error', () => resolve(null));
    child.on('close', () => {
      line(rest);
      for (const [tx, bytes] of commits)
        if (ours.has(tx)) {
          totals.bytes += bytes;
          totals.withoutImages += bytes;
          totals.records++;
        }
      resolve(totals.records === 0 ? null : totals);
    });
  });
}

/** Adds one measurement's WAL figures into another. */
export function addWal(into, more) {
  if (!more) return into;
  if (!into) return { ...more };
  for (const key of Object.keys(more)) into[key] += more[key];
  return into;
}
