/**
 * The bwrap runtime: sandboxes as bubblewrap namespaces over an overlay root. The image's root file
 * system (its disk, made raw once and mounted read-only by loop) is the overlay's lower layer, shared
 * by every sandbox of the image; each sandbox has its own upper layer, so its writes stay its own and
 * a disk snapshot is a copy of that layer. Each sandbox lives under `<state-dir>/sandboxes/<id>`:
 * the overlay's directories, `run.json` (its init's pid), `spec.json` (what it is started from),
 * and `ssh/` (its host key and certificate and the sshd configuration the daemon writes), which
 * the sandbox cannot see.
 *
 * The way in treats the sandbox as untrusted: for each connection the daemon runs the host's sshd in
 * inetd mode (`sshd -i`) with that configuration, so nothing of the sandbox's file system is read
 * by a privileged program; only after a user certificate for the sandbox id is accepted does its
 * forced command enter the sandbox's namespaces (`nsenter`) as the sandbox's root, which is root of
 * its own user namespace only. Sandboxes outlive the daemon: a restarted daemon finds them by pid.
 * A sandbox whose processes are gone while its files are not (the machine restarted, or a daemon
 * that stops with its sandboxes, `bcd run --ephemeral`, stopped) is started again from its files
 * when the daemon starts: its upper layer, keys and configuration are kept; its processes are not.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import type { SandboxCommandPayload, SandboxCommandResults } from '@better-compute/core/runtime-commands';
import { limitProcess, removeCgroup } from './cgroups.js';
import type { SandboxDriver } from './driver.js';
import { SandboxFilesystems } from './bwrap-filesystems.js';
import { writeSandboxSshConfig } from './bwrap-ssh.js';
import { type EnvVariable, processEnv, readSandboxEnv, resolvedEnv, writeSandboxEnv } from './sandbox-env.js';
import { ImageCache, RuntimeError } from './image-cache.js';
import { Ledger, processStart, sameProcess } from './ledger.js';
import { checkHostCertificate, idPath, makeHostKey, run, SANDBOX_ID, SNAPSHOT_ID } from './sandbox-keys.js';

const SSHD = '/usr/sbin/sshd';

interface RunInfo {
  /** The pid of bwrap's child: the sandbox's pid 1, whose namespaces `nsenter` joins. */
  pid: number;
  /** Its start time (ledger.ts): a pid the kernel gave to another process since is not the sandbox. */
  start?: string | null;
  /** slirp4netns, giving an `egress` sandbox its outbound network. */
  netPid: number | null;
  /** bwrap's own process outside the sandbox, which waits for the sandbox's pid 1. */
  monitorPid?: number | null;
  hostPublicKey: string;
  readyMs: number;
  identityRebound: boolean;
  /** The volumes it mounts: a volume in use is grown only where the node allows it online. */
  volumes: string[];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether the sandbox's pid 1 still runs: its start time when recorded, else its pid alone. */
function running(info: RunInfo): boolean {
  return info.start ? sameProcess(info.pid, info.start) : alive(info.pid);
}

/** What a sandbox is started again from: its create's payload without its user data (run once). */
type SavedSpec = Pick<
  SandboxCommandPayload<'sandbox.create'>,
  'sandboxId' | 'image' | 'shape' | 'network' | 'volumes' | 'readyTimeoutMs'
>;

/** The sandbox's processes as a launch leaves them. */
type Launched = Pick<RunInfo, 'pid' | 'start' | 'netPid' | 'monitorPid'>;

/** Whether this machine has what the runtime needs: bubblewrap, sshd, nsenter, and root. */
export function bwrapAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  return (
    ['bwrap', 'nsenter', 'ssh-keygen'].every(
      (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0,
    ) && existsSync(SSHD)
  );
}

export class BwrapDriver implements SandboxDriver {
  private readonly sandboxesDir: string;
  private readonly snapshotsDir: string;
  private readonly ledger: Ledger;
  /** The image roots, the sandboxes' overlay roots and the volumes (bwrap-filesystems.ts). */
  private readonly filesystems: SandboxFilesystems;

