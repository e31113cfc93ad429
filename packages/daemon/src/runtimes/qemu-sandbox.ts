/**
 * The qemu runtime for sandboxes: each sandbox a VM of its template's image, with memory snapshots.
 * A sandbox lives under `<state-dir>/vm-sandboxes/<id>`: its disk (a qcow2 overlay on the cached
 * image, or a copy of a snapshot's), its NoCloud seed, and while it runs the pidfile and
 * `run.json`; its QMP and guest-agent sockets are in the daemon's runtime directory (runtime-dir.ts),
 * short whatever the state directory's length. Its serial console is a ring QEMU keeps, read when a
 * start fails. QEMU daemonizes, so sandboxes outlive the daemon, which finds them again by pidfile
 * (a daemon that stops with its VMs, `bcd run --ephemeral`, stops them and they are gone).
 *
 * Identity: the node makes every sandbox's SSH host key and installs it through the QEMU guest agent
 * (`/usr/lib/better-compute-guest/sandbox identity` in the guest), with the sandbox CA as the only
 * trusted user CA and the sandbox id as the only principal for root; `certify` adds the host
 * certificate and restarts the guest's sshd with all of it. A fresh sandbox gets its identity once
 * it has booted; a memory restore wakes up as its source (the same host key, principal, clock and
 * random state) and gets its own the same way, with the node's clock and fresh entropy (and a new
 * vmgenid, which tells the guest's kernel to reseed), before the control plane calls it ready.
 * The template's variables from secrets come with the identity and stay in the guest's memory.
 *
 * Snapshots live under `<state-dir>/snapshots/<id>.vm`: the disk, and with memory the VM's state
 * as QEMU migrates it (taken paused, so disk and memory are of one instant), and `snapshot.json`.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, rmdirSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { SandboxCommandPayload, SandboxCommandResults } from '@better-compute/core/runtime-commands';
import { limitProcess, removeCgroup } from './cgroups.js';
import type { SandboxDriver } from './driver.js';
import { type ImageCache, RuntimeError } from './image-cache.js';
import { guestRun, waitForGuestAgent } from './qga.js';
import { envScript, resolvedEnv } from './sandbox-env.js';
import { GiB, makeOverlay, writeSeed } from './qemu-disk.js';
import {
  accelerator,
  endQemu,
  launch,
  machineArgs,
  qemuOverheadMiB,
  qemuPid,
  sshBanner,
  tail,
} from './qemu-process.js';
import { freeLoopbackPort } from './qemu.js';
import { Ledger } from './ledger.js';
import { type QmpConnection, qmpOnce, QmpConnection as Qmp } from './qmp.js';
import { makeSocketDir, runtimeDirFor, shortName, socketPath } from './runtime-dir.js';
import { checkHostCertificate, idPath, makeHostKey, SANDBOX_ID, SNAPSHOT_ID } from './sandbox-keys.js';

/** The program in the guest image that installs a sandbox's identity (scripts/guest/sandbox.sh). */
const GUEST_SANDBOX = '/usr/lib/better-compute-guest/sandbox';
const GUEST_RUN_MS = 30_000;

/** The guest agent's port, the same on a VM and on its restores (migration needs equal devices). */
export const agentDevices = (sockets: string) => [
  '-chardev', `socket,id=qga,path=${socketPath(sockets, 'qga.sock')},server=on,wait=off`,
  '-device', 'virtio-serial-pci,id=serial0',
  '-device', 'virtserialport,bus=serial0.0,chardev=qga,name=org.qemu.guest_agent.0',
]; // prettier-ignore

/** The VM's make, which a memory snapshot holds to: a restore starts the same machine. */
interface Machine {
  vcpus: number;
  memoryMiB: number;
  accel: 'kvm' | 'tcg';
}

interface RunInfo extends Machine {
  pid: number;
  sshPort: number;
  hostPublicKey: string;
  readyMs: number;
}

interface SnapshotInfo extends Machine {
  sandboxId: string;
  memory: boolean;
  takenAt: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** A path inside a shell word: single-quoted (the state directory has no quote; checked anyway). */
function quoted(path: string): string {
  if (path.includes("'")) throw new RuntimeError('the state directory path has a quote');
  return `'${path}'`;
}

export class QemuSandboxDriver implements SandboxDriver {
  private readonly sandboxesDir: string;
  private readonly snapshotsDir: string;
  private readonly ledger: Ledger;

