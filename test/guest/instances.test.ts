/**
 * An instance's life on a real node: `better-compute serve` on PostgreSQL, a real `bcd` joined to a
 * vps pool running its qemu runtime, the project's guest image registered with its digests, and the
 * real CLI binary as the tenant: `instances create` until running, an SSH login with the key given
 * at create that answers the seed's host name, stop (ACPI), resize, start, delete, with the instance's
 * events at each step. While it runs, `forward --instance` carries an SSH login and `console
 * --instance` shows its serial console, through real tunnels to the daemon's instance targets.
 * One guest, booted twice (TCG here, so minutes).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../packages/better-compute/src/cli/index.js';
import type { CliTerminal } from '../../packages/better-compute/src/cli/io.js';
import { generatedCommandSigner } from '../../packages/better-compute/src/gateway/signer.js';
import { createPkiBundle } from '../../packages/better-compute/src/pki/create.js';
import { captureIO, cliLending } from '../../packages/better-compute/test/cli-support.js';
import {
  ensureGuestImage,
  ensureHostTools,
  generateSshKey,
  guestHttpServerCommand,
  type GuestImage,
  killInstanceVm,
  sshGuest,
  type SshKey,
} from '../../packages/better-compute/test/guest-support.js';
import {
  type Deployment,
  deployment,
  freePort,
  joinVpsNode,
  type Proc,
  start,
  until,
} from '../../packages/daemon/test/daemon-support.js';
import { computeBin, runCompute } from '../e2e/support.js';

const tools = ensureHostTools();
const scratch = mkdtempSync(join(tmpdir(), 'bc-instances-qemu-'));
const stateDir = join(scratch, 'state');
let env: Deployment;
let server: Proc | undefined;
let daemon: Proc | null = null;
let url = '';
let guest: GuestImage;
let key: SshKey;
let poolId = '';
let flavorId = '';
let largerId = '';
let imageId = '';
let instanceId = '';
const name = 'guest-one';

// Long enough for a TCG boot behind `--wait`.
const cli = (args: string[], token = env.acmeKey) =>
  runCompute([...args, '--format', 'compact'], { cwd: scratch, url, token, timeoutMs: 600_000 });

async function json(args: string[], token?: string): Promise<Record<string, any>> {
  const result = await cli(args, token);
  if (result.status !== 0) throw new Error(`${args.join(' ')}: ${result.stderr}`);
  return JSON.parse(result.stdout) as Record<string, any>;
}

const ssh = (port: number, command: string) => sshGuest(port, key, guest.manifest.defaultUser, command);
/** SSH straight to the guest's private address, which its node (this machine) routes to. */
const sshGuestAt = (view: Record<string, any>, command: string) =>
  sshGuest(22, key, guest.manifest.defaultUser, command, { host: String(view.address).split('/')[0] });