  constructor(
    stateDir: string,
    readonly images: ImageCache,
    private readonly log: (line: string) => void = () => {},
  ) {
    this.sandboxesDir = join(stateDir, 'sandboxes');
    this.snapshotsDir = join(stateDir, 'snapshots');
    this.ledger = new Ledger(stateDir);
    this.filesystems = new SandboxFilesystems(stateDir, images, this.ledger);
  }

  has(sandboxId: string): boolean {
    return SANDBOX_ID.test(sandboxId) && existsSync(this.dirOf(sandboxId));
  }

  private dirOf(sandboxId: string): string {
    return idPath(this.sandboxesDir, sandboxId, SANDBOX_ID, 'sandbox');
  }

  /** The sandbox's run.json whether or not it runs. */
  private async lastRun(sandboxId: string): Promise<RunInfo | null> {
    try {
      return JSON.parse(await readFile(join(this.dirOf(sandboxId), 'run.json'), 'utf8')) as RunInfo;
    } catch {
      return null;
    }
  }

  /** The running sandbox's record; null when it does not run. */
  private async runInfo(sandboxId: string): Promise<RunInfo | null> {
    const info = await this.lastRun(sandboxId);
    return info && running(info) ? info : null;
  }

  async create(
    spec: SandboxCommandPayload<'sandbox.create'>,
    signal?: AbortSignal,
  ): Promise<SandboxCommandResults['sandbox.create']> {
    const started = performance.now();
    const dir = this.dirOf(spec.sandboxId);
    const existing = await this.runInfo(spec.sandboxId);
    if (existing)
      return {
        sandboxId: spec.sandboxId,
        hostPublicKey: existing.hostPublicKey,
        readyMs: existing.readyMs,
        identityRebound: existing.identityRebound,
      };
    if (spec.runtime !== 'bwrap')
      throw new RuntimeError(
        `this node runs sandboxes on bwrap only, and ${spec.sandboxId} asks for ${spec.runtime}`,
      );
    if (spec.fromSnapshot?.memory)
      throw new RuntimeError('a bwrap sandbox has no memory to restore: restore a disk snapshot');
    const env = resolvedEnv(spec.env);
    const lower = await this.filesystems.imageRoot(spec.image, signal);
    // A create that failed half way starts again from nothing.
    await this.remove(spec.sandboxId);
    const upper = join(dir, 'upper');
    const ssh = join(dir, 'ssh');
    for (const path of [upper, join(dir, 'work'), join(dir, 'root')])
      await mkdir(path, { recursive: true, mode: 0o700 });
    await mkdir(ssh, { recursive: true, mode: 0o700 });
    if (spec.fromSnapshot) {
      const archive = this.snapshotPath(spec.fromSnapshot.snapshotId);
      if (!existsSync(archive))
        throw new RuntimeError(`snapshot ${spec.fromSnapshot.snapshotId} is not on this node`);
      run('tar', ['-xpf', archive, '-C', upper], 'restoring the snapshot');
    }
    const saved: SavedSpec = {
      sandboxId: spec.sandboxId,
      image: spec.image,
      shape: spec.shape,
      network: spec.network,
      volumes: spec.volumes,
      readyTimeoutMs: spec.readyTimeoutMs,
    };
    let launched: Launched;
    try {
      await writeSandboxEnv(dir, env);
      launched = await this.launch(saved, lower, env);
    } catch (error) {
      await this.remove(spec.sandboxId);
      throw error;
    }
    const { pid } = launched;
    let info: RunInfo;
    try {
      if (spec.userData) {
        const result = spawnSync(
          'nsenter',
          [
            '-t',
            String(pid),
            '--all',
            '--preserve-credentials',
            '--wd=/',
            '--',
            '/bin/sh',
            '-c',
            spec.userData,
          ],
          { encoding: 'utf8', timeout: spec.readyTimeoutMs, env: processEnv(env) },
        );
        if (result.status !== 0)
          throw new RuntimeError(
            `the sandbox's user data exited with ${result.status ?? 'a signal'}: ${(result.stderr || '').trim().slice(-400)}`,
          );
      }
      const hostPublicKey = await makeHostKey(ssh, spec.sandboxId);
      await this.writeSshConfig(spec.sandboxId, spec.userCaPublicKey);
      info = {
        ...launched,
        hostPublicKey,
        readyMs: Math.round(performance.now() - started),
        identityRebound: true,
        volumes: spec.volumes.map((volume) => volume.volumeId),
      };
      await writeFile(join(dir, 'run.json'), JSON.stringify(info), { mode: 0o600 });
      // Written last: a sandbox with a spec.json is whole, and is started again from it after a stop.
      await writeFile(join(dir, 'spec.json'), JSON.stringify(saved), { mode: 0o600 });
    } catch (error) {
      // Its run.json may not be written yet: the processes the launch started are stopped by their pids.
      await this.halt(spec.sandboxId, launched);
      await this.remove(spec.sandboxId);
      throw error;
    }
    this.log(`bcd: sandbox ${spec.sandboxId} ready in ${info.readyMs} ms (pid ${pid})`);
    return {
      sandboxId: spec.sandboxId,
      hostPublicKey: info.hostPublicKey,
      readyMs: info.readyMs,
      identityRebound: true,
    };
  }

