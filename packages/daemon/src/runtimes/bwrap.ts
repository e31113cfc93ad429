/**
 * The bwrap runtime: sandboxes as bubblewrap namespaces over an overlay root. The image's root file
 * system (its disk, made raw once and mounted read-only by loop) is the overlay's lower layer, shared
 * by every sandbox of the image; each sandbox has its own upper layer, so its writes stay its own and
 * a disk snapshot is a copy of that layer. Each sandbox lives under `<state-dir>/sandboxes/<id>`:
 * the overlay's directories, `run.json` (its init's pid), and `ssh/` (its host key and certificate
 * and the sshd configuration the daemon writes), which the sandbox cannot see.
 *
 * The way in treats the sandbox as untrusted: for each connection the daemon runs the host's sshd in
 * inetd mode (`sshd -i`) with that configuration, so nothing of the sandbox's file system is read
 * by a privileged program; only after a user certificate for the sandbox id is accepted does its
 * forced command enter the sandbox's namespaces (`nsenter`) as the sandbox's root, which is root of
 * its own user namespace only. Sandboxes outlive the daemon: a restarted daemon finds them by pid.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import type {
  RuntimeImage,
  SandboxCommandPayload,
  SandboxCommandResults,
} from '@better-compute/core/runtime-commands';
import { limitProcess, removeCgroup } from './cgroups.js';
import type { SandboxDriver } from './driver.js';
import { writeSandboxSshConfig } from './bwrap-ssh.js';
import { ImageCache, RuntimeError } from './image-cache.js';
import { checkHostCertificate, idPath, makeHostKey, run, SANDBOX_ID, SNAPSHOT_ID } from './sandbox-keys.js';

const VOLUME_ID = /^vol_[A-Za-z0-9]{1,64}$/;
const GiB = 1024 ** 3;
const SSHD = '/usr/sbin/sshd';

interface RunInfo {
  /** The pid of bwrap's child: the sandbox's pid 1, whose namespaces `nsenter` joins. */
  pid: number;
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

