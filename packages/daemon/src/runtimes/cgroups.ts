/**
 * Resource limits for the processes a runtime starts (a sandbox's pid 1, a VM's QEMU), in a cgroup
 * of their own under the daemon's group for that kind: CPU as a quota of cores, memory as a hard
 * limit. Written on cgroup v2 (`cpu.max`, `memory.max`) or on v1's cpu and memory hierarchies,
 * whichever the node mounts. A node whose cgroups cannot be written (no permission, no controller)
 * runs the process without limits: that is said in the log, never an error.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { rmdir } from 'node:fs/promises';
import { join } from 'node:path';

/** The daemon's groups: one per runtime kind, each holding a group per sandbox or instance. */
export type CgroupKind = 'bcd-sandboxes' | 'bcd-instances';

export interface CgroupLimits {
  /** Cores of CPU time per period (fractions allowed). */
  cpus: number;
  memoryMiB: number;
}

const ROOT = '/sys/fs/cgroup';
const PERIOD_US = 100_000;

function groupDirs(kind: CgroupKind, id: string): string[] {
  return existsSync(join(ROOT, 'cgroup.controllers'))
    ? [join(ROOT, kind, id)]
    : [join(ROOT, 'cpu', kind, id), join(ROOT, 'memory', kind, id)];
}

/** Moves `pid` (every thread of it) into the group for `id` with `limits`; false when not set. */
export function limitProcess(
  kind: CgroupKind,
  id: string,
  pid: number,
  limits: CgroupLimits,
  log: (line: string) => void,
): boolean {
  const quota = String(Math.max(1_000, Math.round(limits.cpus * PERIOD_US)));
  const memory = String(Math.round(limits.memoryMiB * 1024 * 1024));
  const writes: [string, string][] = existsSync(join(ROOT, 'cgroup.controllers'))
    ? [
        [join(ROOT, kind, id, 'cpu.max'), `${quota} ${PERIOD_US}`],
        [join(ROOT, kind, id, 'memory.max'), memory],
        [join(ROOT, kind, id, 'cgroup.procs'), String(pid)],
      ]
    : [
        [join(ROOT, 'cpu', kind, id, 'cpu.cfs_period_us'), String(PERIOD_US)],
        [join(ROOT, 'cpu', kind, id, 'cpu.cfs_quota_us'), quota],
        [join(ROOT, 'cpu', kind, id, 'cgroup.procs'), String(pid)],
        [join(ROOT, 'memory', kind, id, 'memory.limit_in_bytes'), memory],
        [join(ROOT, 'memory', kind, id, 'cgroup.procs'), String(pid)],
      ];
  for (const [path, value] of writes) {
    try {
      mkdirSync(join(path, '..'), { recursive: true });
      writeFileSync(path, value);
    } catch (error) {
      log(`bcd: ${id}: cgroup ${path} not set, so it runs without that limit: ${(error as Error).message}`);
      return false;
    }
  }
  return true;
}

/** The group's directories as the kernel shows them (for the limits a test reads back). */
export function cgroupDirs(kind: CgroupKind, id: string): string[] {
  return groupDirs(kind, id);
}

/**
 * Removes the group once its processes are gone (a cgroup is removed with rmdir, never rm -r). A
 * process just killed still counts until the kernel has reaped it, so a busy group is tried again
 * for a few seconds; one that stays busy is left and said in the log.
 */
export async function removeCgroup(
  kind: CgroupKind,
  id: string,
  log?: (line: string) => void,
): Promise<void> {
  for (const dir of groupDirs(kind, id)) {
    for (let attempt = 0; ; attempt++) {
      try {
        await rmdir(dir);
        break;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') break;
        if (code !== 'EBUSY' || attempt >= 50) {
          log?.(`bcd: ${id}: cgroup ${dir} not removed: ${(error as Error).message}`);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }
}
