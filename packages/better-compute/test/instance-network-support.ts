/**
 * What the instance network tests reach from inside a guest: an "outside" host (a network namespace
 * joined to the node by a veth, with a route, standing in for the internet, which this machine does
 * not reach), a listener on the node's own addresses (which a guest must never reach), and the guest
 * side's probe, bash's /dev/tcp under coreutils' timeout (the image has both).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';

export interface Outside {
  /** The outside host's address: beyond the node, reached only through egress. */
  address: string;
  /** The node's end of the veth: one of the node's own addresses. */
  nodeAddress: string;
  port: number;
  /** The peers the outside listener saw, as it saw them (after the node's NAT). */
  peers: string[];
  close(): void;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

/**
 * A namespace with an address in 198.18.0.0/15 (set aside for tests of network devices), routed
 * from the node through a veth, running a listener that answers `outside` and notes each peer.
 */
export async function outsideHost(): Promise<Outside> {
  const tag = randomBytes(3).toString('hex');
  const ns = `bct-outside-${tag}`;
  const link = `bct-o${tag}`;
  const third = 1 + (parseInt(tag, 16) % 250);
  const nodeAddress = `198.18.${third}.1`;
  const address = `198.18.${third}.2`;
  const port = 7000;
  ip('netns', 'add', ns);
  ip('link', 'add', link, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
  ip('addr', 'add', `${nodeAddress}/30`, 'dev', link);
  ip('link', 'set', link, 'up');
  ip('-n', ns, 'addr', 'add', `${address}/30`, 'dev', 'eth0');
  ip('-n', ns, 'link', 'set', 'eth0', 'up');
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  ip('-n', ns, 'route', 'add', 'default', 'via', nodeAddress);
  const script = `require('net').createServer((s) => { console.log('peer ' + s.remoteAddress); s.end('outside\\n'); s.on('error', () => {}); }).listen(${port}, '0.0.0.0', () => console.log('listening'));`;
  const child: ChildProcess = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const peers: string[] = [];
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the outside listener exited with ${code}`)));
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) {
        if (line === 'listening') resolve();
        if (line.startsWith('peer ')) peers.push(line.slice(5));
      }
    });
  });
  return {
    address,
    nodeAddress,
    port,
    peers,
    close() {
      child.kill('SIGKILL');
      try {
        ip('netns', 'delete', ns);
      } catch {
        /* gone */
      }
      // Deleting the namespace takes its end of the pair, and the kernel then removes this end on
      // its own: it may be gone between the look and the delete.
      try {
        if (existsSync(`/sys/class/net/${link}`)) ip('link', 'delete', link);
      } catch {
        /* gone */
      }
    },
  };
}

/** A listener on every address of the node, which notes whoever connects. */
export async function nodeListener(): Promise<{ port: number; peers: string[]; server: Server }> {
  const peers: string[] = [];
  const server = createServer((socket) => {
    peers.push(socket.remoteAddress ?? '?');
    socket.end('node\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  return { port: (server.address() as { port: number }).port, peers, server };
}

/** The node's own IPv4 addresses on its real interfaces (not loopback, not instance veths). */
export function nodeAddresses(): string[] {
  return Object.entries(networkInterfaces())
    .filter(([name]) => name !== 'lo' && !name.startsWith('bci-') && !name.startsWith('bct-'))
    .flatMap(([, addresses]) => (addresses ?? []).filter((a) => a.family === 'IPv4').map((a) => a.address));
}

/**
 * A guest shell command that opens a TCP connection to each `host:port` within 3 s and prints one
 * line per target: `host:port ok <first line read>` or `host:port failed`.
 */
export function guestConnects(targets: string[]): string {
  return targets
    .map(
      (target) =>
        `if out=$(timeout 3 bash -c 'exec 3<>/dev/tcp/${target.replace(':', '/')} && head -n 1 <&3' 2>/dev/null); then echo "${target} ok $out"; else echo "${target} failed"; fi`,
    )
    .join('; ');
}
