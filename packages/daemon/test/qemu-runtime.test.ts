/**
 * The qemu runtime on a real `bcd`, a real `better-compute serve` on PostgreSQL and a real guest
 * under QEMU (TCG here): image.fetch into the cache (a wrong digest refused and discarded),
 * instance.create (retry-safe), start until the guest is ready and an SSH login with the seed's key
 * answers the seed's host name, the daemon killed and restarted while the guest runs (the guest
 * survives; dial and console reach it), stop by ACPI, resize, start again, a forced stop, delete.
 * The guest's network: its own namespace and private address, which SSH and dial reach through the
 * node's route; with egress it reaches a host beyond the node, without it not; never the node's own
 * addresses; its namespace, veth and route go with stop and delete.
 * The node's state directory is 150 characters long, as a deep checkout's is: the VM's sockets are
 * in the daemon's short runtime directory, and nothing of a VM is left there once it stops.
 * One guest boot is shared by the suite, twice started.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@better-compute/core';
import type { RuntimeImage } from '@better-compute/core/runtime-commands';
import { generatedCommandSigner } from '../../better-compute/src/gateway/signer.js';
import {
  ensureGuestImage,
  generateSshKey,
  guestHttpServerCommand,
  type GuestImage,
  guestRuntimeImage,
  type SshKey,
} from '../../better-compute/test/guest-support.js';
import {
  guestConnects,
  nodeAddresses,
  nodeListener,
  type Outside,
  outsideHost,
} from '../../better-compute/test/instance-network-support.js';
import { cgroupDirs } from '../src/runtimes/cgroups.js';
import { QemuDriver } from '../src/runtimes/index.js';
import { accelerator, qemuOverheadMiB } from '../src/runtimes/qemu-process.js';
import { runtimeDirFor, shortName } from '../src/runtimes/runtime-dir.js';
import { DEFAULT_INSTANCE_RANGE, networkOf } from '../src/runtimes/vm-network.js';
import {
  bcd,
  type Deployment,
  deployment,
  freePort,
  type Proc,
  startServer,
  until,
} from './daemon-support.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-qemu-'));
/** 150 characters: a socket path under it would not fit a unix socket address (107 bytes). */
const stateDir = `${join(scratch, 'state')}-${'x'.repeat(150 - join(scratch, 'state').length - 1)}`;
const runtimeDir = runtimeDirFor(stateDir);
const keyFile = join(scratch, 'command-root.pem');
const GiB = 1024 ** 3;
let env: Deployment;
let server: Proc | undefined;
let daemon: Proc | undefined;
let nodeId: string;
let tenantId: string;
let guest: GuestImage;
let key: SshKey;
let image: RuntimeImage;
/** The instance's network as its spec.json records it. */
let net: { name: string; address: string; hostAddress: string; slot: number };
let outside: Outside;
let listener: Awaited<ReturnType<typeof nodeListener>>;

const instanceId = 'inst_qemutest1';
const hostname = 'qemu-test-guest';
const shape = { vcpus: 1, memoryMiB: 512, diskGiB: 2, gpus: [] };
// Runs as root on the first boot, before SSH: leaves a mark, and lets the test write to the console.
const userData = '#!/bin/sh\necho ran > /var/tmp/user-data-ran\nchmod 0666 /dev/ttyS0\n';
const instanceDir = join(stateDir, 'instances', instanceId);
// The daemon trusts the test's https server through its certificate, as a node trusts a mirror's CA.
const runDaemon = () =>
  bcd(['run', '--state-dir', stateDir, '--scripts-dir', scratch], {
    NODE_EXTRA_CA_CERTS: join(scratch, 'mirror.crt'),
  });
let mirror: Server;
let mirrorUrl: string;
const mirrorBlob = randomBytes(64 * 1024);
const createPayload = () => ({ instanceId, hostname, image, shape, sshKeys: [key.publicKey], userData });
const startPayload = () => ({ instanceId, image, shape, readyTimeoutMs: 240_000 });

/** Queues a command row as the control plane's workflows do; the gateway signs and delivers it. */
async function queue(kind: string, payload: Record<string, unknown>): Promise<string> {
  const id = newId('command');
  const now = new Date();
  await sql`insert into compute.commands (id, tenant_id, node_id, kind, payload, state, created_at, expires_at)
    values (${id}, ${tenantId}, ${nodeId}, ${kind}, ${JSON.stringify(payload)}::jsonb, 'queued', ${now},
            ${new Date(now.getTime() + 600_000)})`.execute(env.compute.database.db);
  return id;
}