/** Runs `forward --instance` (the real binary) for `port` while `use` runs with the local port. */
async function withForward(port: number, use: (localPort: number) => Promise<void>): Promise<string> {
  const localPort = await freePort();
  const forward = spawn(
    process.execPath,
    [
      computeBin,
      'forward',
      '--instance',
      instanceId,
      '--port',
      String(port),
      '--local-port',
      String(localPort),
    ],
    {
      cwd: scratch,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: scratch,
        BETTER_COMPUTE_URL: url,
        BETTER_COMPUTE_TOKEN: env.acmeKey,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let said = '';
  forward.stderr.setEncoding('utf8').on('data', (chunk: string) => (said += chunk));
  const exited = new Promise<number | null>((resolve) => forward.once('close', resolve));
  try {
    await until('forward to listen', async () => said.includes('Ctrl-C stops'), 30_000);
    await use(localPort);
  } catch (error) {
    // What forward said about the connection that failed is the clue: it goes with the failure.
    forward.kill('SIGINT');
    await exited;
    throw new Error(`${(error as Error).message}; forward said: ${said.trim() || 'nothing'}`, {
      cause: error,
    });
  } finally {
    forward.kill('SIGINT');
  }
  await exited;
  return said;
}

/** The CLI in process on a terminal nobody types into; its exit code and what it said on stderr. */
async function terminalCli(argv: string[]): Promise<{ code: number; err: string }> {
  const terminal: CliTerminal = { onInput: () => () => undefined, write: () => undefined };
  const { io, err } = captureIO(
    { HOME: scratch, BETTER_COMPUTE_TOKEN: env.acmeKey, BETTER_COMPUTE_URL: url },
    { cwd: scratch, terminal },
  );
  const code = await main(
    argv,
    cliLending(() => env.compute),
    io,
  );
  return { code, err: err.join('\n') };
}

async function instanceEvents(): Promise<string[]> {
  const page = await env.call<{ items: { type: string; subject: { id: string } }[] }>(
    'events.list',
    { type: 'instance.', limit: 100 },
    'acme',
  );
  return page.items.filter((e) => e.subject.id === instanceId).map((e) => e.type);
}

describe.skipIf(tools.missing.includes('qemu-system-x86_64'))('an instance on a real node and QEMU', () => {
  beforeAll(async () => {
    if (tools.missing.length > 0)
      throw new Error(`the test needs ${tools.missing.join(', ')}: ${tools.reason}`);
    guest = await ensureGuestImage();
    key = generateSshKey(scratch);
    writeFileSync(join(scratch, 'id.pub'), `${key.publicKey}\n`);
    env = await deployment();
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const keyFile = join(scratch, 'command-root.pem');
    writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
    // Tunnel tickets are signed with the deployment's PKI bundle, which serve opens with its secret.
    const secret = 'instances-test-secret-not-a-real-one';
    const pki = join(scratch, 'pki.json');
    await createPkiBundle({ path: pki, secret });
    const config = join(scratch, 'better-compute.config.mjs');
    writeFileSync(config, `export default { pki: ${JSON.stringify(pki)} };\n`);
    server = start(computeBin, ['serve', '--port', String(port)], {
      BETTER_COMPUTE_CONFIG: config,
      BETTER_COMPUTE_DATABASE_URL: env.database.url!,
      BETTER_COMPUTE_SECRET: secret,
      BETTER_COMPUTE_COMMAND_ROOT_KEY_FILE: keyFile,
    });
    await until(
      'the server to listen',
      async () => server!.err.concat(server!.out).some((line) => line.includes('serving')),
      30_000,
    );
    ({ poolId, daemon } = await joinVpsNode(env, url, scratch, stateDir));
    flavorId = (
      await json(
        [
          'flavors',
          'create',
          '--pool',
          poolId,
          '--name',
          'small',
          '--vcpus',
          '1',
          '--memory',
          '512',
          '--disk',
          '2',
          // Its instances boot the newest debian image on testing when they name none.
          '--image-os',
          'debian',
          '--image-channel',
          'testing',
        ],
        env.rootKey,
      )
    ).id;
    largerId = (
      await json(
        ['flavors', 'create', '--pool', poolId, '--name', 'larger', '--vcpus', '1', '--memory', '512', '--disk', '3'],
        env.rootKey,
      )
    ).id; // prettier-ignore
    // The platform's image, registered from the files the CLI hashes itself.
    imageId = (
      await json(
        ['images', 'register', '--name', 'guest', '--source', guest.rootfs, '--disk-format', 'qcow2', '--os', 'debian',
          '--kernel', guest.vmlinux, '--initrd', guest.initrd, '--cmdline', guest.kernelCmdline],
        env.rootKey,
      )
    ).id; // prettier-ignore
  }, 600_000);

  afterAll(async () => {
    // Whatever a failed step left running is stopped: no VM outlives the suite.
    killInstanceVm(stateDir, instanceId);
    daemon?.child.kill('SIGKILL');
    server?.child.kill('SIGKILL');
    await env?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('create waits until the guest answers; SSH with the key given at create reaches the seed’s host name', async () => {
    const created = await json(
      ['instances', 'create', '--pool', poolId, '--flavor', flavorId, '--name', name,
        '--ssh-key', 'id.pub', '--key', 'guest-one-create', '--wait', '300'],
    ); // prettier-ignore
    instanceId = created.id;
    expect(created, created.reason ?? '').toMatchObject({ state: 'running', reason: null });
    // No --image: the flavor's channel gave the one image of its OS there.
    expect(created.imageId).toBe(imageId);
    // Its own private address on the node, with egress (the default); no loopback port.
    expect(created).toMatchObject({ address: expect.stringMatching(/^10\.213\.\d+\.\d+\/30$/), sshPort: null, egress: true }); // prettier-ignore
    const login = await sshGuestAt(created, 'hostname');
    expect(login.stdout.trim(), login.stderr).toBe(name);
    expect(await instanceEvents()).toEqual(['instance.created', 'instance.running']);
  }, 360_000);

  it('forward --instance carries an SSH login and HTTP to a server in the guest; console --instance shows the serial console and Ctrl-] detaches; another tenant is refused', async () => {
    let login: Awaited<ReturnType<typeof ssh>> | undefined;
    const sshSaid = await withForward(22, async (localPort) => {
      login = await ssh(localPort, 'hostname');
    });
    expect(login?.stdout.trim(), `${login?.stderr}\n${sshSaid}`).toBe(name);
    expect(sshSaid).not.toContain('could not be forwarded');

    // An HTTP server in the guest, reached through forward: a small answer, 3 MiB that arrive
    // whole though the guest closes as soon as it has written them, and an 8 MiB upload it counts.
    const view = await json(['instances', 'get', instanceId]);
    const started = await sshGuestAt(view, guestHttpServerCommand(8080));
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const httpSaid = await withForward(8080, async (localPort) => {
      const hello = await fetch(`http://127.0.0.1:${localPort}/`);
      expect(hello.status).toBe(200);
      expect(await hello.text()).toBe(`hello from ${name}\n`);
      const large = await fetch(`http://127.0.0.1:${localPort}/bytes/${3 * 1024 * 1024}`, {
        headers: { connection: 'close' },
      });
      expect((await large.arrayBuffer()).byteLength).toBe(3 * 1024 * 1024);
      // More than the daemon once held for a port it was still dialling (1 MiB): it arrives whole.
      const upload = await fetch(`http://127.0.0.1:${localPort}/upload`, {
        method: 'POST',
        body: Buffer.alloc(8 * 1024 * 1024, 7),
      });
      expect(await upload.text()).toBe(`${8 * 1024 * 1024}\n`);
    });
    expect(httpSaid).not.toContain('could not be forwarded');

    // console, in process, on a terminal we type into.
    let input: ((data: Uint8Array) => void) | null = null;
    const written: string[] = [];
    const terminal: CliTerminal = {
      onInput(listener) {
        input = listener;
        return () => (input = null);
      },
      write: (data) => void written.push(typeof data === 'string' ? data : Buffer.from(data).toString()),
      size: () => ({ columns: 80, rows: 24 }),
    };
    const { io, err } = captureIO(
      { HOME: scratch, BETTER_COMPUTE_TOKEN: env.acmeKey, BETTER_COMPUTE_URL: url },
      { cwd: scratch, terminal },
    );
    const running = main(
      ['console', '--instance', instanceId],
      cliLending(() => env.compute),
      io,
    );
    await until('the console to attach', async () => input !== null, 30_000);
    // What shows is the boot the runtime's ring replays, down to the ready line with this
    // instance's id and host name, then the getty's prompt; Enter draws another.
    await until(
      'the guest’s ready line and login prompt on its serial console',
      async () =>
        written.join('').includes(`better-compute-guest: ready instance-id=${instanceId} hostname=${name}`) &&
        written.join('').includes(`${name} login:`),
      30_000,
    );
    const prompts = () => written.join('').split(`${name} login:`).length - 1;
    const before = prompts();
    input!(new TextEncoder().encode('\r'));
    await until('another login prompt', async () => prompts() > before, 30_000);
    input!(Uint8Array.of(0x1d));
    expect(await running, err.join('\n')).toBe(0);
    expect(err.join('\n')).toContain('detached');
    expect((await json(['instances', 'get', instanceId])).state).toBe('running');

    // exec reaches the node, whose daemon refuses it while guests have no agent, in the guide's words.
    const exec = await terminalCli(['exec', '--instance', instanceId]);
    expect(exec.code).not.toBe(0);
    expect(exec.err).toContain('bcd refuses instance exec until guests have an agent');

    // Another tenant names the same instance and finds nothing.
    await expect(env.call('tunnels.open', { instanceId, op: 'console' }, 'root')).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    await expect(env.call('tunnels.open', { instanceId, op: 'tcp', port: 22 }, 'root')).rejects.toMatchObject(
      { code: 'NOT_FOUND' },
    );
  }, 120_000);

  it('stop powers it off; resize grows its disk; start boots it again; delete removes its disk', async () => {
    expect((await json(['instances', 'stop', instanceId, '--timeout', '60', '--wait', '120'])).state).toBe(
      'stopped',
    );
    const resized = await json(['instances', 'resize', instanceId, '--flavor', largerId, '--wait', '120']);
    expect(resized).toMatchObject({ state: 'stopped', flavorId: largerId, diskGiB: 3 });
    // A stopped instance has no console or port to open.
    await expect(env.call('tunnels.open', { instanceId, op: 'console' }, 'acme')).rejects.toMatchObject({
      code: 'INVALID_STATE',
    });
    const again = await json(['instances', 'start', instanceId, '--wait', '300']);
    expect(again.state, again.reason ?? '').toBe('running');
    expect((await sshGuestAt(again, 'hostname')).stdout.trim()).toBe(name);
    // The guest boots on the grown disk: 3 GiB in 512-byte sectors.
    expect((await sshGuestAt(again, 'cat /sys/block/vda/size')).stdout.trim()).toBe(String(3 * 2 ** 21));
    expect((await json(['instances', 'delete', instanceId, '--wait', '120'])).state).toBe('deleted');
    expect(existsSync(join(stateDir, 'instances', instanceId))).toBe(false);
    // A control plane that still thinks it runs: the node ends the stream with the reason and its
    // daemon stays up.
    await sql`update compute.instances set state = 'running' where id = ${instanceId}`.execute(
      env.compute.database.db,
    );
    const gone = await terminalCli(['console', '--instance', instanceId]);
    expect(gone.code).toBe(255);
    expect(gone.err).toContain(`instance ${instanceId} is not on this node`);
    await sql`update compute.instances set state = 'deleted' where id = ${instanceId}`.execute(
      env.compute.database.db,
    );
    expect(JSON.parse(readFileSync(join(stateDir, 'status.json'), 'utf8')).connected).toBe(true);
    expect(await instanceEvents()).toEqual([
      'instance.created',
      'instance.running',
      'instance.stopping',
      'instance.stopped',
      'instance.provisioning',
      'instance.resized',
      'instance.stopped',
      'instance.provisioning',
      'instance.running',
      'instance.deleting',
      'instance.deleted',
    ]);
  }, 600_000);
});
