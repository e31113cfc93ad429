/**
 * An instance's disks, made with the host's tools: the qcow2 overlay over a cached base image
 * (`qemu-img`) and the NoCloud seed (`genisoimage`). Every value that reaches the seed's YAML is
 * checked to be plain first, so a key or host name cannot add fields of its own.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RuntimeError } from './image-cache.js';

export const GiB = 1024 ** 3;

/** Runs a host tool without a shell; fails with its stderr's tail. */
export function tool(command: string, args: string[], timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      {
        timeout: timeoutMs,
        maxBuffer: 4 << 20,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C' },
      },
      (error, stdout, stderr) => {
        if (error) {
          const why = String(stderr).trim().slice(-1000) || error.message;
          reject(new RuntimeError(`${command} failed: ${why}`));
        } else resolve(String(stdout));
      },
    );
  });
}

/**
 * The base image's virtual size. A base that names a backing file or an external data file of its
 * own is refused: either would let an image read other files of this node into a guest.
 */
export async function baseVirtualSize(path: string, format: 'qcow2' | 'raw'): Promise<number> {
  const info = JSON.parse(await tool('qemu-img', ['info', '-f', format, '--output=json', path])) as {
    'virtual-size'?: number;
    'backing-filename'?: string;
    'full-backing-filename'?: string;
    'format-specific'?: { data?: { 'data-file'?: string } };
  };
  if (info['backing-filename'] || info['full-backing-filename'])
    throw new RuntimeError('the image names a backing file of its own; only self-contained images are used');
  if (info['format-specific']?.data?.['data-file'])
    throw new RuntimeError('the image names an external data file; only self-contained images are used');
  if (typeof info['virtual-size'] !== 'number' || info['virtual-size'] <= 0)
    throw new RuntimeError(`the image is not a readable ${format} disk`);
  return info['virtual-size'];
}

/** A qcow2 overlay whose reads fall through to the base, `bytes` large. */
export async function makeOverlay(
  base: string,
  format: 'qcow2' | 'raw',
  path: string,
  bytes: number,
): Promise<void> {
  await tool('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', format, '-b', base, path, String(bytes)]);
}

export async function virtualSize(path: string): Promise<number> {
  const info = JSON.parse(await tool('qemu-img', ['info', '-f', 'qcow2', '--output=json', '-U', path])) as {
    'virtual-size': number;
  };
  return info['virtual-size'];
}

export async function growDisk(path: string, bytes: number): Promise<void> {
  await tool('qemu-img', ['resize', '-q', '-f', 'qcow2', path, String(bytes)]);
}

const publicKeyPattern =
  /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [A-Za-z0-9 @._+=:-]*)?$/;

/** Why these keys cannot go into a seed, or null when they can. */
function keyProblem(keys: string[]): string | null {
  for (const [index, key] of keys.entries())
    if (!publicKeyPattern.test(key.trim()))
      return `SSH key ${index + 1} is not a one-line OpenSSH public key (type, base64, optional plain comment)`;
  return null;
}

export interface SeedContents {
  instanceId: string;
  hostname: string;
  sshKeys: string[];
  userData: string | null;
  /**
   * NoCloud's network-config (an instance on its tap device has no DHCP server to ask), made by the
   * daemon from its own values; without it the guest asks DHCP (sandboxes, on user networking).
   */
  networkConfig?: string | null;
}

/**
 * Writes the NoCloud seed: an ISO 9660 volume labelled `cidata` with meta-data and user-data, and
 * network-config when given.
 */
export async function writeSeed(path: string, seed: SeedContents, scratchDir: string): Promise<void> {
  const problem = keyProblem(seed.sshKeys);
  if (problem) throw new RuntimeError(problem);
  if (!/^(inst|sbx)_[A-Za-z0-9]{1,64}$/.test(seed.instanceId) || !/^[a-z0-9-]{1,63}$/.test(seed.hostname))
    throw new RuntimeError('the instance id or host name is not plain');
  const dir = await mkdtemp(join(scratchDir, '.seed-'));
  try {
    const keys = seed.sshKeys.map((key) => `  - ${key.trim()}\n`).join('');
    await writeFile(
      join(dir, 'meta-data'),
      `instance-id: ${seed.instanceId}\nlocal-hostname: ${seed.hostname}\n${keys ? `public-keys:\n${keys}` : ''}`,
      { mode: 0o600 },
    );
    await writeFile(join(dir, 'user-data'), seed.userData ?? '#cloud-config\n', { mode: 0o600 });
    const files = [join(dir, 'user-data'), join(dir, 'meta-data')];
    if (seed.networkConfig) {
      await writeFile(join(dir, 'network-config'), seed.networkConfig, { mode: 0o600 });
      files.push(join(dir, 'network-config'));
    }
    await tool('genisoimage', ['-quiet', '-output', path, '-volid', 'cidata', '-joliet', '-rock', ...files]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
