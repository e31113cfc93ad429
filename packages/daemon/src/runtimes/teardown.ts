/**
 * A daemon that stops with its workloads (`bcd run --ephemeral`, what `dev --node` runs) leaves
 * nothing of them on the machine: at stop, and at start for what a killed run left, it sweeps.
 * `bcd sweep` does the same for a daemon that no longer runs.
 *
 * In order: the drivers stop what the state directory's records name (VMs by their pidfiles,
 * sandboxes by their run.json, the mounts of image roots, sandbox roots and volumes); then the
 * ledger's leftovers (ledger.ts: processes by pid and start time, mounts, instance networks); then
 * what neither names but the kernel shows: QEMU, bwrap, slirp4netns and sshd processes whose
 * command line names the state or runtime directory, mounts under either, loop devices backed by a
 * file under the state directory. Last the runtime directory (the VMs' sockets) and, when no
 * instance network is left on the machine, the nftables table. Files in the state directory (disks,
 * a sandbox's own writes, keys) stay: the next start uses them.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { BwrapDriver } from './bwrap.js';
import { Ledger, sameProcess } from './ledger.js';
import { QemuDriver } from './qemu.js';
import { QemuSandboxDriver } from './qemu-sandbox.js';

export interface SweepOptions {
  stateDir: string;
  runtimeDir: string;
  log: (line: string) => void;
  /** How long each VM's guest has to power off after the ACPI button before QEMU is ended. */
  graceMs: number;
  /** The running daemon's own drivers, when it has them (they know what is in flight). */
  drivers?: { qemu: QemuDriver; qemuSandboxes: QemuSandboxDriver; bwrap: BwrapDriver | null };
  instanceRange?: string | undefined;
  /**
   * Whether the nftables table goes when no instance network is left (default true). A starting
   * daemon keeps it: it writes the table again at once (QemuDriver.adopt).
   */
  removeTable?: boolean;
}

/** What a sweep stopped or removed; all zero when there was nothing. */
export interface SweepReport {
  vms: number;
  sandboxes: number;
  processes: number;
  mounts: number;
  loopDevices: number;
  networks: number;
  nftTable: boolean;
}

/** The programs a runtime starts; only these are ended for naming the state or runtime directory. */
const RUNTIME_PROGRAMS = new Set(['qemu-system-x86', 'qemu-system-x86_64', 'bwrap', 'slirp4netns', 'sshd']);

const under = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);

/** Mount points now (octal escapes decoded), from the kernel's table. */
function mountPoints(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter(Boolean)
    .map((field) =>
      field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))),
    );
}

/** Processes of the runtime programs whose command line names one of `dirs`, other than this one. */
function runtimeProcesses(dirs: string[]): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      if (!RUNTIME_PROGRAMS.has(comm)) continue;
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (args.some((arg) => dirs.some((dir) => arg.includes(`${dir}/`)))) found.push(Number(name));
    } catch {
      // Gone while the table was read.
    }
  }
  return found;
}