  constructor(
    stateDir: string,
    readonly images: ImageCache,
    private readonly log: (line: string) => void = () => {},
    /** Where the VMs' sockets go (runtime-dir.ts): short, whatever the state directory's length. */
    readonly runtimeDir: string = runtimeDirFor(stateDir),
  ) {
    this.sandboxesDir = join(stateDir, 'vm-sandboxes');
    this.snapshotsDir = join(stateDir, 'snapshots');
    this.ledger = new Ledger(stateDir);
  }

  /**
   * The directory of the VM's sockets: its own in the runtime directory, or the sandbox's directory
   * for a VM an older daemon started with its sockets there (found by its QMP socket).
   */
  private socketsOf(sandboxId: string): string {
    const dir = this.dirOf(sandboxId);
    return existsSync(join(dir, 'qmp.sock')) ? dir : join(this.runtimeDir, shortName(sandboxId));
  }
  private socket(sandboxId: string, name: 'qmp.sock' | 'qga.sock'): string {
    return join(this.socketsOf(sandboxId), name);
  }

  has(sandboxId: string): boolean {
    return SANDBOX_ID.test(sandboxId) && existsSync(this.dirOf(sandboxId));
  }

  private dirOf(sandboxId: string): string {
    return idPath(this.sandboxesDir, sandboxId, SANDBOX_ID, 'sandbox');
  }

  private snapshotDir(snapshotId: string): string {
    return idPath(this.snapshotsDir, snapshotId, SNAPSHOT_ID, 'snapshot', '.vm');
  }

  /** The running sandbox's record; null when it is not running. */
  private async runInfo(sandboxId: string): Promise<RunInfo | null> {
    const dir = this.dirOf(sandboxId);
    if (qemuPid(dir) === null) return null;
    try {
      return JSON.parse(await readFile(join(dir, 'run.json'), 'utf8')) as RunInfo;
    } catch {
      return null;
    }
  }

  private async snapshotInfo(snapshotId: string): Promise<SnapshotInfo | null> {
    try {
      return JSON.parse(
        await readFile(join(this.snapshotDir(snapshotId), 'snapshot.json'), 'utf8'),
      ) as SnapshotInfo;
    } catch {
      return null;
    }
  }

