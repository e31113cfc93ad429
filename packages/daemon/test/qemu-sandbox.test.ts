/**
 * The qemu runtime for sandboxes on this machine, with real parts: the project's guest under QEMU
 * (TCG here), its own sshd reached through the driver's `dialSsh` by the real OpenSSH client, its
 * identity given through the QEMU guest agent. One sandbox boots; a memory snapshot of it is
 * restored as a second sandbox that keeps a process started before the snapshot, yet answers with
 * its own host key, takes certificates for its own id only, and runs on the node's clock; a disk
 * snapshot, taken with the guest's file systems frozen, boots fresh with the files.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RuntimeImage, SandboxCommandPayload } from '@better-compute/core/runtime-commands';
import { ensureGuestImage, guestRuntimeImage } from '../../better-compute/test/guest-support.js';
import { ImageCache, QemuSandboxDriver } from '../src/runtimes/index.js';
import { qemuPid } from '../src/runtimes/qemu-process.js';
import { SandboxKeys } from './sandbox-support.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-vmsbx-'));
const stateDir = join(scratch, 'state');
const keys = new SandboxKeys(scratch);
let image: RuntimeImage;
let driver: QemuSandboxDriver;
const created: string[] = [];
// A value sh would mangle if it were not quoted whole: quotes, $, a backslash and line breaks.
const secretMark = `qemu-secret-${randomBytes(8).toString('hex')}`;
const secretValue = `${secretMark} it's "$HOME" \\n\nsecond line\n`;
// sshd's PATH for root, which a session keeps (the guest script's own PATH is not a session's).
const sshdPath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Files under `dir` whose bytes hold `mark`. */
function filesHolding(dir: string, mark: string): string[] {
  const needle = Buffer.from(mark);
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((file) => readFileSync(file).includes(needle));
}

function spec(sandboxId: string, extra: Partial<SandboxCommandPayload<'sandbox.create'>> = {}) {
  return {
    sandboxId,
    runtime: 'qemu' as const,
    image,
    shape: { vcpus: 1, memoryMiB: 384, diskGiB: 2, gpus: [] },
    network: 'none' as const,
    volumes: [],
    userData: null,
    userCaPublicKey: keys.userCa(),
    fromSnapshot: null,
    readyTimeoutMs: 240_000,
    env: [],
    ...extra,
  };
}

async function create(sandboxId: string, extra: Partial<SandboxCommandPayload<'sandbox.create'>> = {}) {
  created.push(sandboxId);
  const result = await driver.create(spec(sandboxId, extra));
  await driver.certify(sandboxId, keys.hostCertificate(sandboxId, result.hostPublicKey));
  return result;
}

const ssh = (sandboxId: string, key: string, command: string) =>
  keys.ssh((id) => driver.dialSsh(id), sandboxId, key, [command]);

