/**
 * Guest support: builds (or finds) the cached guest image, makes an instance's disk as a qcow2 overlay
 * over it, writes its NoCloud seed, boots it under QEMU (KVM when /dev/kvm can run a guest, TCG
 * otherwise) and reaches it over SSH and QMP. Only node:child_process and the host's tools
 * (qemu-system-x86, qemu-utils, genisoimage, openssh-client, debootstrap).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accelerator } from '../../daemon/src/runtimes/qemu-process.js';

const repositoryRoot = join(import.meta.dirname, '..', '..', '..');
export const buildScript = join(repositoryRoot, 'scripts', 'build-guest-image.sh');

/** The host commands the guest needs, and the Debian package that provides each. */
const hostTools: Record<string, string> = {
  'qemu-system-x86_64': 'qemu-system-x86',
  'qemu-img': 'qemu-utils',
  genisoimage: 'genisoimage',
  ssh: 'openssh-client',
  'ssh-keygen': 'openssh-client',
  debootstrap: 'debootstrap',
  'mkfs.ext4': 'e2fsprogs',
  // An instance's network namespace, links and rules, made by the daemon's qemu runtime.
  ip: 'iproute2',
  nft: 'nftables',
};

function hasCommand(name: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', name], { stdio: 'ignore' }).status === 0;
}

export interface HostToolsReport {
  /** Commands still missing after any install attempt. */
  missing: string[];
  /** Why they are missing (not root, or apt failed), when any are. */
  reason?: string;
}

/**
 * Installs the missing host tools with apt-get when running as root; otherwise reports what is
 * missing and the command that would install it.
 */
export function ensureHostTools(): HostToolsReport {
  const missingBefore = Object.keys(hostTools).filter((tool) => !hasCommand(tool));
  if (missingBefore.length === 0) return { missing: [] };
  const packages = [...new Set(missingBefore.map((tool) => hostTools[tool]!))];
  if (process.getuid?.() !== 0) {
    return {
      missing: missingBefore,
      reason: `not root, so cannot install them; run: sudo apt-get install -y ${packages.join(' ')}`,
    };
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...packages], {
      env,
      encoding: 'utf8',
    });
  let result = install();
  if (result.status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'ignore' });
    result = install();
  }
  const missing = Object.keys(hostTools).filter((tool) => !hasCommand(tool));
  if (missing.length === 0) return { missing };
  return { missing, reason: `apt-get install ${packages.join(' ')} failed: ${result.stderr.slice(-500)}` };
}

export interface GuestImage {
  dir: string;
  vmlinux: string;
  initrd: string;
  rootfs: string;
  kernelCmdline: string;
  manifest: { buildKey: string; kernelVersion: string; defaultUser: string; files: Record<string, unknown> };
}

function readImage(dir: string): GuestImage {
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as GuestImage['manifest'] & {
    kernelCmdline: string;
  };
  return {
    dir,
    vmlinux: join(dir, 'vmlinux'),
    initrd: join(dir, 'initrd.img'),
    rootfs: join(dir, 'rootfs.qcow2'),
    kernelCmdline: manifest.kernelCmdline,
    manifest,
  };
}

/** The cached image for the current recipe, built first when missing (minutes, once per recipe). */
export async function ensureGuestImage(onProgress?: (line: string) => void): Promise<GuestImage> {
  const child = spawn(buildScript, [], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-8000);
    for (const line of chunk.split('\n')) if (line) onProgress?.(line);
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`build-guest-image.sh exited with ${code}:\n${stderr}`);
  const dir = stdout.trim().split('\n').at(-1)!;
  return readImage(dir);
}