/** Mount points now, from the kernel's table (octal escapes decoded). */
function mountPoints(): Set<string> {
  const points = new Set<string>();
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const field = line.split(' ')[4];
    if (field)
      points.add(
        field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))),
      );
  }
  return points;
}

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
  private readonly rootsDir: string;
  private readonly snapshotsDir: string;
  private readonly volumesDir: string;

  constructor(
    stateDir: string,
    readonly images: ImageCache,
    private readonly log: (line: string) => void = () => {},
  ) {
    this.sandboxesDir = join(stateDir, 'sandboxes');
    this.rootsDir = join(stateDir, 'image-roots');
    this.snapshotsDir = join(stateDir, 'snapshots');
    this.volumesDir = join(stateDir, 'volumes');
  }

  has(sandboxId: string): boolean {
    return SANDBOX_ID.test(sandboxId) && existsSync(this.dirOf(sandboxId));
  }

  private dirOf(sandboxId: string): string {
    return idPath(this.sandboxesDir, sandboxId, SANDBOX_ID, 'sandbox');
  }

  private async runInfo(sandboxId: string): Promise<RunInfo | null> {
    try {
      const info = JSON.parse(await readFile(join(this.dirOf(sandboxId), 'run.json'), 'utf8')) as RunInfo;
      return alive(info.pid) ? info : null;
    } catch {
      return null;
    }
  }

  /** The image's root, mounted read-only once per node: the lower layer of its sandboxes. */
  private async lowerOf(image: RuntimeImage, signal?: AbortSignal): Promise<string> {
    await this.images.fetchImage(image, signal);
    const dir = join(this.rootsDir, image.disk.sha256);
    const mnt = join(dir, 'root');
    if (mountPoints().has(mnt)) return mnt;
    await mkdir(mnt, { recursive: true, mode: 0o700 });
    let raw = this.images.pathOf(image.disk.sha256);
    if (image.diskFormat === 'qcow2') {
      raw = join(dir, 'disk.raw');
      if (!existsSync(raw)) {
        run(
          'qemu-img',
          ['convert', '-O', 'raw', this.images.pathOf(image.disk.sha256), `${raw}.partial`],
          'making the image raw',
        );
        run('mv', ['-f', `${raw}.partial`, raw], 'making the image raw');
      }
    }
    run('mount', ['-o', 'loop,ro,noload', raw, mnt], `mounting image ${image.imageId}`);
    return mnt;
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
    const lower = await this.lowerOf(spec.image, signal);
    // A create that failed half way starts again from nothing.
    await this.remove(spec.sandboxId);
    const upper = join(dir, 'upper');
    const work = join(dir, 'work');
    const root = join(dir, 'root');
    const ssh = join(dir, 'ssh');
    for (const path of [upper, work, root]) await mkdir(path, { recursive: true, mode: 0o700 });
    await mkdir(ssh, { recursive: true, mode: 0o700 });
    if (spec.fromSnapshot) {
      const archive = this.snapshotPath(spec.fromSnapshot.snapshotId);
      if (!existsSync(archive))
        throw new RuntimeError(`snapshot ${spec.fromSnapshot.snapshotId} is not on this node`);
      run('tar', ['-xpf', archive, '-C', upper], 'restoring the snapshot');
    }
    run(
      'mount',
      ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lower},upperdir=${upper},workdir=${work}`, root],
      'mounting the sandbox root',
    );
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
      const mnt = await this.volumeMount(volume.volumeId);
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
      const child = spawn('bwrap', args, { detached: true, stdio: ['ignore', 'ignore', errorsFd, 'pipe'] });
      closeSync(errorsFd);
      monitorPid = child.pid ?? null;
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
    });
    // bwrap says the child's pid before the child has made the sandbox's mounts: its set-up is done
    // once the sandbox's first program runs.
    const setUpBy = Date.now() + spec.readyTimeoutMs;
    const running = () => {
      try {
        // Either bwrap's pid 1 has started the program, or it is the program itself.
        if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'bwrap') return true;
        return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim() !== '';
      } catch {
        return false;
      }
    };
    while (!running()) {
      if (Date.now() > setUpBy || !alive(pid)) {
        await this.remove(spec.sandboxId);
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
    const netPid = spec.network === 'egress' ? await this.startEgress(spec.sandboxId, pid) : null;
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
        { encoding: 'utf8', timeout: spec.readyTimeoutMs },
      );
      if (result.status !== 0) {
        await this.remove(spec.sandboxId);
        throw new RuntimeError(
          `the sandbox's user data exited with ${result.status ?? 'a signal'}: ${(result.stderr || '').trim().slice(-400)}`,
        );
      }
    }
    const hostPublicKey = await makeHostKey(ssh, spec.sandboxId);
    await this.writeSshConfig(spec.sandboxId, spec.userCaPublicKey);
    const info: RunInfo = {
      pid,
      netPid,
      monitorPid,
      hostPublicKey,
      readyMs: Math.round(performance.now() - started),
      identityRebound: true,
      volumes: spec.volumes.map((volume) => volume.volumeId),
    };
    await writeFile(join(dir, 'run.json'), JSON.stringify(info), { mode: 0o600 });
    this.log(`bcd: sandbox ${spec.sandboxId} ready in ${info.readyMs} ms (pid ${pid})`);
    return { sandboxId: spec.sandboxId, hostPublicKey, readyMs: info.readyMs, identityRebound: true };
  }

  private async startEgress(sandboxId: string, pid: number): Promise<number> {
    if (spawnSync('sh', ['-c', 'command -v slirp4netns'], { stdio: 'ignore' }).status !== 0) {
      await this.remove(sandboxId);
      throw new RuntimeError('network egress needs slirp4netns on the node (apt-get install slirp4netns)');
    }
    return new Promise<number>((resolve, reject) => {
      const logFile = join(this.dirOf(sandboxId), 'slirp4netns.log');
      const logFd = openSync(logFile, 'w', 0o600);
      const child = spawn(
        'slirp4netns',
        ['--configure', '--mtu=65520', '--disable-host-loopback', '--ready-fd', '3', String(pid), 'tap0'],
        { detached: true, stdio: ['ignore', 'ignore', logFd, 'pipe'] },
      );
      closeSync(logFd);
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
    const info = await readFile(join(dir, 'run.json'), 'utf8')
      .then((text) => JSON.parse(text) as RunInfo)
      .catch(() => null);
    for (const pid of [info?.pid, info?.netPid, info?.monitorPid]) {
      if (!pid || !alive(pid)) continue;
      // The sandbox's pid 1: its pid namespace ends with it, and every process in it.
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
    }
    for (let i = 0; i < 100 && info?.pid && alive(info.pid); i += 1)
      await new Promise((r) => setTimeout(r, 20));
    const root = join(dir, 'root');
    if (mountPoints().has(root)) run('umount', ['-l', root], 'unmounting the sandbox root');
    await removeCgroup('bcd-sandboxes', sandboxId, this.log);
    await rm(dir, { recursive: true, force: true });
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

  private volumeDir(volumeId: string): string {
    return idPath(this.volumesDir, volumeId, VOLUME_ID, 'volume');
  }

  /** The volume's file system, mounted (again after a restart) where sandboxes bind it from. */
  private async volumeMount(volumeId: string): Promise<string> {
    const dir = this.volumeDir(volumeId);
    const mnt = join(dir, 'mnt');
    if (mountPoints().has(mnt)) return mnt;
    if (!existsSync(join(dir, 'disk.img'))) throw new RuntimeError(`volume ${volumeId} is not on this node`);
    await mkdir(mnt, { recursive: true, mode: 0o700 });
    run('mount', ['-o', 'loop', join(dir, 'disk.img'), mnt], `mounting volume ${volumeId}`);
    return mnt;
  }

  async createVolume(volumeId: string, sizeGiB: number): Promise<SandboxCommandResults['volume.create']> {
    const dir = this.volumeDir(volumeId);
    const disk = join(dir, 'disk.img');
    if (!existsSync(disk)) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      run('truncate', ['-s', `${sizeGiB}G`, `${disk}.partial`], 'making the volume');
      run(
        'mkfs.ext4',
        ['-q', '-F', '-m', '0', '-E', 'root_owner=0:0', `${disk}.partial`],
        'making the volume',
      );
      run('mv', ['-f', `${disk}.partial`, disk], 'making the volume');
    }
    await this.volumeMount(volumeId);
    return { volumeId, sizeBytes: (await stat(disk)).size };
  }

  async resizeVolume(volumeId: string, sizeGiB: number): Promise<SandboxCommandResults['volume.resize']> {
    const dir = this.volumeDir(volumeId);
    const disk = join(dir, 'disk.img');
    const current = (await stat(disk).catch(() => null))?.size;
    if (current === undefined) throw new RuntimeError(`volume ${volumeId} is not on this node`);
    if (sizeGiB * GiB < current)
      throw new RuntimeError(`volume ${volumeId} is ${current / GiB} GiB and never shrinks`);
    if (sizeGiB * GiB > current) {
      const mnt = await this.volumeMount(volumeId);
      run('truncate', ['-s', `${sizeGiB}G`, disk], 'growing the volume');
      // The loop device learns the file's new size, then the file system grows into it: online
      // where the kernel allows it, else unmounted, which needs no sandbox to be using it.
      const device = run('findmnt', ['-n', '-o', 'SOURCE', mnt], 'growing the volume').trim();
      run('losetup', ['-c', device], 'growing the volume');
      const online = spawnSync('resize2fs', [device], { encoding: 'utf8' });
      if (online.status !== 0) {
        const users = await this.volumeUsers(volumeId);
        if (users.length > 0)
          throw new RuntimeError(
            `volume ${volumeId} is in use by ${users.join(', ')}, and this node cannot grow a mounted file system; delete those sandboxes first`,
          );
        run('umount', [mnt], 'growing the volume');
        run('e2fsck', ['-f', '-y', disk], 'checking the volume');
        run('resize2fs', [disk], 'growing the volume');
        await this.volumeMount(volumeId);
      }
    }
    return { volumeId, sizeBytes: (await stat(disk)).size };
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

  async deleteVolume(volumeId: string): Promise<SandboxCommandResults['volume.delete']> {
    const dir = this.volumeDir(volumeId);
    const removed = existsSync(dir);
    const mnt = join(dir, 'mnt');
    if (mountPoints().has(mnt)) run('umount', ['-l', mnt], 'unmounting the volume');
    await rm(dir, { recursive: true, force: true });
    return { volumeId, removed };
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

  /** Sandboxes that run on from before the daemon started, and the volumes to mount again. */
  async adopt(): Promise<string[]> {
    const running: string[] = [];
    for (const id of await readdir(this.sandboxesDir).catch(() => [] as string[])) {
      if (!SANDBOX_ID.test(id)) continue;
      if (await this.runInfo(id)) running.push(id);
      else await this.remove(id).catch(() => {});
    }
    for (const id of await readdir(this.volumesDir).catch(() => [] as string[]))
      if (VOLUME_ID.test(id))
        await this.volumeMount(id).catch((error: Error) => this.log(`bcd: ${error.message}`));
    return running;
  }
}
