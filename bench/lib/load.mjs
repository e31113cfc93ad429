import { execFileSync } from 'node:child_process';
// A small closed-loop HTTP load generator: `connections` keep-alive clients, each sending its next
// request as soon as the previous answer arrives, for `seconds`. Returns requests per second and
// latency percentiles. It runs in the benchmark's own process; servers run in child processes.
// The client is a bare HTTP/1.1 connection (connect below), not node:http: a load generator that
// spends less CPU leaves more of this 2-core machine to the server it measures.
import net from 'node:net';

/**
 * One keep-alive HTTP/1.1 connection that sends a POST at a time and reads the answer by its
 * content-length (what both servers measured here send). `post` resolves with the status and body.
 * A connection the server closed while idle (its keep-alive timeout) is opened again on the next post.
 */
export function connect(url) {
  const target = new URL(url);
  const hostHeader = `host: ${target.host}\r\n`;
  let socket = null;
  let pending = null;
  let buffered = null;
  const fail = (error) => {
    const waiting = pending;
    pending = null;
    waiting?.reject(error);
  };
  const open = () => {
    const opened = net.connect({ host: target.hostname, port: Number(target.port) });
    opened.setNoDelay(true);
    opened.on('error', fail);
    opened.on('close', () => {
      if (socket === opened) socket = null;
      buffered = null;
      fail(new Error('the server closed the connection'));
    });
    opened.on('data', (chunk) => {
      buffered = buffered ? Buffer.concat([buffered, chunk]) : chunk;
      const headEnd = buffered.indexOf('\r\n\r\n');
      if (headEnd === -1) return;
      const head = buffered.toString('latin1', 0, headEnd);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
      if (Number.isNaN(length)) return fail(new Error('an answer without content-length'));
      const end = headEnd + 4 + length;
      if (buffered.length < end) return;
      const body = buffered.toString('utf8', headEnd + 4, end);
      buffered = buffered.length > end ? buffered.subarray(end) : null;
      const waiting = pending;
      pending = null;
      waiting?.resolve({ status: Number(head.slice(9, 12)), body });
    });
    return opened;
  };
  return {
    post(path, body, headers = '') {
      return new Promise((resolve, reject) => {
        pending = { resolve, reject };
        socket ??= open();
        socket.write(
          `POST ${path} HTTP/1.1\r\n${hostHeader}content-type: application/json\r\n${headers}` +
            `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
      });
    },
    close() {
      const closing = socket;
      socket = null;
      closing?.destroy();
    },
  };
}

/** `headers` as the extra header lines `connect().post` takes. */
export const headerLines = (headers) =>
  Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');

export async function load({ url, body = '{}', connections = 32, seconds = 5, headers = {} }) {
  const target = new URL(url);
  const extra = headerLines(headers);
  const latencies = [];
  let errors = 0;
  const deadline = performance.now() + seconds * 1000;
  const startedAt = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      const client = connect(url);
      try {
        while (performance.now() < deadline) {
          const started = performance.now();
          try {
            const answer = await client.post(target.pathname, body, extra);
            if (answer.status !== 200) errors++;
            latencies.push(performance.now() - started);
          } catch {
            errors++;
            break;
          }
        }
      } finally {
        client.close();
      }
    }),
  );
  const elapsed = (performance.now() - startedAt) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p) =>
    latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;
  return {
    rate: latencies.length / elapsed,
    count: latencies.length,
    seconds: elapsed,
    errors,
    p50: pct(50),
    p99: pct(99),
    latencies,
  };
}

/** Starts `node script` and resolves with the URL the child prints on its first line. */
/** BENCH_CPUS read once; this process moves to its CPUs the first time it is asked. */
let cpuSplitRead;
function cpuSplit() {
  if (cpuSplitRead !== undefined) return cpuSplitRead;
  const match = /^([\d,-]+):([\d,-]+)$/.exec(process.env.BENCH_CPUS ?? '');
  cpuSplitRead = match ? { generator: match[1], servers: match[2] } : null;
  if (cpuSplitRead)
    execFileSync('taskset', ['-a', '-p', '-c', cpuSplitRead.generator, String(process.pid)], {
      stdio: 'ignore',
    });
  return cpuSplitRead;
}

export async function startChild(script, args = [], env = {}, { ipc = false } = {}) {
  const { spawn } = await import('node:child_process');
  // BENCH_PROFILE_DIR=<dir>: the child writes a CPU profile there when it exits (open it in Chrome's DevTools).
  const profile = process.env.BENCH_PROFILE_DIR
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`]
    : [];
  // BENCH_CPUS=<generator>:<servers> (for example 0:1): the load generator (this process) and the
  // servers each keep to their own CPUs, so the scheduler cannot put them on one core in one slice
  // and on two in the next; on a 2-core host that move alone shifts a ratio by 10 %.
  const pinned = cpuSplit();
  const command = pinned ? ['taskset', '-c', pinned.servers, process.execPath] : [process.execPath];
  const child = spawn(command[0], [...command.slice(1), ...profile, script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit', ...(ipc ? ['ipc'] : [])],
    // Advanced serialization carries Dates and arrays of parameters as they are.
    ...(ipc ? { serialization: 'advanced' } : {}),
    env: { ...process.env, ...env },
  });
  const url = await new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk) => {
      buffered += chunk;
      if (!buffered.includes('\n')) return;
      resolve(buffered.split('\n')[0].trim());
      // Whatever the child writes after its first line is drained and dropped, not kept.
      child.stdout.off('data', onData);
      child.stdout.resume();
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
  return {
    url,
    pid: child.pid,
    child,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill('SIGTERM');
      }),
  };
}

/**
 * CPU seconds (user + system) used so far by the process `pid`, by each PostgreSQL process on this
 * machine (its backends do the SQL; or only those in `postgresPids`, the backends of one database on
 * a cluster others use too), and by this process: read from /proc, so Linux only (null
 * elsewhere). Two snapshots' difference tells where a measured interval's CPU went.
 */
export async function cpuSnapshot(pid, postgresPids = null) {
  const { readFile, readdir } = await import('node:fs/promises');
  const ticks = 100; // USER_HZ on Linux
  const cpuOf = async (p) => {
    try {
      const stat = await readFile(`/proc/${p}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return {
        comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
        seconds: (Number(fields[11]) + Number(fields[12])) / ticks,
        kernel: Number(fields[12]) / ticks,
      };
    } catch {
      return null;
    }
  };
  let entries;
  try {
    entries = await readdir('/proc');
  } catch {
    return null;
  }
  const postgres = new Map();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    if (postgresPids && !postgresPids.has(Number(entry))) continue;
    const cpu = await cpuOf(entry);
    if (cpu?.comm === 'postgres') postgres.set(entry, cpu);
  }
  const self = process.cpuUsage();
  const server = await cpuOf(pid);
  return {
    server: server ?? { seconds: 0, kernel: 0 },
    postgres,
    self: { seconds: (self.user + self.system) / 1e6, kernel: self.system / 1e6 },
  };
}

/**
 * Milliseconds of CPU per operation between two snapshots, as text. PostgreSQL is counted per
 * process: one that started in between counts whole, one that ended in between is not seen (its
 * share is lost, so measure while the connections stay open).
 */
export function cpuPerOperation(before, after, operations) {
  if (!before || !after || operations === 0) return 'CPU per operation: not measured (no /proc)';
  const postgres = { seconds: 0, kernel: 0 };
  for (const [pid, cpu] of after.postgres) {
    const earlier = before.postgres.get(pid);
    postgres.seconds += cpu.seconds - (earlier?.seconds ?? 0);
    postgres.kernel += cpu.kernel - (earlier?.kernel ?? 0);
  }
  const ms = (seconds) => ((seconds * 1000) / operations).toFixed(2);
  // Kernel time apart: on loopback it is mostly the round trips' sends and wake-ups.
  const spent = (first, last) =>
    `${ms(last.seconds - first.seconds)} ms (kernel ${ms(last.kernel - first.kernel)})`;
  return (
    `CPU per operation: server ${spent(before.server, after.server)}, PostgreSQL ${spent({ seconds: 0, kernel: 0 }, postgres)}, ` +
    `load generator ${spent(before.self, after.self)}`
  );
}