function run(command: string, args: string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${result.stderr}`);
  return result.stdout;
}

/** An instance's disk: a qcow2 overlay whose reads fall through to the shared base image. */
export function createOverlay(base: string, path: string): void {
  run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b', base, path]);
}

export interface NoCloudSeed {
  instanceId: string;
  hostname: string;
  sshAuthorizedKeys: string[];
  /** user-data as given: a script starting with #!, or a #cloud-config document. */
  userData?: string;
}

const instanceIdPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const hostnamePattern = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const publicKeyPattern = /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+( [ -~]*)?$/;

/**
 * Writes a NoCloud seed (an ISO 9660 volume labelled cidata). The values go into YAML unescaped, so
 * they are checked to be plain: no quotes, newlines or other characters YAML would read otherwise.
 */
export function writeNoCloudSeed(path: string, seed: NoCloudSeed): void {
  if (!instanceIdPattern.test(seed.instanceId)) throw new Error('instanceId must be [A-Za-z0-9._-], 1-128');
  if (!hostnamePattern.test(seed.hostname)) throw new Error('hostname must be one DNS label');
  for (const key of seed.sshAuthorizedKeys) {
    if (!publicKeyPattern.test(key) || /["'#]/.test(key))
      throw new Error('not a one-line OpenSSH public key');
  }
  const dir = mkdtempSync(join(tmpdir(), 'bc-seed-'));
  try {
    const keys = seed.sshAuthorizedKeys.map((key) => `  - ${key}\n`).join('');
    writeFileSync(
      join(dir, 'meta-data'),
      `instance-id: ${seed.instanceId}\nlocal-hostname: ${seed.hostname}\npublic-keys:\n${keys}`,
    );
    writeFileSync(join(dir, 'user-data'), seed.userData ?? '#cloud-config\n', { mode: 0o600 });
    run('genisoimage', [
      '-quiet',
      '-output',
      path,
      '-volid',
      'cidata',
      '-joliet',
      '-rock',
      join(dir, 'user-data'),
      join(dir, 'meta-data'),
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The last `capacity` bytes of a stream (a guest's serial console), with waiting for a line. */
export class SerialRing {
  private text = '';
  private waiters: Array<{ pattern: RegExp; resolve: (match: RegExpMatchArray) => void }> = [];
  constructor(readonly capacity = 64 * 1024) {}

  push(chunk: string): void {
    const combined = this.text + chunk;
    for (const waiter of [...this.waiters]) {
      const match = combined.match(waiter.pattern);
      if (match) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve(match);
      }
    }
    this.text = combined.length > this.capacity ? combined.slice(-this.capacity) : combined;
  }

  contents(): string {
    return this.text;
  }

  waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    const found = this.text.match(pattern);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((waiter) => waiter.resolve !== settle);
        reject(
          new Error(
            `no ${pattern} on the serial console within ${timeoutMs} ms; last output:\n${this.text.slice(-2000)}`,
          ),
        );
      }, timeoutMs);
      const settle = (match: RegExpMatchArray) => {
        clearTimeout(timer);
        resolve(match);
      };
      this.waiters.push({ pattern, resolve: settle });
    });
  }
}

/** A QMP connection: one command at a time, events set aside. */
export class QmpClient {
  private buffer = '';
  private pending: Array<(message: Record<string, unknown>) => void> = [];
  readonly events: Array<Record<string, unknown>> = [];

  private constructor(private readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      let newline: number;
      while ((newline = this.buffer.indexOf('\n')) >= 0) {
        const line = this.buffer.slice(0, newline).trim();
        this.buffer = this.buffer.slice(newline + 1);
        if (!line) continue;
        const message = JSON.parse(line) as Record<string, unknown>;
        if ('event' in message) this.events.push(message);
        else this.pending.shift()?.(message);
      }
    });
    socket.on('error', () => undefined);
  }

  static async connect(path: string): Promise<QmpClient> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect(path, () => resolve(s));
      s.once('error', reject);
    });
    const client = new QmpClient(socket);
    await new Promise<void>((resolve) => client.pending.push(() => resolve())); // the greeting
    await client.execute('qmp_capabilities');
    return client;
  }

  execute(command: string, args?: Record<string, unknown>): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.pending.push((message) => {
        if ('error' in message) reject(new Error(`QMP ${command}: ${JSON.stringify(message.error)}`));
        else resolve(message.return);
      });
      this.socket.write(JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}) }) + '\n');
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A free TCP port on loopback (for the SSH host forward). */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('no loopback port');
  return address.port;
}

export interface SshKey {
  privateKeyPath: string;
  publicKey: string;
}

/** A fresh ed25519 key pair in `dir`, made by ssh-keygen. */
export function generateSshKey(dir: string): SshKey {
  const privateKeyPath = join(dir, 'id_ed25519');
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'better-compute-test', '-f', privateKeyPath]);
  return { privateKeyPath, publicKey: readFileSync(`${privateKeyPath}.pub`, 'utf8').trim() };
}

/**
 * The `images.register` input for the guest image, its files named by path with their digests and
 * sizes from the build's manifest (what a node's image cache verifies).
 */
export function guestImageRegistration(guest: GuestImage, name = 'guest') {
  const file = (part: string) => {
    const entry = guest.manifest.files[part] as { sha256: string; size: number };
    return { source: join(guest.dir, part), sha256: entry.sha256, sizeBytes: entry.size };
  };
  const disk = file('rootfs.qcow2');
  return {
    name,
    ...disk,
    diskFormat: 'qcow2' as const,
    os: 'debian',
    boot: { kernel: file('vmlinux'), initrd: file('initrd.img'), cmdline: guest.kernelCmdline },
  };
}

/** The guest image as a runtime command carries it (what a node's runtime is handed). */
export function guestRuntimeImage(guest: GuestImage, imageId = 'img_guest') {
  const { sha256, sizeBytes, source, boot } = guestImageRegistration(guest);
  return { imageId, diskFormat: 'qcow2' as const, disk: { source, sha256, sizeBytes }, boot };
}

/**
 * Kills the QEMU of an instance a node's state directory holds, if it runs, and removes its network
 * namespace, veth and egress rule: no VM, and nothing of its network, outlives a suite (a daemon
 * killed first would leave them).
 */
export function killInstanceVm(stateDir: string, instanceId: string): void {
  const dir = instanceId ? join(stateDir, 'instances', instanceId) : '';
  if (!dir || !existsSync(dir)) return;
  try {
    process.kill(Number(readFileSync(join(dir, 'qemu.pid'), 'utf8').trim()), 'SIGKILL');
  } catch {
    // Not running, or already gone.
  }
  let net: { name?: string; address?: string } | undefined;
  try {
    net = JSON.parse(readFileSync(join(dir, 'spec.json'), 'utf8')).network;
  } catch {
    return;
  }
  if (!net?.name || !/^bci-[0-9a-f]{10}$/.test(net.name)) return;
  spawnSync('ip', ['netns', 'delete', net.name], { stdio: 'ignore' });
  spawnSync('ip', ['link', 'delete', net.name], { stdio: 'ignore' });
  if (net.address && /^[\d.]{7,15}$/.test(net.address))
    spawnSync('nft', ['delete', 'element', 'ip', 'better_compute', 'egress', `{ ${net.address} }`], {
      stdio: 'ignore',
    });
}

/**
 * Runs a command in a guest over SSH with the real client, on a loopback port (the guest's own or
 * one forwarded to it) or, with `host`, at an instance's private address; `knownHosts` pins the
 * guest's key, otherwise any key is taken for the call.
 */
export function sshGuest(
  port: number,
  key: SshKey,
  user: string,
  command: string,
  options: { knownHosts?: string; timeoutMs?: number; host?: string } = {},
): Promise<SshResult> {
  const args = [
    '-F', 'none',
    '-i', key.privateKeyPath,
    '-p', String(port),
    '-o', 'IdentitiesOnly=yes',
    '-o', 'BatchMode=yes',
    '-o', `StrictHostKeyChecking=${options.knownHosts ? 'accept-new' : 'no'}`,
    '-o', `UserKnownHostsFile=${options.knownHosts ?? '/dev/null'}`,
    '-o', 'ConnectTimeout=20',
    '-o', 'LogLevel=ERROR',
    `${user}@${options.host ?? '127.0.0.1'}`,
    command,
  ]; // prettier-ignore
  return new Promise((resolve) => {
    const child = spawn('ssh', args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * A small HTTP/1.1 server for the guest, in the Perl every Debian system has (perl-base): `GET
 * /bytes/N` answers N bytes, a `POST` answers how many bytes it read, anything else the host name.
 * Keep-alive (a request's `Connection: close` is answered with one, then the connection closes), one
 * connection at a time; connections beyond it wait in a deep accept queue.
 */
const GUEST_HTTP_SERVER = String.raw`
use strict; use warnings; use IO::Socket::INET;
my $server = IO::Socket::INET->new(LocalAddr => '0.0.0.0', LocalPort => $ARGV[0], Listen => 1024, ReuseAddr => 1)
  or die "listen: $!";
$SIG{PIPE} = 'IGNORE';
my $chunk = 'x' x 65536;
while (my $c = $server->accept) {
  binmode $c;
  while (1) {
    my $head = '';
    while (defined(my $line = <$c>)) { $head .= $line; last if $line =~ /^\r?\n$/; }
    last unless $head =~ m{^(GET|POST) (\S+)};
    my ($method, $path) = ($1, $2);
    my ($length) = $head =~ /^Content-Length:\s*(\d+)/mi;
    my ($got, $buf) = (0, '');
    while ($got < ($length // 0)) {
      my $n = read($c, $buf, $length - $got > 65536 ? 65536 : $length - $got) or last;
      $got += $n;
    }
    my $close = $head =~ /^Connection:\s*close/mi ? "Connection: close\r\n" : '';
    if ($path =~ m{^/bytes/(\d+)$}) {
      my $left = $1;
      print $c "HTTP/1.1 200 OK\r\nContent-Length: $left\r\nContent-Type: application/octet-stream\r\n$close\r\n";
      while ($left > 0) { my $n = $left > 65536 ? 65536 : $left; print $c substr($chunk, 0, $n); $left -= $n; }
    } else {
      my $body = $method eq 'POST' ? "$got\n" : 'hello from ' . qx(hostname);
      print $c "HTTP/1.1 200 OK\r\nContent-Length: " . length($body) . "\r\nContent-Type: text/plain\r\n$close\r\n$body";
    }
    last if $close;
  }
  close $c;
}
`;

/** The shell command that starts GUEST_HTTP_SERVER on `port` in the background and returns. */
export function guestHttpServerCommand(port: number): string {
  const script = Buffer.from(GUEST_HTTP_SERVER).toString('base64');
  return (
    `echo ${script} | base64 -d > /tmp/http-server.pl && ` +
    `setsid -f perl /tmp/http-server.pl ${port} </dev/null >/tmp/http-server.log 2>&1 && ` +
    `for i in $(seq 50); do grep -qi ':${port.toString(16).toUpperCase().padStart(4, '0')} .* 0A ' /proc/net/tcp && exit 0; sleep 0.2; done; ` +
    `cat /tmp/http-server.log; exit 1`
  );
}

export interface GuestOptions {
  image: GuestImage;
  seed: NoCloudSeed;
  /** Where the overlay, seed, QMP socket and known_hosts live; removed by stop(). */
  workDir?: string;
  memoryMiB?: number;
  cpus?: number;
  serialCapacity?: number;
}

export interface SshResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export class Guest {
  readonly serial: SerialRing;
  exitCode: number | null | undefined = undefined;
  private readonly exited: Promise<number | null>;

  private constructor(
    readonly process: ChildProcess,
    readonly accel: 'kvm' | 'tcg',
    readonly sshPort: number,
    readonly workDir: string,
    readonly qmpPath: string,
    readonly startedAt: number,
    serialCapacity: number,
  ) {
    this.serial = new SerialRing(serialCapacity);
    process.stdout!.setEncoding('utf8').on('data', (chunk: string) => this.serial.push(chunk));
    let stderr = '';
    process
      .stderr!.setEncoding('utf8')
      .on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    this.exited = new Promise((resolve) =>
      process.on('exit', (code) => {
        this.exitCode = code;
        if (code !== 0 && stderr) this.serial.push(`\n[qemu stderr] ${stderr}`);
        resolve(code);
      }),
    );
  }

  /** Boots an instance: an overlay over the image, a seed, and QEMU with QMP and a serial console. */
  static async start(options: GuestOptions): Promise<Guest> {
    const workDir = options.workDir ?? mkdtempSync(join(tmpdir(), 'bc-guest-'));
    mkdirSync(workDir, { recursive: true });
    const overlay = join(workDir, 'disk.qcow2');
    const seedPath = join(workDir, 'seed.iso');
    const qmpPath = join(workDir, 'qmp.sock');
    createOverlay(options.image.rootfs, overlay);
    writeNoCloudSeed(seedPath, options.seed);
    // KVM only where the runtime itself would use it (its probe boots this kernel).
    const accel = await accelerator(options.image.vmlinux);
    const sshPort = await freeLoopbackPort();
    const args = [
      '-machine', `q35,accel=${accel}`,
      '-cpu', accel === 'kvm' ? 'host' : 'max',
      '-smp', String(options.cpus ?? 1),
      '-m', String(options.memoryMiB ?? 512),
      '-nodefaults', '-no-user-config', '-display', 'none',
      '-kernel', options.image.vmlinux,
      '-initrd', options.image.initrd,
      '-append', options.image.kernelCmdline,
      '-device', 'vmgenid',
      '-drive', `file=${overlay},if=none,id=root,format=qcow2,discard=unmap`,
      '-device', 'virtio-blk-pci,drive=root',
      '-drive', `file=${seedPath},if=none,id=seed,format=raw,readonly=on`,
      '-device', 'virtio-blk-pci,drive=seed',
      '-netdev', `user,id=net0,hostfwd=tcp:127.0.0.1:${sshPort}-:22`,
      '-device', 'virtio-net-pci,netdev=net0',
      '-device', 'virtio-rng-pci',
      '-chardev', 'stdio,id=console,signal=off',
      '-serial', 'chardev:console',
      '-qmp', `unix:${qmpPath},server=on,wait=off`,
    ]; // prettier-ignore
    const child = spawn('qemu-system-x86_64', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    return new Guest(
      child,
      accel,
      sshPort,
      workDir,
      qmpPath,
      Date.now(),
      options.serialCapacity ?? 64 * 1024,
    );
  }

  /** Waits for the whole ready line (printed once SSH is up; it may arrive in pieces) and returns its fields. */
  async waitForReady(timeoutMs: number): Promise<Record<string, string>> {
    const exit = this.exited.then((code) => {
      throw new Error(
        `qemu exited with ${code} before the guest was ready:\n${this.serial.contents().slice(-2000)}`,
      );
    });
    const match = await Promise.race([
      this.serial.waitFor(/better-compute-guest: ready ([^\r\n]*)\r?\n/, timeoutMs),
      exit,
    ]);
    return Object.fromEntries(match[1]!.split(' ').map((pair) => pair.split('=', 2) as [string, string]));
  }

  /** Runs a command in the guest over SSH with the real client and a known_hosts of this guest's own. */
  ssh(key: SshKey, user: string, command: string, timeoutMs = 60_000): Promise<SshResult> {
    return sshGuest(this.sshPort, key, user, command, {
      knownHosts: join(this.workDir, 'known_hosts'),
      timeoutMs,
    });
  }

  /** Waits until an SSH login as `user` runs `true`. */
  async waitForSsh(key: SshKey, user: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: SshResult | undefined;
    while (Date.now() < deadline) {
      if (this.exitCode !== undefined) throw new Error(`qemu exited with ${this.exitCode}`);
      last = await this.ssh(key, user, 'true', Math.max(1000, Math.min(30_000, deadline - Date.now())));
      if (last.code === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    throw new Error(`SSH did not answer within ${timeoutMs} ms: ${last?.stderr ?? ''}`);
  }

  qmp(): Promise<QmpClient> {
    return QmpClient.connect(this.qmpPath);
  }

  /**
   * Powers the guest off: the ACPI power button first, then QMP quit, then SIGKILL. Returns how it
   * ended and the process's exit code.
   */
  async stop(gracefulMs = 30_000): Promise<{ how: 'powerdown' | 'quit' | 'kill'; code: number | null }> {
    const waitExit = (ms: number) =>
      Promise.race([
        this.exited.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), ms)),
      ]);
    try {
      if (this.exitCode !== undefined) return { how: 'powerdown', code: this.exitCode };
      let qmp: QmpClient | undefined;
      try {
        qmp = await this.qmp();
        await qmp.execute('system_powerdown');
        if (await waitExit(gracefulMs)) return { how: 'powerdown', code: this.exitCode ?? null };
        await qmp.execute('quit').catch(() => undefined);
        if (await waitExit(10_000)) return { how: 'quit', code: this.exitCode ?? null };
      } finally {
        qmp?.close();
      }
      this.process.kill('SIGKILL');
      await this.exited;
      return { how: 'kill', code: this.exitCode ?? null };
    } finally {
      rmSync(this.workDir, { recursive: true, force: true });
    }
  }
}