async function run(kind: string, payload: Record<string, unknown>, timeoutMs = 60_000): Promise<any> {
  const id = await queue(kind, payload);
  return until(
    `${kind} to finish`,
    async () => {
      const command = await env.call<any>('commands.get', { commandId: id });
      return ['succeeded', 'failed', 'cancelled'].includes(command.state) ? command : undefined;
    },
    timeoutMs,
  );
}

function ssh(command: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const args = [
    '-F', 'none', '-i', key.privateKeyPath,
    '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=accept-new',
    '-o', `UserKnownHostsFile=${join(scratch, 'known_hosts')}`, '-o', 'ConnectTimeout=20', '-o', 'LogLevel=ERROR',
    `${guest.manifest.defaultUser}@${net.address}`, command,
  ]; // prettier-ignore
  return new Promise((resolve) => {
    const child = spawn('ssh', args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const qemuPid = () => Number(readFileSync(join(instanceDir, 'qemu.pid'), 'utf8').trim());
const alive = (pid: number) => {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return false;
  }
};
const rssKiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
/** Whether the instance's namespace, host veth and route exist. */
const networkUp = () => ({
  namespace: execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).includes(net.name),
  veth: existsSync(`/sys/class/net/${net.name}`),
  route: execFileSync('ip', ['-4', 'route'], { encoding: 'utf8' }).includes(` dev ${net.name}`),
});
/** Connections from the guest: to the outside host, and to a port the node listens on at its addresses. */
async function reaches(): Promise<{ outside: boolean; node: string[] }> {
  const nodeTargets = [outside.nodeAddress, net.hostAddress, ...nodeAddresses()].map(
    (address) => `${address}:${listener.port}`,
  );
  const probe = await ssh(guestConnects([`${outside.address}:${outside.port}`, ...nodeTargets]));
  expect(probe.code, probe.stderr).toBe(0);
  const lines = probe.stdout.trim().split('\n');
  return {
    outside: lines[0] === `${outside.address}:${outside.port} ok outside`,
    node: lines.slice(1).filter((line) => !line.endsWith(' failed')),
  };
}
const connected = () =>
  until(
    'the daemon’s session',
    async () => JSON.parse(readFileSync(join(stateDir, 'status.json'), 'utf8')).connected === true,
  );

beforeAll(async () => {
  // The instance id is fixed, so a run of this suite killed mid-way left its network up under the
  // same names; nothing else on the machine uses them, so they are removed before the suite begins.
  const leftover = networkOf(instanceId, DEFAULT_INSTANCE_RANGE, 0).name;
  for (const args of [
    ['netns', 'del', leftover],
    ['link', 'del', leftover],
  ])
    spawnSync('ip', args, { stdio: 'ignore' }); // absent is the usual case
  guest = await ensureGuestImage();
  image = guestRuntimeImage(guest);
  key = generateSshKey(scratch);
  // An https image mirror on loopback with a certificate of its own.
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
    '-keyout', join(scratch, 'mirror.key'), '-out', join(scratch, 'mirror.crt'),
  ], { stdio: 'ignore' }); // prettier-ignore
  mirror = createServer(
    { key: readFileSync(join(scratch, 'mirror.key')), cert: readFileSync(join(scratch, 'mirror.crt')) },
    (request, response) => {
      const port = (mirror.address() as { port: number }).port;
      if (request.url === '/blob') response.writeHead(200).end(mirrorBlob);
      else if (request.url === '/moved') response.writeHead(302, { location: '/blob' }).end();
      else if (request.url === '/insecure')
        response.writeHead(302, { location: `http://127.0.0.1:${port}/blob` }).end();
      else response.writeHead(404).end();
    },
  );
  await new Promise<void>((resolve) => mirror.listen(0, '127.0.0.1', resolve));
  mirrorUrl = `https://127.0.0.1:${(mirror.address() as { port: number }).port}`;
  env = await deployment();
  const port = await freePort();
  writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
  server = await startServer(env.database.url!, port, keyFile);
  const site = await env.call('sites.create', { name: 'vms' });
  const pool = await env.call('pools.create', { siteId: site.id, name: 'vps' });
  const token = await env.call('joinTokens.create', { poolId: pool.id });
  writeFileSync(join(scratch, 'join-token'), token.token, { mode: 0o600 });
  const joining = bcd([
    'join', '--url', `http://127.0.0.1:${port}`, '--token-file', join(scratch, 'join-token'),
    '--state-dir', stateDir,
  ]); // prettier-ignore
  const request = await until('the join request', async () => {
    const listed = await env.call<any>('joinRequests.list', { state: 'pending' });
    return listed.items[0];
  });
  await env.call('joinRequests.approve', { joinRequestId: request.id });
  expect(await joining.exited).toBe(0);
  nodeId = JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')).nodeId;
  const node = await sql<{
    tenant_id: string;
  }>`select tenant_id from compute.nodes where id = ${nodeId}`.execute(env.compute.database.db);
  tenantId = node.rows[0]!.tenant_id;
  daemon = runDaemon();
  await connected();
  outside = await outsideHost();
  listener = await nodeListener();
}, 300_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  // Whatever a failed step left running is stopped: no VM outlives the suite.
  try {
    const pid = qemuPid();
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  } catch {
    /* no VM */
  }
  server?.child.kill('SIGKILL');
  mirror?.close();
  outside?.close();
  listener?.server.close();
  if (net && existsSync(`/run/netns/${net.name}`)) execFileSync('ip', ['netns', 'delete', net.name]);
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(runtimeDir, { recursive: true, force: true });
});

