/**
 * What the sandbox runtimes share: the paths of their ids, and a sandbox's SSH host key and the
 * certificate the control plane signs for it (the node makes each sandbox's key and checks a
 * certificate before installing it).
 */
import { spawnSync } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RuntimeError } from './image-cache.js';

export const SANDBOX_ID = /^sbx_[A-Za-z0-9]{1,64}$/;
export const SNAPSHOT_ID = /^snap_[A-Za-z0-9]{1,64}$/;

/** `<dir>/<id><suffix>` for an id of the pattern; anything else is refused before it reaches a path. */
export function idPath(dir: string, id: string, pattern: RegExp, what: string, suffix = ''): string {
  if (!pattern.test(id)) throw new RuntimeError(`${id.slice(0, 80)} is not a ${what} id`);
  return join(dir, `${id}${suffix}`);
}

export function run(command: string, args: string[], what: string): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error) throw new RuntimeError(`${what}: ${command} could not run: ${result.error.message}`);
  if (result.status !== 0)
    throw new RuntimeError(
      `${what}: ${command} failed: ${(result.stderr || result.stdout).trim().slice(-500)}`,
    );
  return result.stdout;
}

/** Makes `<dir>/host_key` (Ed25519, no passphrase) and answers its public line. */
export async function makeHostKey(dir: string, sandboxId: string): Promise<string> {
  const path = join(dir, 'host_key');
  await rm(path, { force: true });
  await rm(`${path}.pub`, { force: true });
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', sandboxId, '-f', path], 'making the host key');
  return (await readFile(`${path}.pub`, 'utf8')).trim();
}

/**
 * Writes `<dir>/host_key-cert.pub` once it is an OpenSSH host certificate for `<dir>/host_key.pub`,
 * and answers when it expires; anything else is refused and not kept.
 */
export async function checkHostCertificate(dir: string, hostCertificate: string): Promise<string> {
  const path = join(dir, 'host_key-cert.pub');
  await writeFile(path, `${hostCertificate.trim()}\n`, { mode: 0o600 });
  const listing = run('ssh-keygen', ['-L', '-f', path], 'reading the host certificate');
  if (!/Type: \S+ host certificate/.test(listing)) {
    await rm(path, { force: true });
    throw new RuntimeError('the certificate is not an OpenSSH host certificate');
  }
  const signed = run('ssh-keygen', ['-l', '-f', path], 'reading the host certificate');
  const own = run('ssh-keygen', ['-l', '-f', join(dir, 'host_key.pub')], 'reading the host key');
  if (signed.split(' ')[1] !== own.split(' ')[1]) {
    await rm(path, { force: true });
    throw new RuntimeError("the certificate is not for this sandbox's host key");
  }
  const until = /Valid: from \S+ to (\S+)/.exec(listing)?.[1];
  return until ? new Date(`${until}Z`).toISOString() : new Date(0).toISOString();
}