  /**
   * Starts the sandbox's processes over its files: the overlay root mounted on the image's, bwrap
   * with its namespaces and volumes, its cgroup limits and (for `egress`) its user-mode network.
   * Every process is in the ledger from the moment it is known. What it started is stopped again
   * when it fails.
   */
  private async launch(spec: SavedSpec, lower: string, env: readonly EnvVariable[]): Promise<Launched> {
    const dir = this.dirOf(spec.sandboxId);
    const root = this.filesystems.mountSandboxRoot(dir, lower);
    const args = [
      '--unshare-all',
      '--uid', '0', '--gid', '0',
      '--hostname', spec.sandboxId.replace(/_/g, '-').slice(0, 63),
      '--bind', root, '/',
      '--proc', '/proc',
      '--dev', '/dev',
      '--tmpfs', '/tmp',
      '--tmpfs', '/run',
      '--new-session',
    ]; // prettier-ignore
    for (const volume of spec.volumes) {
      const mnt = await this.filesystems.volumeMount(volume.volumeId);
      args.push(volume.readOnly ? '--ro-bind' : '--bind', mnt, volume.path);
    }
    // Commands that enter it start where its pid 1 is: root's home when the image has one.
    args.push('--chdir', existsSync(join(root, 'root')) ? '/root' : '/');
    args.push('--info-fd', '3', '--', '/bin/sh', '-c', 'exec sleep infinity');
    let monitorPid: number | null = null;
    const pid = await new Promise<number>((resolve, reject) => {
      // Its errors go to a file, not a pipe: a pipe would tie the sandbox to this daemon's life.
      const errorsFile = join(dir, 'bwrap.log');
      const errorsFd = openSync(errorsFile, 'w', 0o600);
      // Its environment is the base one and its secrets', never the daemon's own.
      const child = spawn('bwrap', args, {
        detached: true,
        stdio: ['ignore', 'ignore', errorsFd, 'pipe'],
        env: processEnv(env),
      });
      closeSync(errorsFd);
      monitorPid = child.pid ?? null;
      this.ledger.recordProcess(monitorPid, `bwrap of ${spec.sandboxId}`);
      let info = '';
      const infoStream = child.stdio[3] as NodeJS.ReadableStream & { destroy(): void };
      infoStream.setEncoding('utf8');
      // Read to its end: bwrap writes the whole document, then closes it; a reader gone early
      // would end bwrap with SIGPIPE half way through setting the sandbox up.
      infoStream.on('data', (chunk: string) => (info += chunk));
      infoStream.on('end', () => {
        const match = /"child-pid":\s*(\d+)/.exec(info);
        if (!match) return;
        child.removeAllListeners('exit');
        child.unref();
        resolve(Number(match[1]));
      });
      child.once('error', (error) => reject(new RuntimeError(`bwrap could not start: ${error.message}`)));
      child.once('exit', (code) => {
        const errors = existsSync(errorsFile) ? readFileSync(errorsFile, 'utf8') : '';
        reject(
          new RuntimeError(
            `bwrap exited with ${code} before the sandbox started: ${errors.trim().slice(-400)}`,
          ),
        );
      });
    }).catch(async (error: unknown) => {
      await this.halt(spec.sandboxId, { pid: 0, netPid: null, monitorPid });
      throw error;
    });
    this.ledger.recordProcess(pid, `sandbox ${spec.sandboxId}`);
    const start = processStart(pid);
    // bwrap says the child's pid before the child has made the sandbox's mounts: its set-up is done
    // once the sandbox's first program runs.
    const setUpBy = Date.now() + spec.readyTimeoutMs;
    const setUp = () => {
      try {
        // Either bwrap's pid 1 has started the program, or it is the program itself.
        if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'bwrap') return true;
        return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim() !== '';
      } catch {
        return false;
      }
    };
    while (!setUp()) {
      if (Date.now() > setUpBy || !alive(pid)) {
        await this.halt(spec.sandboxId, { pid, netPid: null, monitorPid });
        throw new RuntimeError(`the sandbox did not finish setting up within ${spec.readyTimeoutMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    limitProcess(
      'bcd-sandboxes',
      spec.sandboxId,
      pid,
      { cpus: spec.shape.vcpus, memoryMiB: spec.shape.memoryMiB },
      this.log,
    );
    // Its own network namespace always: loopback only for `none` and `private`; for `egress`, a
    // user-mode network (slirp4netns) whose outbound traffic leaves as the node's, with the node's
    // own loopback out of reach.
    let netPid: number | null = null;
    if (spec.network === 'egress') {
      try {
        netPid = await this.startEgress(spec.sandboxId, pid);
      } catch (error) {
        await this.halt(spec.sandboxId, { pid, netPid: null, monitorPid });
        throw error;
      }
    }
    return { pid, start, netPid, monitorPid };
  }

  private async startEgress(sandboxId: string, pid: number): Promise<number> {
    if (spawnSync('sh', ['-c', 'command -v slirp4netns'], { stdio: 'ignore' }).status !== 0)
      throw new RuntimeError('network egress needs slirp4netns on the node (apt-get install slirp4netns)');
    return new Promise<number>((resolve, reject) => {
      const logFile = join(this.dirOf(sandboxId), 'slirp4netns.log');
      const logFd = openSync(logFile, 'w', 0o600);
      const child = spawn(
        'slirp4netns',
        ['--configure', '--mtu=65520', '--disable-host-loopback', '--ready-fd', '3', String(pid), 'tap0'],
        { detached: true, stdio: ['ignore', 'ignore', logFd, 'pipe'] },
      );
      closeSync(logFd);
      this.ledger.recordProcess(child.pid, `slirp4netns of ${sandboxId}`);
      const ready = child.stdio[3] as NodeJS.ReadableStream & { destroy(): void };
      ready.once('data', () => {
        child.removeAllListeners('exit');
        ready.destroy();
        child.unref();
        resolve(child.pid!);
      });
      child.once('exit', (code) =>
        reject(
          new RuntimeError(
            `slirp4netns exited with ${code}: ${readFileSync(logFile, 'utf8').trim().slice(-300)}`,
          ),
        ),
      );
    });
  }

  private writeSshConfig(sandboxId: string, userCaPublicKey: string): Promise<void> {
    const dir = this.dirOf(sandboxId);
    return writeSandboxSshConfig(join(dir, 'ssh'), sandboxId, userCaPublicKey, join(dir, 'run.json'));
  }

  async certify(
    sandboxId: string,
    hostCertificate: string,
  ): Promise<SandboxCommandResults['sandbox.certify']> {
    const info = await this.runInfo(sandboxId);
    if (!info) throw new RuntimeError(`sandbox ${sandboxId} is not running on this node`);
    const ssh = join(this.dirOf(sandboxId), 'ssh');
    const expiresAt = await checkHostCertificate(ssh, hostCertificate);
    const userCa = (await readFile(join(ssh, 'user_ca.pub'), 'utf8')).trim();
    await this.writeSshConfig(sandboxId, userCa);
    return { sandboxId, expiresAt };
  }

  async delete(sandboxId: string): Promise<SandboxCommandResults['sandbox.delete']> {
    const removed = existsSync(this.dirOf(sandboxId));
    await this.remove(sandboxId);
    return { sandboxId, removed };
  }

  /** Stops the sandbox's processes and removes its root and keys; volumes and snapshots stay. */
  private async remove(sandboxId: string): Promise<void> {
    const dir = this.dirOf(sandboxId);
    await this.halt(sandboxId);
    await rm(dir, { recursive: true, force: true });
  }

  /**
   * Stops the sandbox's processes (those of its run.json, or `processes` of a launch that failed)
   * and unmounts its root; its files stay. Each process is killed only while it is the one started
   * (its start time in the ledger), never a process that took its pid since.
   */
  private async halt(sandboxId: string, processes?: Omit<Launched, 'start'>): Promise<void> {
    const dir = this.dirOf(sandboxId);
    const info = processes ?? (await this.lastRun(sandboxId));
    const pids = [info?.pid, info?.netPid, info?.monitorPid].filter((pid): pid is number => Boolean(pid));
    const recorded = this.ledger.entries();
    const isOurs = (pid: number) => {
      const entry = recorded.find((e) => e.kind === 'process' && e.pid === pid);
      if (entry?.kind === 'process') return sameProcess(pid, entry.start);
      // A process the ledger does not name (a sandbox from before it): as before, by pid.
      return alive(pid);
    };
    const killed: number[] = [];
    for (const pid of pids) {
      if (!isOurs(pid)) continue;
      // The sandbox's pid 1: its pid namespace ends with it, and every process in it.
      try {
        process.kill(pid, 'SIGKILL');
        killed.push(pid);
      } catch {
        /* gone already */
      }
    }
    // Until each is reaped too (a zombie still holds its pid and its namespaces' last references).
    for (let i = 0; i < 100 && killed.some((pid) => alive(pid)); i += 1)
      await new Promise((r) => setTimeout(r, 20));
    for (const pid of pids) this.ledger.forgetProcess(pid);
    this.filesystems.unmount(join(dir, 'root'), 'unmounting the sandbox root');
    await removeCgroup('bcd-sandboxes', sandboxId, this.log);
  }

  /**
   * Stops every sandbox's processes and unmounts every root, image and volume this driver mounted,
   * as a daemon that stops with its sandboxes does (`bcd run --ephemeral`, `bcd sweep`): the
   * sandboxes' files stay, and each is started again when the daemon starts. Answers how many ran.
   */
  async stopAll(): Promise<number> {
    let stopped = 0;
    for (const id of await readdir(this.sandboxesDir).catch(() => [] as string[])) {
      if (!SANDBOX_ID.test(id)) continue;
      if (await this.runInfo(id)) stopped += 1;
      await this.halt(id);
    }
    await this.filesystems.unmountShared();
    return stopped;
  }

  /**
   * Starts a sandbox whose processes are gone again from its files; false when it is not whole (a
   * create that did not finish), which is removed.
   */
  private async restart(sandboxId: string): Promise<boolean> {
    const dir = this.dirOf(sandboxId);
    let spec: SavedSpec;
    try {
      spec = JSON.parse(await readFile(join(dir, 'spec.json'), 'utf8')) as SavedSpec;
    } catch {
      return false;
    }
    const last = await this.lastRun(sandboxId);
    if (!last) return false;
    await this.halt(sandboxId);
    const started = performance.now();
    const lower = await this.filesystems.imageRoot(spec.image);
    const launched = await this.launch(spec, lower, readSandboxEnv(dir));
    const info: RunInfo = { ...last, ...launched, readyMs: Math.round(performance.now() - started) };
    await writeFile(join(dir, 'run.json'), JSON.stringify(info), { mode: 0o600 });
    this.log(`bcd: sandbox ${sandboxId} started again from its files (pid ${launched.pid})`);
    return true;
  }

  private snapshotPath(snapshotId: string): string {
    return idPath(this.snapshotsDir, snapshotId, SNAPSHOT_ID, 'snapshot', '.tar');
  }

  async snapshot(
    sandboxId: string,
    snapshotId: string,
    memory: boolean,
  ): Promise<SandboxCommandResults['sandbox.snapshot']> {
    if (memory) throw new RuntimeError('a bwrap sandbox has no memory to snapshot: take a disk snapshot');
    const path = this.snapshotPath(snapshotId);
    if (!existsSync(path)) {
      const upper = join(this.dirOf(sandboxId), 'upper');
      if (!existsSync(upper)) throw new RuntimeError(`sandbox ${sandboxId} is not on this node`);
      await mkdir(this.snapshotsDir, { recursive: true, mode: 0o700 });
      run('tar', ['--numeric-owner', '-cpf', `${path}.partial`, '-C', upper, '.'], 'taking the snapshot');
      run('mv', ['-f', `${path}.partial`, path], 'taking the snapshot');
    }
    return { sandboxId, snapshotId, sizeBytes: (await stat(path)).size, memory: false };
  }

  async deleteSnapshot(snapshotId: string): Promise<SandboxCommandResults['sandbox.snapshot-delete']> {
    const path = this.snapshotPath(snapshotId);
    const removed = existsSync(path);
    await rm(path, { force: true });
    return { snapshotId, removed };
  }

  createVolume(volumeId: string, sizeGiB: number): Promise<SandboxCommandResults['volume.create']> {
    return this.filesystems.createVolume(volumeId, sizeGiB);
  }

  resizeVolume(volumeId: string, sizeGiB: number): Promise<SandboxCommandResults['volume.resize']> {
    return this.filesystems.resizeVolume(volumeId, sizeGiB, (id) => this.volumeUsers(id));
  }

  /** Running sandboxes that mount the volume. */
  private async volumeUsers(volumeId: string): Promise<string[]> {
    const users: string[] = [];
    for (const id of await readdir(this.sandboxesDir).catch(() => [] as string[])) {
      if (!SANDBOX_ID.test(id)) continue;
      if ((await this.runInfo(id))?.volumes?.includes(volumeId)) users.push(id);
    }
    return users;
  }

  deleteVolume(volumeId: string): Promise<SandboxCommandResults['volume.delete']> {
    return this.filesystems.deleteVolume(volumeId);
  }

  /**
   * A connection to the sandbox's SSH server: the host's sshd in inetd mode with the sandbox's own
   * configuration, its standard input and output the connection's bytes.
   */
  async dialSsh(sandboxId: string): Promise<Duplex> {
    const info = await this.runInfo(sandboxId);
    if (!info) throw new RuntimeError(`sandbox ${sandboxId} is not running on this node`);
    const config = join(this.dirOf(sandboxId), 'ssh', 'sshd_config');
    // sshd refuses to run without its privilege separation directory, which lives on /run and is
    // gone on a machine where no sshd service made it since boot.
    mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
    const child = spawn(SSHD, ['-i', '-f', config], { stdio: ['pipe', 'pipe', 'pipe'] });
    let said = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (said = (said + chunk).slice(-500)));
    const duplex = Duplex.from({ readable: child.stdout, writable: child.stdin });
    duplex.on('close', () => child.kill('SIGTERM'));
    child.once('exit', (code) => {
      if (code !== 0 && code !== null && said.trim())
        this.log(`bcd: sandbox ${sandboxId}: sshd exited with ${code}: ${said.trim()}`);
      duplex.destroy();
    });
    return duplex;
  }

  /**
   * Sandboxes that run on from before the daemon started, and the volumes to mount again. A whole
   * sandbox whose processes are gone is started again from its files; what a create left half made
   * goes.
   */
  async adopt(): Promise<string[]> {
    const found: string[] = [];
    await this.filesystems.mountVolumes(this.log);
    for (const id of await readdir(this.sandboxesDir).catch(() => [] as string[])) {
      if (!SANDBOX_ID.test(id)) continue;
      if (await this.runInfo(id)) {
        found.push(id);
        continue;
      }
      try {
        if (await this.restart(id)) found.push(id);
        else await this.remove(id);
      } catch (error) {
        // Its files (the sandbox's own writes) stay for a later start or a delete.
        this.log(`bcd: sandbox ${id} could not be started again: ${(error as Error).message}`);
      }
    }
    return found;
  }
}
