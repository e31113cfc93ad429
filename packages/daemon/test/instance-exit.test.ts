/**
 * A VM that dies unasked: `better-compute serve` on PostgreSQL, a real `bcd` joined to a vps pool,
 * one real guest created through the API. Its QEMU is killed with SIGKILL; the daemon reports the
 * exit on its session and the instance becomes `failed` with the reason and its event. A report
 * naming another node's instance moves nothing, and malformed reports are refused by the protocol.
 * The two guests, created at once, get addresses of their own and cannot reach each other.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDaemonMessage } from '../../better-compute/src/gateway/protocol.js';
import { generatedCommandSigner } from '../../better-compute/src/gateway/signer.js';
import { instanceExited } from '../../better-compute/src/modules/vps/exits.js';
import {
  ensureGuestImage,
  ensureHostTools,
  generateSshKey,
  type GuestImage,
  killInstanceVm,
  type SshKey,
} from '../../better-compute/test/guest-support.js';
import { guestConnects } from '../../better-compute/test/instance-network-support.js';
import { runCompute } from '../../../test/e2e/support.js';
import {
  bcd,
  daemonConnected,
  type Deployment,
  deployment,
  freePort,
  joinVpsNode,
  type Proc,
  startServer,
  until,
} from './daemon-support.js';

const tools = ensureHostTools();
const scratch = mkdtempSync(join(tmpdir(), 'bc-instance-exit-'));
const stateDir = join(scratch, 'state');
let env: Deployment;
let server: Proc | undefined;
let daemon: Proc | undefined;
let url = '';
let guest: GuestImage;
let instanceId = '';
/** An instance whose guest powers itself off when told to over SSH. */
let quitterId = '';
let key: SshKey;
/** Its user-data: a root loop that powers the guest off once the default user makes the file. */
const powerOffOnRequest =
  '#!/bin/sh\n(while [ ! -e /tmp/power-off-now ]; do sleep 1; done; /bin/busybox poweroff) >/dev/null 2>&1 </dev/null &\n';

interface InstanceView {
  id: string;
  nodeId: string;
  state: string;
  reason: string | null;
  sshPort: number | null;
  address: string | null;
  version: number;
}

/** The real CLI as the root admin: it hashes the image's files itself. */
async function cliJson(args: string[]): Promise<Record<string, string>> {
  const result = await runCompute([...args, '--format', 'compact'], {
    cwd: scratch,
    url,
    token: env.rootKey,
    timeoutMs: 600_000,
  });
  if (result.status !== 0) throw new Error(`${args.join(' ')}: ${result.stderr}`);
  return JSON.parse(result.stdout) as Record<string, string>;
}

const getInstance = (id = instanceId) => env.call<InstanceView>('instances.get', { instanceId: id }, 'acme');

async function startDaemon(): Promise<void> {
  daemon = bcd(['run', '--state-dir', stateDir, '--scripts-dir', scratch]);
  await daemonConnected(stateDir);
}

function qemuPid(id: string): number {
  return Number(readFileSync(join(stateDir, 'instances', id, 'qemu.pid'), 'utf8').trim());
}