describe('the qemu runtime for sandboxes', () => {
  let source: Awaited<ReturnType<typeof create>>;
  let sourceKey: string;

  beforeAll(async () => {
    image = guestRuntimeImage(await ensureGuestImage(), 'img_vmsandbox');
    driver = new QemuSandboxDriver(stateDir, new ImageCache(join(stateDir, 'images')));
  }, 600_000);

  afterAll(async () => {
    for (const id of created) await driver?.delete(id).catch(() => {});
    rmSync(scratch, { recursive: true, force: true });
  });

  it('boots a guest whose sshd takes certificates for this sandbox only, as root, and brings back the status', async () => {
    source = await create('sbx_vmone', { env: [{ name: 'API_KEY', value: secretValue }] });
    expect(source).toMatchObject({ sandboxId: 'sbx_vmone', identityRebound: true });
    expect(source.hostPublicKey).toMatch(/^ssh-ed25519 /);
    sourceKey = keys.userKey('one', 'sbx_vmone');
    const login = await ssh('sbx_vmone', sourceKey, 'hostname; id -u; exit 7');
    expect(login.status, login.stderr).toBe(7);
    expect(login.stdout).toBe('sbx-vmone\n0\n');
    const other = await ssh('sbx_vmone', keys.userKey('other', 'sbx_someoneelse'), 'true');
    expect(other.status).toBe(255);
    // A retried create answers what the first did, without a second VM.
    expect(await driver.create(spec('sbx_vmone'))).toMatchObject({ hostPublicKey: source.hostPublicKey });
  }, 300_000);

  it('a secret variable is set for every session, byte for byte, and is in no file or argument of the node', async () => {
    const printed = await ssh('sbx_vmone', sourceKey, 'printf %s "$API_KEY"; echo; printf %s "$PATH"');
    expect(printed.status, printed.stderr).toBe(0);
    expect(printed.stdout).toBe(`${secretValue}\n${sshdPath}`);
    // Kept in the guest's memory (/run), root's only, never on the disk a snapshot copies.
    const kept = await ssh('sbx_vmone', sourceKey, 'stat -c %a /run/better-compute-sandbox/env');
    expect(kept.stdout).toBe('600\n');
    const pid = qemuPid(join(stateDir, 'vm-sandboxes', 'sbx_vmone'))!;
    expect(readFileSync(`/proc/${pid}/cmdline`).includes(secretMark)).toBe(false);
    expect(filesHolding(stateDir, secretMark)).toEqual([]);
  }, 120_000);

  it('a memory snapshot restores a process started before it, with its own host key, principal and clock', async () => {
    const started = await ssh(
      'sbx_vmone',
      sourceKey,
      "setsid sh -c 'while :; do date +%s >/root/tick; sleep 1; done' </dev/null >/dev/null 2>&1 & echo $! >/root/ticker.pid; echo kept >/root/notes; cat /root/ticker.pid",
    );
    expect(started.status, started.stderr).toBe(0);
    const pid = started.stdout.trim();
    expect(pid).toMatch(/^\d+$/);
    const snapshot = await driver.snapshot('sbx_vmone', 'snap_vmmemory', true);
    expect(snapshot).toMatchObject({ memory: true });
    expect(snapshot.sizeBytes).toBeGreaterThan(1 << 20);
    // The source runs on after its snapshot.
    expect((await ssh('sbx_vmone', sourceKey, `kill -0 ${pid} && echo alive`)).stdout).toBe('alive\n');
    // Long enough that a clock carried over from the snapshot would show.
    await new Promise((resolve) => setTimeout(resolve, 6_000));

    const restored = await create('sbx_vmtwo', {
      fromSnapshot: { snapshotId: 'snap_vmmemory', memory: true },
      env: [{ name: 'API_KEY', value: 'the restore’s own' }],
    });
    expect(restored.identityRebound).toBe(true);
    expect(restored.hostPublicKey).not.toBe(source.hostPublicKey);
    // The source's id no longer opens it: its principal is its own now.
    const asSource = await ssh('sbx_vmtwo', keys.userKey('stale', 'sbx_vmone'), 'true');
    expect(asSource.status).toBe(255);
    const key = keys.userKey('two', 'sbx_vmtwo');
    const inside = await ssh('sbx_vmtwo', key, `kill -0 ${pid} && echo alive; hostname; date +%s`);
    expect(inside.status, inside.stderr).toBe(0);
    const [alive, hostname, clock] = inside.stdout.trim().split('\n');
    expect(alive).toBe('alive');
    expect(hostname).toBe('sbx-vmtwo');
    expect(Math.abs(Number(clock) - Date.now() / 1000)).toBeLessThan(4);
    // The host key the client pinned through the CA is the one the node made for the restore.
    const scanned = await ssh('sbx_vmtwo', key, 'cat /etc/ssh/ssh_host_ed25519_key.pub');
    expect(scanned.stdout.split(' ')[1]).toBe(restored.hostPublicKey.split(' ')[1]);
    // Its variables are its own, not its source's.
    expect((await ssh('sbx_vmtwo', key, 'printf %s "$API_KEY"')).stdout).toBe('the restore’s own');
    // The source keeps its own identity.
    expect((await ssh('sbx_vmone', sourceKey, 'hostname')).stdout).toBe('sbx-vmone\n');
  }, 300_000);

  it('a disk snapshot boots fresh with the files; delete stops the VM and removes the snapshot on request', async () => {
    await driver.snapshot('sbx_vmone', 'snap_vmdisk', false);
    const restored = await create('sbx_vmthree', {
      fromSnapshot: { snapshotId: 'snap_vmdisk', memory: false },
    });
    const key = keys.userKey('three', 'sbx_vmthree');
    // What the source wrote without a sync is there (the snapshot froze its file systems first);
    // its processes are not.
    const inside = await ssh(
      'sbx_vmthree',
      key,
      'cat /root/notes; kill -0 $(cat /root/ticker.pid) 2>/dev/null || echo fresh',
    );
    expect(inside.stdout, inside.stderr).toBe('kept\nfresh\n');
    // A disk snapshot carries no variable: this sandbox has none, and no forced command.
    const bare = await ssh('sbx_vmthree', key, 'echo "[${API_KEY-unset}]"; ls /run/better-compute-sandbox');
    expect(bare.stdout).toBe('[unset]\n');
    expect(restored.hostPublicKey).not.toBe(source.hostPublicKey);
    await expect(
      driver.create(spec('sbx_vmfour', { fromSnapshot: { snapshotId: 'snap_vmdisk', memory: true } })),
    ).rejects.toThrow(/holds no memory/);

    const dir = join(stateDir, 'vm-sandboxes', 'sbx_vmthree');
    const pid = qemuPid(dir);
    expect(pid).not.toBeNull();
    expect((await driver.delete('sbx_vmthree')).removed).toBe(true);
    // Gone, or a zombie until init reaps it.
    const state = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
    expect(state === '' || state.slice(state.lastIndexOf(')') + 2).startsWith('Z')).toBe(true);
    expect((await driver.delete('sbx_vmthree')).removed).toBe(false);
    expect((await driver.deleteSnapshot('snap_vmdisk')).removed).toBe(true);
    expect((await driver.deleteSnapshot('snap_vmdisk')).removed).toBe(false);
  }, 300_000);
});