  async create(
    spec: SandboxCommandPayload<'sandbox.create'>,
    signal?: AbortSignal,
  ): Promise<SandboxCommandResults['sandbox.create']> {
    const started = performance.now();
    const id = spec.sandboxId;
    // The variables from secrets reach the guest with its identity, never a file of the node's.
    const env = envScript(resolvedEnv(spec.env));
    const existing = await this.runInfo(id);
    if (existing)
      return {
        sandboxId: id,
        hostPublicKey: existing.hostPublicKey,
        readyMs: existing.readyMs,
        identityRebound: true,
      };
    if (spec.volumes.length > 0)
      throw new RuntimeError(
        'a qemu sandbox cannot mount volumes on this node: volumes are for bwrap templates',
      );
    const from = spec.fromSnapshot;
    const source = from ? await this.snapshotInfo(from.snapshotId) : null;
    if (from && !source)
      throw new RuntimeError(`snapshot ${from.snapshotId} is not a qemu snapshot on this node`);
    if (from?.memory && !source?.memory)
      throw new RuntimeError(`snapshot ${from.snapshotId} holds no memory: restore it as a disk snapshot`);
    const restoring = from?.memory === true;
    await this.images.fetchImage(spec.image, signal);
    const boot = spec.image.boot;
    for (const file of [boot?.kernel, boot?.initrd]) if (file) await this.images.fetchFile(file, signal);

    const accel = await accelerator(boot ? this.images.pathOf(boot.kernel.sha256) : null, this.log);
    // A memory image fits only the machine it was taken on: the restore starts that machine.
    const machine: Machine = restoring
      ? { vcpus: source!.vcpus, memoryMiB: source!.memoryMiB, accel: source!.accel }
      : { vcpus: spec.shape.vcpus, memoryMiB: spec.shape.memoryMiB, accel };
    if (machine.accel !== accel)
      throw new RuntimeError(
        `snapshot ${from!.snapshotId} was taken under ${source!.accel}, and this node runs ${accel} now: restore it as a disk snapshot`,
      );
    const dir = this.dirOf(id);
    // A create that failed half way starts again from nothing.
    await this.remove(id);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    try {
      const sockets = makeSocketDir(this.runtimeDir, id);
      if (from)
        await copyFile(join(this.snapshotDir(from.snapshotId), 'disk.qcow2'), join(dir, 'disk.qcow2'));
      else
        await makeOverlay(
          this.images.pathOf(spec.image.disk.sha256),
          spec.image.diskFormat,
          join(dir, 'disk.qcow2'),
          spec.shape.diskGiB * GiB,
        );
      await writeSeed(
        join(dir, 'seed.iso'),
        {
          instanceId: id,
          hostname: id.toLowerCase().replace(/_/g, '-').slice(0, 63),
          sshKeys: [],
          // User data runs on the sandbox's first boot; a restore is past it.
          userData: from ? null : spec.userData,
        },
        dir,
      );
      const sshPort = await freeLoopbackPort();
      await launch(
        machineArgs({
          name: id,
          dir,
          ...machine,
          boot: boot
            ? {
                kernel: this.images.pathOf(boot.kernel.sha256),
                initrd: boot.initrd ? this.images.pathOf(boot.initrd.sha256) : null,
                cmdline: boot.cmdline,
              }
            : null,
          network: { user: { sshPort, restrict: spec.network !== 'egress' } },
          console: 'ring',
          sockets,
          extra: [...agentDevices(sockets), ...(restoring ? ['-incoming', 'defer'] : [])],
        }),
      );
      const pid = qemuPid(dir);
      if (pid === null) throw new RuntimeError('QEMU started but its process is not found');
      this.ledger.recordProcess(pid, `QEMU of ${id}`);
      limitProcess(
        'bcd-sandboxes',
        id,
        pid,
        { cpus: machine.vcpus + 0.5, memoryMiB: machine.memoryMiB + qemuOverheadMiB(machine.accel) },
        this.log,
      );
      const deadline = Date.now() + spec.readyTimeoutMs;
      if (restoring) await this.incoming(id, join(this.snapshotDir(from!.snapshotId), 'memory'), deadline);
      const hostPublicKey = await this.giveIdentity(id, spec.userCaPublicKey, env, deadline, signal);
      while (!(await sshBanner(sshPort))) {
        if (Date.now() > deadline) throw new RuntimeError('the sandbox SSH server did not answer in time');
        if (qemuPid(dir) === null) throw new RuntimeError('QEMU exited');
        await sleep(50);
      }
      const info: RunInfo = {
        ...machine,
        pid,
        sshPort,
        hostPublicKey,
        readyMs: Math.round(performance.now() - started),
      };
      await writeFile(join(dir, 'run.json'), JSON.stringify(info), { mode: 0o600 });
      this.log(
        `bcd: sandbox ${id} ready in ${info.readyMs} ms (qemu ${machine.accel}${restoring ? ', restored with memory' : ''})`,
      );
      return { sandboxId: id, hostPublicKey, readyMs: info.readyMs, identityRebound: true };
    } catch (error) {
      const seen = await this.consoleTail(id);
      await this.remove(id);
      throw new RuntimeError(
        `the qemu sandbox did not start: ${(error as Error).message}${seen ? `. Console:\n${seen}` : ''}`,
      );
    }
  }

  /** Loads a memory image into the VM waiting for it (`-incoming defer`), then runs it. */
  private async incoming(sandboxId: string, memory: string, deadline: number): Promise<void> {
    const dir = this.dirOf(sandboxId);
    const qmp = await Qmp.open(this.socket(sandboxId, 'qmp.sock'));
    try {
      await qmp.execute('migrate-incoming', { uri: `exec:cat ${quoted(memory)}` });
      for (;;) {
        const { status } = (await qmp.execute('query-status')) as { status: string };
        if (status === 'running') return;
        if (status !== 'inmigrate') {
          await qmp.execute('cont');
          return;
        }
        if (Date.now() > deadline) throw new RuntimeError('loading the memory image took too long');
        await sleep(20);
      }
    } catch (error) {
      if (qemuPid(dir) === null) throw new RuntimeError('QEMU exited while it loaded the memory image');
      throw error;
    } finally {
      qmp.close();
    }
  }