/** SSH straight to the guest's private address (`10.213.x.y/30`), which this node routes to. */
function ssh(
  address: string,
  command: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const args = [
    '-F', 'none', '-i', key.privateKeyPath,
    '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no',
    '-o', 'UserKnownHostsFile=/dev/null', '-o', 'ConnectTimeout=20', '-o', 'LogLevel=ERROR',
    `${guest.manifest.defaultUser}@${address.split('/')[0]}`, command,
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

async function instanceEvents(id = instanceId): Promise<{ type: string; data: Record<string, unknown> }[]> {
  const page = await env.call<{
    items: { type: string; subject: { id: string }; data: Record<string, unknown> }[];
  }>('events.list', { type: 'instance.', limit: 100 }, 'acme');
  return page.items.filter((e) => e.subject.id === id);
}

describe.skipIf(tools.missing.includes('qemu-system-x86_64'))('a VM that dies unasked', () => {
  beforeAll(async () => {
    if (tools.missing.length > 0)
      throw new Error(`the test needs ${tools.missing.join(', ')}: ${tools.reason}`);
    guest = await ensureGuestImage();
    key = generateSshKey(scratch);
    env = await deployment();
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const keyFile = join(scratch, 'command-root.pem');
    writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
    server = await startServer(env.database.url!, port, keyFile);
    const { poolId } = await joinVpsNode(env, url, scratch, stateDir, { run: false });
    await startDaemon();
    const flavor = await cliJson(
      ['flavors', 'create', '--pool', poolId, '--name', 'small', '--vcpus', '1', '--memory', '512', '--disk', '2'],
    ); // prettier-ignore
    const image = await cliJson(
      ['images', 'register', '--name', 'guest', '--source', guest.rootfs, '--disk-format', 'qcow2', '--os', 'debian',
        '--kernel', guest.vmlinux, '--initrd', guest.initrd, '--cmdline', guest.kernelCmdline],
    ); // prettier-ignore
    // Two guests booted side by side: one to kill, one that powers itself off.
    const [doomed, quitter] = await Promise.all([
      env.call<InstanceView>(
        'instances.create',
        { poolId: poolId, flavorId: flavor.id, imageId: image.id, name: 'doomed', sshKeys: [key.publicKey] },
        'acme',
      ),
      env.call<InstanceView>(
        'instances.create',
        {
          poolId: poolId,
          flavorId: flavor.id,
          imageId: image.id,
          name: 'quitter',
          sshKeys: [key.publicKey],
          userData: powerOffOnRequest,
        },
        'acme',
      ),
    ]);
    instanceId = doomed.id;
    quitterId = quitter.id;
    for (const id of [instanceId, quitterId]) {
      await until(
        'the instance to run',
        async () => (await getInstance(id)).state !== 'provisioning',
        240_000,
      );
      const running = await getInstance(id);
      expect(running.state, running.reason ?? '').toBe('running');
    }
  }, 600_000);

  afterAll(async () => {
    for (const id of [instanceId, quitterId]) killInstanceVm(stateDir, id);
    daemon?.child.kill('SIGKILL');
    server?.child.kill('SIGKILL');
    await env?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('the protocol refuses a malformed exit report', () => {
    const good = { t: 'instance.exited', instanceId: 'inst_abc', reason: 'QEMU exited', clean: false };
    expect(parseDaemonMessage(JSON.stringify(good))).toEqual(good);
    for (const bad of [
      { ...good, instanceId: 'inst_../../etc' },
      { ...good, instanceId: 'inst_a\u0000b' },
      { ...good, reason: 'x'.repeat(501) },
      { ...good, reason: '' },
      { ...good, clean: 'yes' },
      { ...good, tenantId: 'root' },
    ])
      expect(parseDaemonMessage(JSON.stringify(bad))).toBeNull();
  });

  it('another node’s report of the instance moves nothing', async () => {
    const before = await getInstance();
    const moved = await instanceExited(
      env.compute.database.db as never,
      'node_someoneelse',
      { instanceId, reason: 'forged', clean: false },
      new Date(),
    );
    expect(moved).toEqual({ outcome: 'ignored' });
    expect(await getInstance()).toMatchObject({ state: 'running', version: before.version, reason: null });
  });

  it('the two guests, booted side by side, have addresses of their own, and neither reaches the other', async () => {
    const [doomed, quitter] = [await getInstance(), await getInstance(quitterId)];
    expect(doomed.address).toMatch(/^10\.213\.\d+\.\d+\/30$/);
    expect(quitter.address).toMatch(/^10\.213\.\d+\.\d+\/30$/);
    expect(doomed.address).not.toBe(quitter.address);
    // The node reaches both; from one guest, the other's SSH is out of reach.
    expect((await ssh(doomed.address!, 'true')).code).toBe(0);
    const probe = await ssh(quitter.address!, guestConnects([`${doomed.address!.split('/')[0]}:22`]));
    expect(probe.stdout.trim()).toBe(`${doomed.address!.split('/')[0]}:22 failed`);
  }, 120_000);

  it('QEMU killed with SIGKILL: the instance becomes failed with the reason, once, with its event', async () => {
    process.kill(qemuPid(instanceId), 'SIGKILL');
    await until('the instance to fail', async () => (await getInstance()).state === 'failed', 20_000);
    const failed = await getInstance();
    expect(failed.reason).toMatch(/QEMU exited without being asked to stop/);
    expect(failed.sshPort).toBeNull();
    // The gateway acknowledged, so the node's record of the exit is gone and it is told once.
    await until(
      'the exit record to go',
      async () => !existsSync(join(stateDir, 'instances', instanceId, 'run.json')),
      10_000,
    );
    // The dead VM's network namespace and veth went with its record.
    const { name } = JSON.parse(
      readFileSync(join(stateDir, 'instances', instanceId, 'spec.json'), 'utf8'),
    ).network;
    // The namespace goes first and its veth after it (the kernel tears a namespace down
    // asynchronously, and down() then deletes the link by name), so wait for both.
    await until(
      'its network to go',
      async () => !existsSync(`/run/netns/${name}`) && !existsSync(`/sys/class/net/${name}`),
      10_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const events = await instanceEvents();
    expect(events.map((e) => e.type)).toEqual(['instance.created', 'instance.running', 'instance.failed']);
    expect(events.at(-1)!.data).toMatchObject({
      state: 'failed',
      previousState: 'running',
      reason: failed.reason,
    });
    // A report after the fact (a repeat, or the same node again) changes nothing more.
    const again = await instanceExited(
      env.compute.database.db as never,
      failed.nodeId,
      { instanceId, reason: 'again', clean: false },
      new Date(),
    );
    expect(again).toEqual({ outcome: 'ignored' });
  }, 120_000);

  it('a guest that powers itself off: the instance is stopped, with the reason', async () => {
    const running = await getInstance(quitterId);
    const asked = await ssh(running.address!, 'touch /tmp/power-off-now');
    expect(asked.code, asked.stderr).toBe(0);
    await until(
      'the instance to stop',
      async () => (await getInstance(quitterId)).state !== 'running',
      30_000,
    );
    expect(await getInstance(quitterId)).toMatchObject({
      state: 'stopped',
      reason: 'the guest powered itself off',
      sshPort: null,
    });
    expect((await instanceEvents(quitterId)).map((e) => e.type)).toEqual([
      'instance.created',
      'instance.running',
      'instance.stopped',
    ]);
  }, 120_000);

  it('a VM gone while the daemon was down is reported when it starts again', async () => {
    await env.call('instances.start', { instanceId: quitterId }, 'acme');
    await until(
      'the instance to run',
      async () => (await getInstance(quitterId)).state === 'running',
      120_000,
    );
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    process.kill(qemuPid(quitterId), 'SIGKILL');
    await startDaemon();
    await until(
      'the instance to fail',
      async () => (await getInstance(quitterId)).state === 'failed',
      20_000,
    );
    expect((await getInstance(quitterId)).reason).toBe('the VM was gone when the daemon started again');
    expect((await instanceEvents(quitterId)).map((e) => e.type).slice(-3)).toEqual([
      'instance.provisioning',
      'instance.running',
      'instance.failed',
    ]);
  }, 120_000);
});