/** Loop devices whose backing file lies under `dir`. */
function loopDevices(dir: string): string[] {
  const listed = spawnSync('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE'], {
    encoding: 'utf8',
  });
  if (listed.status !== 0 || !listed.stdout.trim()) return [];
  try {
    const devices = (JSON.parse(listed.stdout) as { loopdevices?: { name: string; 'back-file'?: string }[] })
      .loopdevices;
    return (devices ?? [])
      .filter((device) => device['back-file'] && under(device['back-file'].replace(/ \(deleted\)$/, ''), dir))
      .map((device) => device.name);
  } catch {
    return [];
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function sweep(options: SweepOptions): Promise<SweepReport> {
  const stateDir = resolve(options.stateDir);
  const runtimeDir = resolve(options.runtimeDir);
  const { log } = options;
  const report: SweepReport = {
    vms: 0,
    sandboxes: 0,
    processes: 0,
    mounts: 0,
    loopDevices: 0,
    networks: 0,
    nftTable: false,
  };
  const qemu = options.drivers?.qemu ?? new QemuDriver(stateDir, log, options.instanceRange, runtimeDir);
  const qemuSandboxes =
    options.drivers?.qemuSandboxes ?? new QemuSandboxDriver(stateDir, qemu.images, log, runtimeDir);
  // Its stopAll needs no bubblewrap, only umount: what another daemon's bwrap made is swept too.
  const bwrap = options.drivers ? options.drivers.bwrap : new BwrapDriver(stateDir, qemu.images, log);
  const step = async <T>(what: string, work: () => Promise<T>, otherwise: T): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      log(`bcd: sweeping ${what} failed: ${(error as Error).message}`);
      return otherwise;
    }
  };
  report.vms = await step('the VMs', () => qemu.stopAll(options.graceMs), 0);
  report.sandboxes += await step('the qemu sandboxes', () => qemuSandboxes.stopAll(), 0);
  if (bwrap) report.sandboxes += await step('the bwrap sandboxes', () => bwrap.stopAll(), 0);

  // What the ledger still names: made by a daemon killed before it wrote the records above.
  const ledger = new Ledger(stateDir);
  for (const entry of ledger.entries()) {
    if (entry.kind === 'process') {
      if (sameProcess(entry.pid, entry.start)) {
        try {
          process.kill(entry.pid, 'SIGKILL');
          report.processes += 1;
        } catch {
          /* gone already */
        }
      }
      ledger.forgetProcess(entry.pid);
    } else if (entry.kind === 'network') {
      const net = entry.net;
      if (existsNet(net.name)) report.networks += 1;
      await step(`network ${net.name}`, () => qemu.network.down(net), undefined);
      ledger.forgetNetwork(net.name);
    }
  }

  // What nothing names but the kernel shows.
  const dirs = [stateDir, runtimeDir];
  const strays = runtimeProcesses(dirs);
  for (const pid of strays) {
    try {
      process.kill(pid, 'SIGKILL');
      report.processes += 1;
    } catch {
      /* gone already */
    }
  }
  for (let i = 0; i < 100 && runtimeProcesses(dirs).length > 0; i += 1) await sleep(20);
  // Deepest first, so a mount on top of another (a volume in a sandbox root) goes before it.
  const mounts = mountPoints()
    .filter((point) => dirs.some((dir) => under(point, dir)) && !dirs.includes(point))
    .sort((a, b) => b.length - a.length);
  for (const point of [...new Set(mounts)]) {
    const done = spawnSync('umount', [point], { stdio: 'ignore' });
    if (done.status !== 0) spawnSync('umount', ['-l', point], { stdio: 'ignore' });
    report.mounts += 1;
  }
  for (const entry of ledger.entries()) if (entry.kind === 'mount') ledger.forgetMount(entry.path);
  // A loop mount frees its device once its last user is gone, a moment after the unmount; one
  // still attached then is detached, which the kernel completes once the device is closed.
  for (let i = 0; i < 50 && loopDevices(stateDir).length > 0; i += 1) await sleep(40);
  for (const device of loopDevices(stateDir)) {
    spawnSync('losetup', ['--detach', device], { stdio: 'ignore' });
    report.loopDevices += 1;
  }
  for (let i = 0; i < 125 && loopDevices(stateDir).length > 0; i += 1) await sleep(40);
  for (const device of loopDevices(stateDir))
    log(`bcd: loop device ${device} is still in use; the kernel frees it when its last user closes it`);

  rmSync(runtimeDir, { recursive: true, force: true });
  // The shared parent (/run/better-compute, …/better-compute) goes once no daemon has a directory in it.
  if (basename(dirname(runtimeDir)).startsWith('better-compute')) {
    try {
      rmdirSync(dirname(runtimeDir));
    } catch {
      // Another daemon's runtime directory is in it.
    }
  }
  if (options.removeTable !== false)
    report.nftTable = await step('the nftables table', () => qemu.network.removeTableIfUnused(), false);
  const said = describe(report);
  if (said) log(`bcd: swept ${said}`);
  return report;
}

function existsNet(name: string): boolean {
  try {
    return readdirSync('/run/netns').includes(name);
  } catch {
    return false;
  }
}

/** The report in words: `2 VMs, 1 sandbox, 3 mounts`; empty when nothing was swept. */
function describe(report: SweepReport): string {
  const counted: [number, string][] = [
    [report.vms, 'VM'],
    [report.sandboxes, 'sandbox'],
    [report.processes, 'stray process'],
    [report.mounts, 'stray mount'],
    [report.loopDevices, 'loop device'],
    [report.networks, 'instance network'],
  ];
  const parts = counted
    .filter(([n]) => n > 0)
    .map(([n, noun]) => `${n} ${noun}${n === 1 ? '' : /[xs]$/.test(noun) ? 'es' : 's'}`);
  if (report.nftTable) parts.push('the nftables table ip better_compute');
  return parts.join(', ');
}
