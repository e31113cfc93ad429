/**
 * The ssh driver's transport: the system's OpenSSH client, one process per remote command. The
 * private key is written to a file of mode 0600 in a directory of mode 0700 made for the one call
 * and removed after it, so it is never in an argument, the environment or a log; the host key is
 * checked against the account's pin alone (a known_hosts file holding only the pin, strict
 * checking, no agent, no user or system configuration), so a host that presents another key is
 * never sent anything.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SshTarget {
  /** user@host:port, as the account lists it (the schema has checked its shape). */
  address: string;
  /** The pinned host key: type and base64 key. */
  hostKey: string;
}

export interface SshResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Why a call to a host did not run: the host's words cleaned to one short line, never the key. */
export class SshError extends Error {}

function parseAddress(address: string): { user: string; host: string; port: number } {
  const at = address.indexOf('@');
  const colon = address.lastIndexOf(':');
  const host = address.slice(at + 1, colon);
  return {
    user: address.slice(0, at),
    host: host.startsWith('[') ? host.slice(1, -1) : host,
    port: Number(address.slice(colon + 1)),
  };
}

/** One line of ssh's words for a message: control characters out, at most 300 characters. */
export function oneLine(text: string): string {
  const line = text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
}

/** What ssh's exit status 255 meant, in words an operator acts on. */
function connectionFailure(target: SshTarget, stderr: string): string {
  if (
    /host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|no matching host key/i.test(stderr)
  )
    return `${target.address} did not present the pinned host key; refusing to talk to it (check hostKey with ssh-keyscan)`;
  if (/permission denied/i.test(stderr))
    return `${target.address} refused the account's key (is its public key in the user's authorized_keys?)`;
  return `could not reach ${target.address}: ${oneLine(stderr) || 'ssh exited with status 255'}`;
}

/**
 * Runs `command` on the host with `stdin` on its standard input. Resolves with the remote
 * command's exit status; rejects with SshError when ssh itself failed (255) or timed out.
 */
export async function runSsh(
  target: SshTarget,
  privateKey: string,
  command: string,
  options: { stdin?: string; timeoutMs?: number; ssh?: string } = {},
): Promise<SshResult> {
  const { user, host, port } = parseAddress(target.address);
  const dir = await mkdtemp(join(tmpdir(), 'bc-ssh-'));
  try {
    const keyFile = join(dir, 'id');
    const knownHosts = join(dir, 'known_hosts');
    await writeFile(keyFile, privateKey.endsWith('\n') ? privateKey : `${privateKey}\n`, { mode: 0o600 });
    const pattern = port === 22 ? host : `[${host}]:${port}`;
    await writeFile(knownHosts, `${pattern} ${target.hostKey}\n`, { mode: 0o600 });
    const args = [
      '-F',
      '/dev/null',
      '-i',
      keyFile,
      '-o',
      'IdentitiesOnly=yes',
      '-o',
      'IdentityAgent=none',
      '-o',
      `UserKnownHostsFile=${knownHosts}`,
      '-o',
      'GlobalKnownHostsFile=/dev/null',
      '-o',
      'StrictHostKeyChecking=yes',
      '-o',
      'UpdateHostKeys=no',
      '-o',
      'BatchMode=yes',
      '-o',
      'ConnectTimeout=10',
      '-o',
      'ServerAliveInterval=15',
      '-o',
      'LogLevel=ERROR',
      '-p',
      String(port),
      '-l',
      user,
      '--',
      host,
      command,
    ];
    return await new Promise<SshResult>((resolve, reject) => {
      const child = spawn(options.ssh ?? 'ssh', args, { stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let errBytes = 0;
      child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => {
        // A chatty remote command cannot fill memory: its stderr is kept to its first 64 KiB.
        if (errBytes < 65_536) err.push(chunk);
        errBytes += chunk.length;
      });
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new SshError(`${target.address} did not finish within ${options.timeoutMs} ms`));
      }, options.timeoutMs ?? 60_000);
      child.on('error', (error) => {
        clearTimeout(timer);
        reject(new SshError(`could not run ssh: ${oneLine(error.message)}`));
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        const stderr = Buffer.concat(err).toString('utf8');
        if (code === 255) reject(new SshError(connectionFailure(target, stderr)));
        else resolve({ code: code ?? 255, stdout: Buffer.concat(out).toString('utf8'), stderr });
      });
      child.stdin.on('error', () => {});
      child.stdin.end(options.stdin ?? '');
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
