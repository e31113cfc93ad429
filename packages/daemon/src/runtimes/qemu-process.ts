/**
 * Starting QEMU and what its command line needs: the machine instances and sandboxes share, the
 * launch that waits for it to daemonize, the GPUs it passes through, and the SSH banner that tells
 * an adopted guest is up.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { RuntimeError } from './image-cache.js';
import { qmpOnce } from './qmp.js';
import { socketPath } from './runtime-dir.js';

/** Only the printable tail of the console goes into an error message. */
export function tail(text: string, length = 1500): string {
  return text.slice(-length).replace(/[^\n\t -~]/g, '');
}

/** True when the port answers with an SSH identification line. */
export function sshBanner(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    const done = (seen: boolean) => {
      socket.destroy();
      resolve(seen);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('data', (chunk: Buffer) => done(chunk.toString('latin1').startsWith('SSH-')));
    socket.once('error', () => done(false));
    socket.once('close', () => done(false));
  });
}

/**
 * Starts QEMU, which daemonizes once its sockets exist; fails with what it printed. In `netns` when
 * given (an instance's namespace, where its tap device is): the daemonized QEMU stays in it.
 */
export function launch(args: string[], netns?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const [command, argv] = netns
      ? ['ip', ['netns', 'exec', netns, 'qemu-system-x86_64', ...args]]
      : ['qemu-system-x86_64', args];
    const child = spawn(command, argv, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C' },
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new RuntimeError(`QEMU did not start: ${error.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new RuntimeError(`QEMU exited with ${code}: ${tail(stderr, 1000).trim()}`));
    });
  });
}

/**
 * GPUs go to the guest by VFIO: each id must be a PCI address whose device the host has bound to
 * vfio-pci. Anything else is refused, rather than starting a VM without the GPUs it holds.
 */
export function passthroughArgs(gpus: string[]): string[] {
  const args: string[] = [];
  for (const gpu of gpus) {
    if (!/^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/.test(gpu))
      throw new RuntimeError(`GPU ${gpu.slice(0, 64)} is not a PCI address this runtime can pass through`);
    let driver = '';
    try {
      driver = readlinkSync(`/sys/bus/pci/devices/${gpu}/driver`).split('/').at(-1) ?? '';
    } catch {
      driver = '';
    }
    if (driver !== 'vfio-pci')
      throw new RuntimeError(
        `GPU ${gpu} is not bound to vfio-pci on this node, so it cannot be passed through`,
      );
    args.push('-device', `vfio-pci,host=${gpu}`);
  }
  return args;
}

/** Memory QEMU needs beside the guest's: with TCG, its cache of translated code above all. */
export function qemuOverheadMiB(accel: 'kvm' | 'tcg'): number {
  return accel === 'tcg' ? 1024 : 256;
}

export interface MachineOptions {
  name: string;
  /** Holds disk.qcow2 and seed.iso, and gets the pidfile. */
  dir: string;
  /**
   * Gets the QMP and console sockets (and a sandbox's guest agent's): a directory of the daemon's
   * short runtime directory (runtime-dir.ts), so their paths fit a unix socket whatever the state
   * directory's length. `dir` when not given.
   */
  sockets?: string;
  accel: 'kvm' | 'tcg';
  vcpus: number;
  memoryMiB: number;
  /** A kernel booted directly (PVH), or null for the disk's own boot loader. */
  boot: { kernel: string; initrd: string | null; cmdline: string } | null;
  /**
   * The guest's NIC: QEMU's user-mode networking with SSH forwarded from a loopback port (sandboxes;
   * `restrict`: no way out, only the node's forwards reach the guest), or the tap device of the
   * instance's network namespace, with the MAC its network-config names.
   */
  network: { user: { sshPort: number; restrict: boolean } } | { tap: { ifname: string; mac: string } };
  /**
   * The serial console: a socket the daemon reads into its own ring (instances, for `console`), or
   * a ring QEMU keeps itself, read over QMP when a failure needs it (sandboxes).
   */
  console: 'socket' | 'ring';
  /** More arguments (devices, -S, -incoming). */
  extra: string[];
}

function netArgs(network: MachineOptions['network']): string[] {
  if ('tap' in network)
    return [
      '-netdev', `tap,id=net0,ifname=${network.tap.ifname},script=no,downscript=no`,
      '-device', `virtio-net-pci,netdev=net0,mac=${network.tap.mac}`,
    ]; // prettier-ignore
  const { sshPort, restrict } = network.user;
  return [
    '-netdev', `user,id=net0,${restrict ? 'restrict=on,ipv6=off,' : ''}hostfwd=tcp:127.0.0.1:${sshPort}-:22`,
    '-device', 'virtio-net-pci,netdev=net0',
  ]; // prettier-ignore
}

/**
 * The command line of a VM: q35 with vmgenid (a restored guest learns it was restored), a virtio
 * disk over the directory's qcow2 overlay and the NoCloud seed, a virtio NIC (see `network`), a
 * virtio RNG, QMP on a socket; QEMU daemonizes.
 */
export function machineArgs(options: MachineOptions): string[] {
  const { dir } = options;
  const sockets = options.sockets ?? dir;
  // QEMU splits its options at commas, so a path with one would change what an option says.
  if (dir.includes(','))
    throw new RuntimeError(
      'the state directory path has a comma, which QEMU options cannot hold; give bcd a --state-dir without one',
    );
  const boot = options.boot;
  return [
    '-name', options.name,
    '-machine', `q35,accel=${options.accel}`,
    '-cpu', options.accel === 'kvm' ? 'host' : 'max',
    '-smp', String(options.vcpus),
    '-m', String(options.memoryMiB),
    '-nodefaults', '-no-user-config', '-display', 'none',
    ...(boot
      ? ['-kernel', boot.kernel, ...(boot.initrd ? ['-initrd', boot.initrd] : []), '-append', boot.cmdline]
      : []),
    '-device', 'vmgenid',
    '-drive', `file=${join(dir, 'disk.qcow2')},if=none,id=root,format=qcow2,discard=unmap`,
    '-device', 'virtio-blk-pci,drive=root',
    '-drive', `file=${join(dir, 'seed.iso')},if=none,id=seed,format=raw,readonly=on`,
    '-device', 'virtio-blk-pci,drive=seed',
    ...netArgs(options.network),
    '-device', 'virtio-rng-pci',
    '-chardev',
    options.console === 'socket'
      ? `socket,id=console,path=${socketPath(sockets, 'console.sock')},server=on,wait=off`
      : 'ringbuf,id=console,size=65536',
    '-serial', 'chardev:console',
    '-qmp', `unix:${socketPath(sockets, 'qmp.sock')},server=on,wait=off`,
    '-pidfile', join(dir, 'qemu.pid'),
    '-daemonize',
    ...options.extra,
  ]; // prettier-ignore
}

/**
 * The pid of the QEMU running the VM of `dir` when it runs: the pidfile's process, alive and not a
 * zombie, whose command line names that pidfile (a reused pid is not taken for it).
 */
export function qemuPid(dir: string): number | null {
  try {
    const pid = Number(readFileSync(join(dir, 'qemu.pid'), 'utf8').trim());
    if (!Number.isInteger(pid) || pid <= 1) return null;
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return null;
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.includes(join(dir, 'qemu.pid')) ? pid : null;
  } catch {
    return null;
  }
}

/** Whether the VM of `dir` has stopped within `ms`. */
export async function qemuExited(dir: string, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (qemuPid(dir) === null) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** QMP quit, then SIGKILL: the VM of `dir` (its QMP socket in `sockets`) is gone when this returns. */
export async function endQemu(dir: string, name: string, sockets = dir): Promise<void> {
  await qmpOnce(join(sockets, 'qmp.sock'), 'quit').catch(() => undefined);
  if (await qemuExited(dir, 5_000)) return;
  const pid = qemuPid(dir);
  if (pid !== null) process.kill(pid, 'SIGKILL');
  if (!(await qemuExited(dir, 10_000))) throw new RuntimeError(`QEMU for ${name} did not exit`);
}

let kvmProbe: Promise<boolean> | undefined;
/** True when /dev/kvm exists and QEMU can start a KVM machine on it (a nested VM often cannot); probed once. */
function kvmStarts(): Promise<boolean> {
  kvmProbe ??= !existsSync('/dev/kvm')
    ? Promise.resolve(false)
    : new Promise((resolve) => {
        const probe = spawn(
          'qemu-system-x86_64',
          // A q35 machine with the host's CPU, as the runtime starts it: some nested hosts open
          // /dev/kvm yet fail to set the vCPU's registers, which only a real machine shows.
          ['-machine', 'q35,accel=kvm', '-cpu', 'host', '-m', '64', '-nodefaults', '-display', 'none', '-S', '-qmp', 'stdio'],
          { stdio: ['pipe', 'ignore', 'ignore'], timeout: 15_000 },
        ); // prettier-ignore
        probe.on('error', () => resolve(false));
        probe.on('close', (code) => resolve(code === 0));
        probe.stdin.end('{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n');
      });
  return kvmProbe;
}

/** How long a kernel may take under KVM to reach the panic that ends a boot without a root disk. */
const KERNEL_PROBE_MS = 10_000;
const kernelProbes = new Map<string, Promise<boolean>>();

/**
 * True when KVM runs this kernel: booted with no root disk, a working machine reaches the kernel's
 * "cannot mount root" panic within a second or two. Some hosts start a KVM machine and then never
 * run the guest's kernel (it hangs before its first line); a boot probe is the only sure test.
 */
function kvmBoots(kernel: string): Promise<boolean> {
  let probe = kernelProbes.get(kernel);
  if (!probe) {
    probe = new Promise((resolve) => {
      const child = spawn(
        'qemu-system-x86_64',
        ['-machine', 'q35,accel=kvm', '-cpu', 'host', '-m', '256', '-nodefaults', '-no-user-config',
          '-display', 'none', '-kernel', kernel, '-append', 'console=ttyS0 panic=-1', '-serial', 'stdio', '-no-reboot'],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      ); // prettier-ignore
      let seen = '';
      const done = (boots: boolean) => {
        clearTimeout(timer);
        child.kill('SIGKILL');
        resolve(boots);
      };
      const timer = setTimeout(() => done(false), KERNEL_PROBE_MS);
      child.stdout!.setEncoding('latin1').on('data', (chunk: string) => {
        seen = (seen + chunk).slice(-4096);
        if (/Kernel panic|Unable to mount root/.test(seen)) done(true);
      });
      child.on('error', () => done(false));
      child.on('close', () => done(/Kernel panic|Unable to mount root/.test(seen)));
    });
    kernelProbes.set(kernel, probe);
  }
  return probe;
}

/**
 * The accelerator a VM of this kernel runs on: KVM when the node has it and it runs the kernel
 * (probed once per kernel), TCG otherwise. An image without its own kernel is probed as far as a
 * machine starting.
 */
export async function accelerator(
  kernel: string | null,
  log: (line: string) => void = () => {},
): Promise<'kvm' | 'tcg'> {
  if (!(await kvmStarts())) return 'tcg';
  if (kernel === null) return 'kvm';
  const known = kernelProbes.has(kernel);
  const boots = await kvmBoots(kernel);
  if (!boots && !known)
    log('bcd: KVM starts a machine here but does not run the guest kernel; VMs run under TCG');
  return boots ? 'kvm' : 'tcg';
}
