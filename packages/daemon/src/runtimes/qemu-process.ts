/**
 * Starting QEMU and what its command line needs: the launch that waits for it to daemonize, the
 * GPUs it passes through, and the SSH banner that tells an adopted guest is up.
 */
import { spawn } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { RuntimeError } from './image-cache.js';

/** Only the printable tail of the console goes into an error message. */
export function tail(text: string, length = 1500): string {
  return text.slice(-length).replace(/[^\n\t -~]/g, '');
}

/** True when the port answers with an SSH identification line. */
export function sshBanner(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
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

/** Starts QEMU, which daemonizes once its sockets exist; fails with what it printed. */
export function launch(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('qemu-system-x86_64', args, {
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