describe('the qemu runtime', () => {
  it('image.fetch copies each file into the cache under its digest, once', async () => {
    const first = await run('image.fetch', { image });
    expect(first.state, first.error).toBe('succeeded');
    const bytes = image.disk.sizeBytes + image.boot!.kernel.sizeBytes + image.boot!.initrd!.sizeBytes;
    expect(first.result).toEqual({ imageId: 'img_guest', cached: false, bytes, cacheBytes: bytes });
    expect(readdirSync(join(stateDir, 'images')).sort()).toEqual(
      [image.disk.sha256, image.boot!.kernel.sha256, image.boot!.initrd!.sha256].sort(),
    );
    const again = await run('image.fetch', { image });
    expect(again.result).toMatchObject({ cached: true, bytes, cacheBytes: bytes });
  }, 120_000);

  it('a file whose digest or size differs is refused with the reason and discarded', async () => {
    const blob = randomBytes(8192);
    writeFileSync(join(scratch, 'blob'), blob);
    const claimed = createHash('sha256').update('another file').digest('hex');
    const wrongDigest = { ...image, imageId: 'img_bad', disk: { source: join(scratch, 'blob'), sha256: claimed, sizeBytes: 8192 } }; // prettier-ignore
    const refused = await run('image.fetch', { image: wrongDigest });
    expect(refused.state).toBe('failed');
    expect(refused.error).toContain(`has SHA-256 ${createHash('sha256').update(blob).digest('hex')}`);
    expect(refused.error).toContain('discarded');
    const tooBig = await run('image.fetch', { image: { ...wrongDigest, disk: { ...wrongDigest.disk, sizeBytes: 4096 } } }); // prettier-ignore
    expect(tooBig.error).toContain('larger than the 4096 bytes expected');
    const missing = await run('image.fetch', { image: { ...wrongDigest, disk: { ...wrongDigest.disk, source: '/nonexistent/disk' } } }); // prettier-ignore
    expect(missing.error).toContain('is not a file on this node');
    // Nothing of them is left in the cache, not even a partial file.
    expect(readdirSync(join(stateDir, 'images')).sort()).toHaveLength(3);
  }, 120_000);

  it('downloads an https file, following a redirect; a redirect to http and a 404 are refused', async () => {
    const sha256 = createHash('sha256').update(mirrorBlob).digest('hex');
    const disk = { source: `${mirrorUrl}/moved`, sha256, sizeBytes: mirrorBlob.length };
    const fetched = await run('image.fetch', { image: { ...image, imageId: 'img_mirror', disk } });
    expect(fetched.state, fetched.error).toBe('succeeded');
    expect(readFileSync(join(stateDir, 'images', sha256))).toEqual(mirrorBlob);
    const other = createHash('sha256').update('other').digest('hex');
    const insecure = await run('image.fetch', {
      image: { ...image, disk: { ...disk, sha256: other, source: `${mirrorUrl}/insecure` } },
    });
    expect(insecure.error).toContain('redirects away from https');
    const missing = await run('image.fetch', {
      image: { ...image, disk: { ...disk, sha256: other, source: `${mirrorUrl}/nothing` } },
    });
    expect(missing.error).toContain('answered HTTP 404');
    expect(existsSync(join(stateDir, 'images', other))).toBe(false);
    rmSync(join(stateDir, 'images', sha256), { force: true });
  }, 120_000);

  it('refuses a malformed payload and commands for an instance it does not have', async () => {
    const malformed = await run('instance.start', {
      instanceId: '../../etc',
      image,
      shape,
      readyTimeoutMs: 5000,
    });
    expect(malformed.state).toBe('failed');
    expect(malformed.error).toMatch(/^the instance.start payload is invalid: instanceId/);
    const unknown = await run('instance.stop', { instanceId: 'inst_nothere', timeoutMs: 1000 });
    expect(unknown.error).toBe('instance inst_nothere does not exist on this node; create it first');
    const badKey = await run('instance.create', { ...createPayload(), instanceId: 'inst_badkey', sshKeys: ['ssh-ed25519 AAAA\nrunhcmd: [x]'] }); // prettier-ignore
    expect(badKey.error).toContain('SSH key 1 is not a one-line OpenSSH public key');
    expect(existsSync(join(stateDir, 'instances', 'inst_badkey'))).toBe(false);
  }, 120_000);

  it('instance.create makes the overlay and the seed; a retry with the same payload succeeds, a different one is refused', async () => {
    const created = await run('instance.create', createPayload());
    expect(created.state, created.error).toBe('succeeded');
    expect(created.result).toEqual({ instanceId, diskBytes: 2 * GiB });
    expect(readdirSync(instanceDir).sort()).toEqual(['disk.qcow2', 'seed.iso', 'spec.json']);
    // Its network is allocated with it: a /29 of the node's range, names from the instance id.
    net = JSON.parse(readFileSync(join(instanceDir, 'spec.json'), 'utf8')).network;
    expect(net).toMatchObject({
      name: expect.stringMatching(/^bci-[0-9a-f]{10}$/),
      address: expect.stringMatching(/^10\.213\.\d+\.\d+$/),
    });
    expect(networkUp()).toEqual({ namespace: false, veth: false, route: false });
    const retried = await run('instance.create', createPayload());
    expect(retried.result).toEqual({ instanceId, diskBytes: 2 * GiB });
    const other = await run('instance.create', { ...createPayload(), hostname: 'another-name' });
    expect(other.error).toContain('exists on this node with a different definition');
  }, 120_000);

  let bootMs = 0;
  let daemonPid = 0;
  it('instance.start boots the guest until it is ready; SSH with the seed’s key answers the seed’s host name', async () => {
    daemonPid = daemon!.child.pid!;
    const before = rssKiB(daemonPid);
    const started = await run('instance.start', startPayload(), 300_000);
    expect(started.state, started.error).toBe('succeeded');
    // The guest reports the private address its seed gave it; there is no forwarded loopback port.
    expect(started.result).toMatchObject({ instanceId, address: `${net.address}/30`, sshPort: null });
    expect(networkUp()).toEqual({ namespace: true, veth: true, route: true });
    // From a 150-character state directory: its sockets are in the short runtime directory.
    expect(stateDir).toHaveLength(150);
    expect(readdirSync(join(runtimeDir, shortName(instanceId))).sort()).toEqual(['console.sock', 'qmp.sock']);
    expect(readdirSync(instanceDir).filter((name) => name.endsWith('.sock'))).toEqual([]);
    bootMs = started.result.bootMs;
    const login = await ssh('hostname; cat /var/tmp/user-data-ran');
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout.split('\n')).toEqual([hostname, 'ran', '']);
    // Egress on (the default): the guest reaches a host beyond the node, which sees the node's
    // address (NAT); the node's own addresses refuse it all the same.
    const reached = await reaches();
    expect(reached).toEqual({ outside: true, node: [] });
    expect(outside.peers).toEqual([outside.nodeAddress]);
    expect(listener.peers).toEqual([]);
    // A server in the guest, for dial to reach on another port than SSH.
    const http = await ssh(guestHttpServerCommand(8080));
    expect(http.code, http.stdout + http.stderr).toBe(0);
    const after = rssKiB(daemonPid);
    console.log(
      `qemu runtime: boot to ready ${bootMs} ms (TCG); bcd RSS ${before} KiB before, ${after} KiB with the VM`,
    );
    // A retried start finds the VM running and answers as the first did.
    const retried = await run('instance.start', startPayload());
    expect(retried.result).toEqual(started.result);
    // As root, QEMU runs in the instance's cgroup: its vCPUs and half a core, its memory and QEMU's.
    if (process.getuid?.() === 0) {
      const dirs = cgroupDirs('bcd-instances', instanceId);
      for (const dir of dirs)
        expect(readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')).toContain(String(qemuPid()));
      const accel = await accelerator(guest.vmlinux);
      const memoryLimit = dirs.some((dir) => existsSync(join(dir, 'memory.max')))
        ? readFileSync(join(dirs[0]!, 'memory.max'), 'utf8')
        : readFileSync(join(dirs[1]!, 'memory.limit_in_bytes'), 'utf8');
      expect(Number(memoryLimit)).toBe((shape.memoryMiB + qemuOverheadMiB(accel)) * 1024 * 1024);
    }
  }, 320_000);

  it('a killed bcd leaves the guest running; dial and the console reach it, and a restarted bcd stops it by ACPI', async () => {
    const pid = qemuPid();
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    expect(alive(pid)).toBe(true);
    // The driver finds the VM again from its pidfile and sockets, as a restarted daemon does.
    const driver = new QemuDriver(stateDir);
    expect(await driver.adopt()).toEqual([instanceId]);
    const ssh22 = await driver.dial(instanceId, 22);
    const banner = await new Promise<string>((resolve) =>
      ssh22.once('data', (chunk: Buffer) => resolve(chunk.toString())),
    );
    expect(banner).toMatch(/^SSH-2\.0-OpenSSH/);
    ssh22.destroy();
    const web = await driver.dial(instanceId, 8080);
    web.write('GET / HTTP/1.0\r\nConnection: close\r\n\r\n');
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      web.on('data', (chunk: Buffer) => (text += chunk.toString()));
      web.on('close', () => resolve(text));
    });
    expect(answer).toMatch(/^HTTP\/1\.[01] 200/);
    // The namespace and route outlived the daemon, and its egress is in the rules again.
    expect(networkUp()).toEqual({ namespace: true, veth: true, route: true });
    expect(
      execFileSync('nft', ['list', 'set', 'ip', 'better_compute', 'egress'], { encoding: 'utf8' }),
    ).toContain(net.address);
    const serial = await driver.openConsole(instanceId);
    let seen = '';
    serial.on('data', (chunk: Buffer) => (seen += chunk.toString('latin1')));
    // Both ways: Enter on the serial port draws a login prompt from the guest's getty (the ring of
    // a daemon that found the VM again starts empty, so the boot's own prompt may not be in it).
    const prompts = () => seen.split(`${hostname} login:`).length - 1;
    const before = prompts();
    serial.write('\r');
    await until('another login prompt', async () => prompts() > before);
    serial.destroy();
    driver.close();
    daemon = runDaemon();
    await connected();
    expect(alive(pid)).toBe(true);
    const stopped = await run('instance.stop', { instanceId, timeoutMs: 60_000 }, 90_000);
    expect(stopped.state, stopped.error).toBe('succeeded');
    expect(stopped.result).toEqual({ instanceId, forced: false });
    expect(alive(pid)).toBe(false);
    expect(networkUp()).toEqual({ namespace: false, veth: false, route: false });
    expect(existsSync(join(runtimeDir, shortName(instanceId)))).toBe(false);
    const again = await run('instance.stop', { instanceId, timeoutMs: 60_000 });
    expect(again.result).toEqual({ instanceId, forced: false });
  }, 120_000);

  it('instance.resize grows a stopped disk and refuses to shrink it', async () => {
    const grown = await run('instance.resize', { instanceId, diskGiB: 3 });
    expect(grown.state, grown.error).toBe('succeeded');
    expect(grown.result).toEqual({ instanceId, diskGiB: 3 });
    const shrunk = await run('instance.resize', { instanceId, diskGiB: 2 });
    expect(shrunk.error).toBe('the disk is 3 GiB; it only grows, so 2 GiB is refused');
  }, 120_000);

  it('starts again with the grown disk, without egress; resize is refused while it runs; a stop past its timeout is forced; delete stops a running VM and removes it', async () => {
    const started = await run(
      'instance.start',
      { ...startPayload(), shape: { ...shape, diskGiB: 3 }, egress: false },
      300_000,
    );
    expect(started.state, started.error).toBe('succeeded');
    expect(started.result.address).toBe(`${net.address}/30`);
    const size = await ssh('cat /sys/block/vda/size; hostname');
    expect(size.stdout.split('\n')).toEqual([String((3 * GiB) / 512), hostname, '']);
    // Without egress the node still reaches the guest (SSH above), but the guest reaches nothing:
    // neither the host beyond the node nor the node itself.
    const peersBefore = outside.peers.length;
    expect(await reaches()).toEqual({ outside: false, node: [] });
    expect(outside.peers).toHaveLength(peersBefore);
    expect(listener.peers).toEqual([]);
    const running = await run('instance.resize', { instanceId, diskGiB: 4 });
    expect(running.error).toBe(`instance ${instanceId} is running; stop it before resizing its disk`);
    const pid = qemuPid();
    const forced = await run('instance.stop', { instanceId, timeoutMs: 0 });
    expect(forced.result).toEqual({ instanceId, forced: true });
    expect(alive(pid)).toBe(false);
    // A start cancelled while the guest boots stops the VM it launched.
    const cancelled = await queue('instance.start', { ...startPayload(), shape: { ...shape, diskGiB: 3 } });
    await until('the start to run', async () => {
      const command = await env.call<any>('commands.get', { commandId: cancelled });
      return command.state === 'running' && existsSync(join(instanceDir, 'qemu.pid')) && alive(qemuPid());
    });
    const bootingPid = qemuPid();
    // Asked to stop as commands.cancel asks a running command (the flag the gateway delivers).
    await sql`update compute.commands set cancel_requested = true where id = ${cancelled}`.execute(
      env.compute.database.db,
    );
    const stoppedStart = await until(
      'the start to be cancelled',
      async () => {
        const command = await env.call<any>('commands.get', { commandId: cancelled });
        return ['succeeded', 'failed', 'cancelled'].includes(command.state) ? command : undefined;
      },
      60_000,
    );
    expect(stoppedStart, daemon!.err.slice(-20).join('\n')).toMatchObject({
      state: 'cancelled',
      error: 'cancelled while it ran',
    });
    expect(alive(bootingPid)).toBe(false);
    // Delete stops a running VM by force before it removes the disk.
    const third = await run(
      'instance.start',
      { ...startPayload(), shape: { ...shape, diskGiB: 3 } },
      300_000,
    );
    expect(third.state, third.error).toBe('succeeded');
    // Ready means this boot's ready line (not the last boot's): SSH answers at once.
    expect((await ssh('hostname')).stdout).toBe(`${hostname}\n`);
    expect(networkUp()).toEqual({ namespace: true, veth: true, route: true });
    const runningPid = qemuPid();
    const deleted = await run('instance.delete', { instanceId });
    expect(deleted.result).toEqual({ instanceId, removed: true });
    expect(alive(runningPid)).toBe(false);
    expect(existsSync(instanceDir)).toBe(false);
    expect(existsSync(join(runtimeDir, shortName(instanceId)))).toBe(false);
    for (const dir of cgroupDirs('bcd-instances', instanceId)) expect(existsSync(dir)).toBe(false);
    // Its namespace (with the tap), veth, route and egress went with it.
    expect(networkUp()).toEqual({ namespace: false, veth: false, route: false });
    expect(execFileSync('ip', ['link'], { encoding: 'utf8' })).not.toContain(net.name);
    expect(
      execFileSync('nft', ['list', 'set', 'ip', 'better_compute', 'egress'], { encoding: 'utf8' }),
    ).not.toContain(`${net.address} `);
    const again = await run('instance.delete', { instanceId });
    expect(again.result).toEqual({ instanceId, removed: false });
  }, 600_000);
});
