/**
 * The bwrap runtime on this machine, with real parts: bubblewrap over an overlay of the project's
 * guest image, the host's sshd in inetd mode as the way in, and the real OpenSSH client, which
 * reaches it through the driver's `dialSsh` exactly as a `sandbox-ssh` stream does (bridged here to
 * a loopback port, as `sandbox exec` bridges its tunnel). A certificate for one sandbox opens that
 * sandbox only; the remote command runs in the sandbox, never on the host; a volume's data outlives
 * its sandbox; a disk snapshot restores its files; delete leaves no mount and no process. Then the
 * same through the whole product: dev, its real node, the CLI and sandbox exec; and a template on the
 * node's qemu runtime, whose memory snapshot comes back with a process mid-flight and an identity of
 * its own (the runtime itself: qemu-sandbox.test.ts).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RuntimeImage, SandboxCommandPayload } from '@better-compute/core/runtime-commands';
import { ensureGuestImage, type GuestImage } from '../../better-compute/test/guest-support.js';
import { BwrapDriver, bwrapAvailable, ImageCache } from '../src/runtimes/index.js';
import { SandboxKeys } from './sandbox-support.js';
import { type DevServer, runCompute, startDev } from '../../../test/e2e/support.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-bwrap-'));
const stateDir = join(scratch, 'state');
let guest: GuestImage;
let image: RuntimeImage;
let driver: BwrapDriver;
const servers: Server[] = [];
const created: string[] = [];

const keys = new SandboxKeys(scratch);
const userCa = () => keys.userCa();
const userKey = (name: string, principal: string) => keys.userKey(name, principal);

function createSpec(sandboxId: string, extra: Partial<SandboxCommandPayload<'sandbox.create'>> = {}) {
  return {
    sandboxId,
    runtime: 'bwrap' as const,
    image,
    shape: { vcpus: 1, memoryMiB: 512, diskGiB: 2, gpus: [] },
    network: 'none' as const,
    volumes: [],
    userData: null,
    userCaPublicKey: userCa(),
    fromSnapshot: null,
    readyTimeoutMs: 30_000,
    env: [],
    ...extra,
  };
}

async function create(sandboxId: string, extra: Partial<SandboxCommandPayload<'sandbox.create'>> = {}) {
  created.push(sandboxId);
  const result = await driver.create(createSpec(sandboxId, extra));
  // The control plane certifies the host key with its sandbox CA; here, a test host CA.
  await driver.certify(sandboxId, keys.hostCertificate(sandboxId, result.hostPublicKey));
  return result;
}

const ssh = (sandboxId: string, key: string, command: string[]) =>
  keys.ssh((id) => driver.dialSsh(id), sandboxId, key, command);

const mounted = () => readFileSync('/proc/self/mountinfo', 'utf8');

describe.skipIf(!bwrapAvailable())('the bwrap runtime', () => {
  beforeAll(async () => {
    guest = await ensureGuestImage();
    const file = (name: string) => {
      const entry = guest.manifest.files[name] as { sha256: string; size: number };
      return { source: join(guest.dir, name), sha256: entry.sha256, sizeBytes: entry.size };
    };
    image = { imageId: 'img_bwraptest', diskFormat: 'qcow2', disk: file('rootfs.qcow2'), boot: null };
    driver = new BwrapDriver(stateDir, new ImageCache(join(stateDir, 'images')));
  }, 600_000);

  afterAll(async () => {
    for (const server of servers) server.close();
    for (const id of created) await driver?.delete(id).catch(() => {});
    await driver?.deleteVolume('vol_bwraptest').catch(() => {});
    // The image's root stays mounted for the node's next sandbox; a test's state goes with it.
    const root = join(stateDir, 'image-roots');
    for (const line of mounted().split('\n'))
      if (line.includes(root)) spawnSync('umount', ['-l', line.split(' ')[4]!]);
    rmSync(scratch, { recursive: true, force: true });
  });

  it('starts a sandbox in a fraction of a second; ssh with a certificate for it runs a command inside and brings its status back', async () => {
    const result = await create('sbx_bwrapone');
    expect(result.hostPublicKey).toMatch(/^ssh-ed25519 /);
    expect(result.identityRebound).toBe(true);
    const key = userKey('one', 'sbx_bwrapone');
    const login = await ssh('sbx_bwrapone', key, [
      'uname -a; hostname; id -u; pwd; echo hi >from-ssh; exit 7',
    ]);
    expect(login.status, login.stderr).toBe(7);
    expect(login.stdout).toContain('Linux');
    expect(login.stdout, login.stderr).toContain('\n/root\n');
    expect(login.stdout).toContain('sbx-bwrapone');
    // It starts in root's home, with nothing of the host's working directory about it.
    expect(login.stderr).not.toContain('getcwd');
    // The sandbox's root wrote into its own layer, not the image and not the host.
    expect(
      readFileSync(join(stateDir, 'sandboxes', 'sbx_bwrapone', 'upper', 'root', 'from-ssh'), 'utf8'),
    ).toBe('hi\n');
    expect(existsSync('/root/from-ssh')).toBe(false);
  }, 120_000);

  it('a certificate for another sandbox is refused, and -oProxyCommand after -- runs inside as text', async () => {
    const other = userKey('other', 'sbx_someoneelse');
    const refused = await ssh('sbx_bwrapone', other, ['true']);
    expect(refused.status).toBe(255);
    const marker = join(scratch, 'proxy-ran');
    const key = userKey('two', 'sbx_bwrapone');
    const login = await ssh('sbx_bwrapone', key, [`-oProxyCommand=touch ${marker}`]);
    // The guest's shell was given the text as a command: not found there, and nothing ran here.
    expect(login.status).toBe(127);
    expect(login.stderr).toContain('-oProxyCommand=touch: not found');
    expect(existsSync(marker)).toBe(false);
  }, 120_000);

  it("a volume's data outlives its sandbox; a disk snapshot brings back the sandbox's files", async () => {
    await driver.createVolume('vol_bwraptest', 1);
    await create('sbx_bwrapvol', {
      volumes: [{ volumeId: 'vol_bwraptest', path: '/data', readOnly: false }],
    });
    const key = userKey('vol', 'sbx_bwrapvol');
    const wrote = await ssh('sbx_bwrapvol', key, ['echo kept >/data/notes && echo mine >/root/file']);
    expect(wrote.status, wrote.stderr).toBe(0);
    const snapshot = await driver.snapshot('sbx_bwrapvol', 'snap_bwraptest', false);
    expect(snapshot.sizeBytes).toBeGreaterThan(0);
    await driver.delete('sbx_bwrapvol');
    await create('sbx_bwraprestore', {
      volumes: [{ volumeId: 'vol_bwraptest', path: '/data', readOnly: true }],
      fromSnapshot: { snapshotId: 'snap_bwraptest', memory: false },
    });
    const restoreKey = userKey('restore', 'sbx_bwraprestore');
    const read = await ssh('sbx_bwraprestore', restoreKey, ['cat /data/notes /root/file; touch /data/x']);
    expect(read.stdout, read.stderr).toBe('kept\nmine\n');
    expect(read.stderr).toContain('Read-only file system');
    await driver.delete('sbx_bwraprestore');
    const grown = await driver.resizeVolume('vol_bwraptest', 2);
    expect(grown.sizeBytes).toBe(2 * 1024 ** 3);
    const df = execFileSync(
      'df',
      ['-B1', '--output=size', join(stateDir, 'volumes', 'vol_bwraptest', 'mnt')],
      {
        encoding: 'utf8',
      },
    );
    expect(Number(df.trim().split('\n')[1])).toBeGreaterThan(1.5 * 1024 ** 3);
    expect(readFileSync(join(stateDir, 'volumes', 'vol_bwraptest', 'mnt', 'notes'), 'utf8')).toBe('kept\n');
    await expect(driver.resizeVolume('vol_bwraptest', 1)).rejects.toThrow(/never shrinks/);
  }, 120_000);

  it('egress reaches the node’s network through its own namespace; none reaches nothing', async () => {
    // A server on this machine's own address (not loopback, which an egress sandbox never reaches).
    const address = Object.values(networkInterfaces())
      .flat()
      .find((nic) => nic && nic.family === 'IPv4' && !nic.internal)?.address;
    if (!address) return;
    const server = createServer((socket) => socket.end('pong\n'));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    const port = (server.address() as { port: number }).port;
    const probe = `(exec 3<>/dev/tcp/${address}/${port} && cat <&3) || echo unreachable`;
    for (const network of ['egress', 'none'] as const) {
      const id = `sbx_bwrapnet${network}`;
      await create(id, { network });
      const login = await ssh(id, userKey(`net-${network}`, id), [`bash -c '${probe}'`]);
      expect(login.stdout.trim(), login.stderr).toBe(network === 'egress' ? 'pong' : 'unreachable');
    }
  }, 120_000);

  it('delete leaves no mount and no process, and a second delete finds nothing', async () => {
    await create('sbx_bwrapgone');
    const pid = JSON.parse(
      readFileSync(join(stateDir, 'sandboxes', 'sbx_bwrapgone', 'run.json'), 'utf8'),
    ).pid;
    expect((await driver.delete('sbx_bwrapgone')).removed).toBe(true);
    expect(mounted()).not.toContain('sbx_bwrapgone');
    expect(existsSync(`/proc/${pid}`)).toBe(false);
    expect((await driver.delete('sbx_bwrapgone')).removed).toBe(false);
  }, 120_000);
});

// The guide's Sandboxes example on `dev --node`: dev's real bcd on this machine runs acme's template
// `shell` on this runtime; the real CLI creates a sandbox (claiming the warm one), and `sandbox exec`
// runs the real OpenSSH client through a single-use tunnel to the host sshd that enters it. Last in
// this file, after the driver's own tests, so the two never share the machine's loop devices.
const devCwd = mkdtempSync(join(tmpdir(), 'bc-sandboxes-'));
let dev: DevServer;
let templateId: string;
let session: string;

async function cli(args: string[], token = session) {
  return runCompute(args, { cwd: devCwd, url: dev.url, token, timeoutMs: 90_000 });
}
async function json(args: string[], token = session) {
  const result = await cli([...args, '--format', 'json'], token);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

describe.skipIf(!bwrapAvailable())('sandboxes on dev’s real node', () => {
  beforeAll(async () => {
    const image = await ensureGuestImage();
    mkdirSync(join(devCwd, '.ssh'), { mode: 0o700 });
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(devCwd, '.ssh', 'id_ed25519')]);
    // dev registers the image the guest suites built (its cache, found through this variable) and
    // makes acme's template once the node says it runs bwrap.
    dev = await startDev(devCwd, ['--node'], {
      ready: /acme's sandbox template (sbxt_[0-9a-z]+)/,
      timeoutMs: 120_000,
      env: { BETTER_COMPUTE_GUEST_CACHE: dirname(image.dir) },
    });
    templateId = /acme's sandbox template (sbxt_[0-9a-z]+)/.exec(dev.server.output())![1]!;
    session = JSON.parse(readFileSync(join(devCwd, '.better-compute', 'dev-memory.json'), 'utf8')).acmeMember
      .sessionToken;
  }, 180_000);

  afterAll(async () => {
    await dev?.server.stop();
    rmSync(devCwd, { recursive: true, force: true });
  });

  it('create claims the warm sandbox; exec runs uname -a in it over OpenSSH and brings back its exit status', async () => {
    const templates = await json(['sandbox', 'templates']);
    expect(templates.items.map((t: { id: string }) => t.id)).toContain(templateId);
    // The warm pool has had time to fill while the node joined; a create takes that sandbox.
    let created;
    for (let attempt = 0; attempt < 60; attempt += 1) {
      created = await json(['sandbox', 'create', '--template', templateId, '--ttl', '30m', '--wait', '30']);
      if (created.warm || attempt === 59) break;
      await json(['sandbox', 'delete', created.id]);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    expect(created).toMatchObject({
      state: 'running',
      warm: true,
      hostCertified: true,
      identityRebound: true,
    });
    const uname = await cli(['sandbox', 'exec', created.id, '--', 'uname', '-a']);
    expect(uname.status, uname.stderr).toBe(0);
    expect(uname.stdout).toMatch(/^Linux sbx-/);
    const failed = await cli(['sandbox', 'exec', created.id, '--', 'sh', '-c', 'echo in-sandbox; exit 5']);
    expect(failed.status).toBe(5);
    expect(failed.stdout).toBe('in-sandbox\n');
    const marker = join(devCwd, 'proxy-command-ran');
    const proxy = await cli(['sandbox', 'exec', created.id, '--', `-oProxyCommand=touch ${marker}`]);
    expect(proxy.status).toBe(127);
    expect(proxy.stderr).toContain(`-oProxyCommand=touch ${marker}: not found`);
    expect(existsSync(marker)).toBe(false);
    // An API key is not a person's session.
    const byKey = await cli(['sandbox', 'exec', created.id, '--', 'true'], dev.dev.acmeMember.apiKey);
    expect(byKey.status).toBe(1);
    expect(byKey.stderr).toContain('ACCESS_DENIED');

    // A kept snapshot outlives its sandbox.
    await cli(['sandbox', 'exec', created.id, '--', 'sh', '-c', 'echo kept > /root/notes']);
    const snapshot = await json(['sandbox', 'snapshot', created.id, '--keep']);
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const shown = await json(['sandbox-snapshot', 'get', snapshot.id]);
      if (shown.state !== 'creating') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await json(['sandbox', 'delete', created.id]);
    // Its place on the node (two cores here: the warm one and this) is free once it is deleted.
    for (let attempt = 0; attempt < 150; attempt += 1) {
      if ((await json(['sandbox', 'get', created.id])).state === 'deleted') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const kept = await json(['sandbox-snapshot', 'get', snapshot.id]);
    expect(kept).toMatchObject({ state: 'ready', keep: true, memory: false });
    const restored = await json([
      'sandbox', 'create', '--template', templateId, '--from-snapshot', snapshot.id, '--wait', '30',
    ]); // prettier-ignore
    expect(restored.state).toBe('running');
    const read = await cli(['sandbox', 'exec', restored.id, '--', 'cat', '/root/notes']);
    expect(read.stdout, read.stderr).toBe('kept\n');
    await json(['sandbox', 'delete', restored.id]);
    for (let attempt = 0; attempt < 150; attempt += 1) {
      if ((await json(['sandbox', 'get', restored.id])).state === 'deleted') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }, 240_000);

  // Issue 41: the words after -- reach the sandbox whole, as kubectl exec and docker exec deliver them.
  it('exec keeps each argument whole: sh -c exits 7, printf gets its vector, --minutes 16 is refused', async () => {
    const created = await json(['sandbox', 'create', '--template', templateId, '--wait', '30']);
    expect(created.state).toBe('running');
    const exec = (...rest: string[]) => cli(['sandbox', 'exec', created.id, ...rest]);
    const seven = await exec('--', 'sh', '-c', 'exit 7');
    expect(seven.status, seven.stderr).toBe(7);
    const vector = await exec('--', 'printf', '<%s>', 'a b', '$HOME');
    expect(vector.status, vector.stderr).toBe(0);
    expect(vector.stdout).toBe('<a b><$HOME>');
    const odd = ['line 1\nline 2', "it's", '"double" \\back', '-n', '--', '', '$(id) `id` *', 'é 日本 🙂'];
    const whole = await exec('--minutes', '15', '--', 'printf', '[%s]', ...odd);
    expect(whole.status, whole.stderr).toBe(0);
    expect(whole.stdout).toBe(odd.map((word) => `[${word}]`).join(''));
    const dash = await exec('--', '-n', 'x');
    expect(dash.status).toBe(127);
    expect(dash.stderr).toContain('-n: not found');
    const tooLong = await exec('--minutes', '16', '--', 'true');
    expect(tooLong.status).toBe(2);
    expect(tooLong.stderr).toMatch(/^INVALID_ARGUMENT: --minutes must be at most 15 \(got 16\)/);
    await json(['sandbox', 'delete', created.id]);
    for (let attempt = 0; attempt < 150; attempt += 1) {
      if ((await json(['sandbox', 'get', created.id])).state === 'deleted') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }, 180_000);

  it('a qemu template: exec runs in its VM; a memory snapshot comes back with a process mid-flight, exec pinning the restore’s own host key', async () => {
    const shell = (await json(['sandbox', 'templates'])).items.find(
      (t: { id: string }) => t.id === templateId,
    );
    const admin = dev.dev.acmeAdmin.apiKey;
    const vm = await json(
      ['sandbox-template', 'create', '--name', 'vm', '--pool', shell.poolId, '--flavor', shell.flavorId,
        '--image', shell.imageId, '--runtime', 'qemu', '--network', 'none'],
      admin,
    ); // prettier-ignore
    const until = async (id: string, done: (s: { state: string }) => boolean) => {
      for (let attempt = 0; attempt < 600; attempt += 1) {
        const shown = await json(['sandbox', 'get', id]);
        if (done(shown)) return shown;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      throw new Error(`sandbox ${id} did not settle`);
    };
    // A guest boots under TCG here: longer than --wait's 30 s at most.
    const created = await json(['sandbox', 'create', '--template', vm.id, '--wait', '30']);
    const source = await until(created.id, (s) => s.state !== 'starting');
    expect(source).toMatchObject({ state: 'running', identityRebound: true, hostCertified: true });
    const uname = await cli(['sandbox', 'exec', source.id, '--', 'uname', '-a']);
    expect(uname.status, uname.stderr).toBe(0);
    expect(uname.stdout).toMatch(/^Linux sbx-/);
    const ticker = await cli(['sandbox', 'exec', source.id, '--', 'sh', '-c',
      "setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & echo $!"]); // prettier-ignore
    expect(ticker.status, ticker.stderr).toBe(0);
    const pid = ticker.stdout.trim();
    const snapshot = await json(['sandbox', 'snapshot', source.id, '--keep']);
    expect(snapshot).toMatchObject({ memory: true, keep: true });
    for (let attempt = 0; attempt < 300; attempt += 1) {
      if ((await json(['sandbox-snapshot', 'get', snapshot.id])).state !== 'creating') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // The node's two cores are the warm pool's and one VM's: the source goes, its snapshot stays.
    await json(['sandbox', 'delete', source.id]);
    await until(source.id, (s) => s.state === 'deleted');
    const restore = await json([
      'sandbox',
      'create',
      '--template',
      vm.id,
      '--from-snapshot',
      snapshot.id,
      '--wait',
      '30',
    ]);
    const restored = await until(restore.id, (s) => s.state !== 'starting');
    expect(restored).toMatchObject({ state: 'running', identityRebound: true, fromSnapshotId: snapshot.id });
    const inside = await cli([
      'sandbox',
      'exec',
      restored.id,
      '--',
      'sh',
      '-c',
      `kill -0 ${pid} && echo alive; hostname`,
    ]);
    expect(inside.status, inside.stderr).toBe(0);
    expect(inside.stdout).toBe(`alive\n${restored.id.replace('_', '-')}\n`);
    await json(['sandbox', 'delete', restored.id]);
    await until(restored.id, (s) => s.state === 'deleted');
  }, 420_000);
});
