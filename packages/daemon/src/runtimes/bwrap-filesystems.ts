/**
 * The bwrap runtime's file systems on the node (bwrap.ts runs the sandboxes on them): each image's
 * root, made raw once and loop-mounted read-only under `<state-dir>/image-roots/<sha256>/root`, the
 * lower layer every sandbox of the image shares; each sandbox's overlay root, its own upper layer on
 * that lower one; and the volumes, sparse ext4 files under `<state-dir>/volumes/<id>` loop-mounted
 * on `mnt`, from where sandboxes bind them. Every mount is noted in the ledger (ledger.ts) before it
 * is made and dropped once it is gone, so a daemon killed half way leaves a mount a sweep finds.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { RuntimeImage, SandboxCommandResults } from '@better-compute/core/runtime-commands';
import { ImageCache, RuntimeError } from './image-cache.js';
import type { Ledger } from './ledger.js';
import { idPath, run } from './sandbox-keys.js';

const VOLUME_ID = /^vol_[A-Za-z0-9]{1,64}$/;
const GiB = 1024 ** 3;

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

export class SandboxFilesystems {
  private readonly rootsDir: string;
  private readonly volumesDir: string;

  constructor(
    stateDir: string,
    private readonly images: ImageCache,
    private readonly ledger: Ledger,
  ) {
    this.rootsDir = join(stateDir, 'image-roots');
    this.volumesDir = join(stateDir, 'volumes');
  }

  /** Mounts, noted in the ledger first, so a daemon killed half way leaves a mount a sweep finds. */
  private mount(args: string[], point: string, what: string): void {
    this.ledger.record({ kind: 'mount', path: point });
    run('mount', [...args, point], what);
  }
  /**
   * Unmounts at once when nothing uses the mount (a loop device is then released with it), else
   * lazily: it goes when its last user does.
   */
  unmount(point: string, what: string): void {
    if (mountPoints().has(point) && spawnSync('umount', [point], { stdio: 'ignore' }).status !== 0)
      run('umount', ['-l', point], what);
    this.ledger.forgetMount(point);
  }

  /** The image's root, mounted read-only once per node: the lower layer of its sandboxes. */
  async imageRoot(image: RuntimeImage, signal?: AbortSignal): Promise<string> {
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
    this.mount(['-o', 'loop,ro,noload', raw], mnt, `mounting image ${image.imageId}`);
    return mnt;
  }

  /**
   * The sandbox's root, `<dir>/root`: an overlay of its own upper layer (`<dir>/upper`) on the
   * image's root `lower`, mounted unless it is already.
   */
  mountSandboxRoot(dir: string, lower: string): string {
    const root = join(dir, 'root');
    // The overlay's options are split at commas and its lower layers at colons.
    if (/[,:]/.test(`${lower}${dir}`))
      throw new RuntimeError(
        `the state directory path ${dir.slice(0, 200)} holds a comma or a colon, which an overlay mount cannot take; give bcd a --state-dir without one`,
      );
    if (!mountPoints().has(root))
      this.mount(
        [
          '-t',
          'overlay',
          'overlay',
          '-o',
          `lowerdir=${lower},upperdir=${join(dir, 'upper')},workdir=${join(dir, 'work')}`,
        ],
        root,
        'mounting the sandbox root',
      );
    return root;
  }

  /** Unmounts every image root and volume, as a daemon that stops with its sandboxes does. */
  async unmountShared(): Promise<void> {
    for (const sha of await readdir(this.rootsDir).catch(() => [] as string[]))
      this.unmount(join(this.rootsDir, sha, 'root'), 'unmounting an image root');
    for (const id of await readdir(this.volumesDir).catch(() => [] as string[]))
      if (VOLUME_ID.test(id)) this.unmount(join(this.volumesDir, id, 'mnt'), `unmounting volume ${id}`);
  }

  /** Mounts every volume of the node again (a daemon starting after the machine restarted). */
  async mountVolumes(log: (line: string) => void): Promise<void> {
    for (const id of await readdir(this.volumesDir).catch(() => [] as string[]))
      if (VOLUME_ID.test(id))
        await this.volumeMount(id).catch((error: Error) => log(`bcd: ${error.message}`));
  }

  private volumeDir(volumeId: string): string {
    return idPath(this.volumesDir, volumeId, VOLUME_ID, 'volume');
  }

  /** The volume's file system, mounted (again after a restart) where sandboxes bind it from. */
  async volumeMount(volumeId: string): Promise<string> {
    const dir = this.volumeDir(volumeId);
    const mnt = join(dir, 'mnt');
    if (mountPoints().has(mnt)) return mnt;
    if (!existsSync(join(dir, 'disk.img'))) throw new RuntimeError(`volume ${volumeId} is not on this node`);
    await mkdir(mnt, { recursive: true, mode: 0o700 });
    this.mount(['-o', 'loop', join(dir, 'disk.img')], mnt, `mounting volume ${volumeId}`);
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

  /**
   * Grows the volume: online where the kernel allows it, else unmounted, which needs no sandbox
   * (`users` answers the running ones that mount it) to be using it.
   */
  async resizeVolume(
    volumeId: string,
    sizeGiB: number,
    users: (volumeId: string) => Promise<string[]>,
  ): Promise<SandboxCommandResults['volume.resize']> {
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
        const using = await users(volumeId);
        if (using.length > 0)
          throw new RuntimeError(
            `volume ${volumeId} is in use by ${using.join(', ')}, and this node cannot grow a mounted file system; delete those sandboxes first`,
          );
        run('umount', [mnt], 'growing the volume');
        run('e2fsck', ['-f', '-y', disk], 'checking the volume');
        run('resize2fs', [disk], 'growing the volume');
        await this.volumeMount(volumeId);
      }
    }
    return { volumeId, sizeBytes: (await stat(disk)).size };
  }

  async deleteVolume(volumeId: string): Promise<SandboxCommandResults['volume.delete']> {
    const dir = this.volumeDir(volumeId);
    const removed = existsSync(dir);
    this.unmount(join(dir, 'mnt'), 'unmounting the volume');
    await rm(dir, { recursive: true, force: true });
    return { volumeId, removed };
  }
}