  /**
   * Makes the sandbox's host key on the node and installs it in the guest through its agent, with
   * the user CA and the sandbox id as principal, the node's clock and fresh entropy, and the
   * variables every session gets (`env`, sandbox-env.ts's script; empty for none). A restore gets
   * its own sandbox's variables, not its source's.
   */
  private async giveIdentity(
    sandboxId: string,
    userCaPublicKey: string,
    env: string,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<string> {
    const dir = this.dirOf(sandboxId);
    const hostPublicKey = await makeHostKey(dir, sandboxId);
    const privateKey = await readFile(join(dir, 'host_key'));
    // The guest holds the private key from here on; the node keeps the public half only.
    await rm(join(dir, 'host_key'), { force: true });
    const agent = await waitForGuestAgent(
      this.socket(sandboxId, 'qga.sock'),
      Math.max(deadline - Date.now(), 1),
      signal,
    );
    try {
      const input = [
        `sandbox-id=${sandboxId}`,
        `user-ca=${userCaPublicKey.trim()}`,
        `host-key=${privateKey.toString('base64')}`,
        `host-public-key=${hostPublicKey}`,
        `time=${(Date.now() / 1000).toFixed(3)}`,
        `entropy=${randomBytes(64).toString('base64')}`,
        `env=${Buffer.from(env).toString('base64')}`,
        '',
      ].join('\n');
      await this.runInGuest(agent, 'identity', input);
    } finally {
      agent.close();
    }
    return hostPublicKey;
  }

  private async runInGuest(agent: QmpConnection, what: 'identity' | 'certify', input: string): Promise<void> {
    const result = await guestRun(agent, GUEST_SANDBOX, [what], input, GUEST_RUN_MS);
    if (result.exitCode !== 0)
      throw new RuntimeError(
        `the guest refused its ${what === 'identity' ? 'identity' : 'host certificate'} (exit ${result.exitCode}): ${result.stderr.trim().slice(-300)}`,
      );
  }

  private async consoleTail(sandboxId: string): Promise<string> {
    if (qemuPid(this.dirOf(sandboxId)) === null) return '';
    try {
      const text = (await qmpOnce(this.socket(sandboxId, 'qmp.sock'), 'ringbuf-read', {
        device: 'console',
        size: 65536,
        format: 'utf8',
      })) as string;
      return tail(text);
    } catch {
      return '';
    }
  }

  async certify(
    sandboxId: string,
    hostCertificate: string,
  ): Promise<SandboxCommandResults['sandbox.certify']> {
    const info = await this.runInfo(sandboxId);
    if (!info) throw new RuntimeError(`sandbox ${sandboxId} is not running on this node`);
    const dir = this.dirOf(sandboxId);
    const expiresAt = await checkHostCertificate(dir, hostCertificate);
    const agent = await waitForGuestAgent(this.socket(sandboxId, 'qga.sock'), GUEST_RUN_MS);
    try {
      await this.runInGuest(agent, 'certify', `${hostCertificate.trim()}\n`);
    } finally {
      agent.close();
    }
    return { sandboxId, expiresAt };
  }

  async delete(sandboxId: string): Promise<SandboxCommandResults['sandbox.delete']> {
    const removed = existsSync(this.dirOf(sandboxId));
    await this.remove(sandboxId);
    return { sandboxId, removed };
  }

  /** Stops the VM and removes its disk, keys and sockets; snapshots stay. */
  private async remove(sandboxId: string): Promise<void> {
    const dir = this.dirOf(sandboxId);
    if (qemuPid(dir) !== null) await endQemu(dir, sandboxId, this.socketsOf(sandboxId));
    await removeCgroup('bcd-sandboxes', sandboxId, this.log);
    await rm(dir, { recursive: true, force: true });
    await rm(join(this.runtimeDir, shortName(sandboxId)), { recursive: true, force: true });
    // The runtime directory itself goes with its last VM (made again for the next). Synchronous,
    // so it never falls between another VM's making of the directory and of its own in it.
    try {
      rmdirSync(this.runtimeDir);
    } catch {
      // Another VM's sockets are in it, or it is gone.
    }
    this.ledger.forget((entry) => entry.kind === 'process' && entry.what === `QEMU of ${sandboxId}`);
  }

  /**
   * Stops and removes every qemu sandbox, as a daemon that stops with its VMs does (`bcd run
   * --ephemeral`, `bcd sweep`): a VM's running state cannot outlive its QEMU. Answers how many ran.
   */
  async stopAll(): Promise<number> {
    let stopped = 0;
    for (const id of await readdir(this.sandboxesDir).catch(() => [] as string[])) {
      if (!SANDBOX_ID.test(id)) continue;
      if (qemuPid(this.dirOf(id)) !== null) stopped += 1;
      await this.remove(id);
    }
    return stopped;
  }

  /**
   * Pauses the VM, writes its memory (when asked) by migrating it to a file, copies its disk, and
   * lets it run on: disk and memory are of the same instant.
   */
  async snapshot(
    sandboxId: string,
    snapshotId: string,
    memory: boolean,
  ): Promise<SandboxCommandResults['sandbox.snapshot']> {
    const path = this.snapshotDir(snapshotId);
    let info = await this.snapshotInfo(snapshotId);
    if (!info) {
      const running = await this.runInfo(sandboxId);
      if (!running) throw new RuntimeError(`sandbox ${sandboxId} is not running on this node`);
      const dir = this.dirOf(sandboxId);
      await mkdir(this.snapshotsDir, { recursive: true, mode: 0o700 });
      const making = `${path}.partial-${randomBytes(4).toString('hex')}`;
      await mkdir(making, { mode: 0o700 });
      // A disk-only snapshot asks the guest to flush and freeze its file systems first, so what it
      // wrote is on the disk; memory holds the guest's unwritten pages anyway.
      const frozen = memory ? null : await this.freeze(sandboxId);
      const qmp = await Qmp.open(this.socket(sandboxId, 'qmp.sock'));
      try {
        await qmp.execute('stop');
        if (memory) await this.migrateTo(qmp, join(making, 'memory'));
        await copyFile(join(dir, 'disk.qcow2'), join(making, 'disk.qcow2'));
        info = {
          sandboxId,
          memory,
          vcpus: running.vcpus,
          memoryMiB: running.memoryMiB,
          accel: running.accel,
          takenAt: new Date().toISOString(),
        };
        await writeFile(join(making, 'snapshot.json'), JSON.stringify(info), { mode: 0o600 });
        await rm(path, { recursive: true, force: true });
        await rename(making, path);
      } catch (error) {
        await rm(making, { recursive: true, force: true });
        throw error;
      } finally {
        // From paused or from a completed migration, cont gives the VM its disk back and runs it.
        await qmp
          .execute('cont')
          .catch((error: Error) => this.log(`bcd: ${sandboxId}: cont failed: ${error.message}`));
        qmp.close();
        if (frozen) {
          await frozen
            .execute('guest-fsfreeze-thaw')
            .catch((error: Error) =>
              this.log(`bcd: ${sandboxId}: thawing its file systems failed: ${error.message}`),
            );
          frozen.close();
        }
      }
    }
    let sizeBytes = 0;
    for (const name of await readdir(path)) sizeBytes += (await stat(join(path, name))).size;
    return { sandboxId, snapshotId, sizeBytes, memory: info.memory };
  }

  /** The guest's file systems flushed and frozen through its agent; null (and logged) when it cannot. */
  private async freeze(sandboxId: string): Promise<QmpConnection | null> {
    let agent: QmpConnection | null = null;
    try {
      agent = await waitForGuestAgent(this.socket(sandboxId, 'qga.sock'), 10_000);
      await agent.execute('guest-fsfreeze-freeze');
      return agent;
    } catch (error) {
      agent?.close();
      this.log(
        `bcd: ${sandboxId}: its file systems were not frozen for the snapshot: ${(error as Error).message}`,
      );
      return null;
    }
  }

  private async migrateTo(qmp: QmpConnection, file: string): Promise<void> {
    // A paused VM's pages go out as fast as the disk takes them, not at the default rate limit.
    await qmp.execute('migrate-set-parameters', { 'max-bandwidth': 64 * GiB });
    await qmp.execute('migrate', { uri: `exec:cat > ${quoted(file)}` });
    const deadline = Date.now() + 600_000;
    for (;;) {
      const state = (await qmp.execute('query-migrate')) as { status?: string; 'error-desc'?: string };
      if (state.status === 'completed') return;
      if (state.status === 'failed' || state.status === 'cancelled')
        throw new RuntimeError(`writing the memory image failed: ${state['error-desc'] ?? state.status}`);
      if (Date.now() > deadline) throw new RuntimeError('writing the memory image took too long');
      await sleep(20);
    }
  }

  async deleteSnapshot(snapshotId: string): Promise<SandboxCommandResults['sandbox.snapshot-delete']> {
    const path = this.snapshotDir(snapshotId);
    const removed = existsSync(path);
    await rm(path, { recursive: true, force: true });
    return { snapshotId, removed };
  }

  /** A TCP connection to the guest's sshd, through its forwarded loopback port. */
  async dialSsh(sandboxId: string): Promise<Duplex> {
    const info = await this.runInfo(sandboxId);
    if (!info) throw new RuntimeError(`sandbox ${sandboxId} is not running on this node`);
    return new Promise((resolve, reject) => {
      const socket = connect(info.sshPort, '127.0.0.1', () => resolve(socket));
      socket.once('error', reject);
    });
  }

  async adopt(): Promise<string[]> {
    const running: string[] = [];
    for (const name of await readdir(this.snapshotsDir).catch(() => [] as string[]))
      if (name.includes('.vm.partial-'))
        await rm(join(this.snapshotsDir, name), { recursive: true, force: true });
    for (const id of await readdir(this.sandboxesDir).catch(() => [] as string[])) {
      if (!SANDBOX_ID.test(id)) continue;
      if (await this.runInfo(id)) running.push(id);
      else await this.remove(id).catch(() => {});
    }
    if (running.length) this.log(`bcd: found ${running.length} running qemu sandbox(es) again`);
    return running;
  }
}
