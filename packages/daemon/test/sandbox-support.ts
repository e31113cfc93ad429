/**
 * What the sandbox runtime suites share: an operator's SSH CAs made with ssh-keygen (a user CA whose
 * certificates name a sandbox, a host CA standing in for the control plane's sandbox CA), and the
 * real OpenSSH client reaching a sandbox through a driver's `dialSsh`, bridged to a loopback port as
 * `sandbox exec` bridges its tunnel, with the same hardening and the host CA pinned.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream';

export class SandboxKeys {
  constructor(private readonly dir: string) {}

  /** The user CA's public line (made once). */
  userCa(): string {
    const ca = join(this.dir, 'user_ca');
    if (!existsSync(ca)) execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', ca]);
    return readFileSync(`${ca}.pub`, 'utf8').trim();
  }

  /** A new user key with a five-minute certificate for `principal`; answers the private key's path. */
  userKey(name: string, principal: string): string {
    this.userCa();
    const key = join(this.dir, name);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]);
    execFileSync('ssh-keygen', ['-q', '-s', join(this.dir, 'user_ca'), '-I', name, '-n', principal, '-V', '+5m', `${key}.pub`]);
    return key;
  } // prettier-ignore

  hostCa(): string {
    const ca = join(this.dir, 'host_ca');
    if (!existsSync(ca)) execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', ca]);
    return ca;
  }

  /** A host certificate for the sandbox's key, as the control plane signs one. */
  hostCertificate(sandboxId: string, hostPublicKey: string): string {
    const pub = join(this.dir, `${sandboxId}-host.pub`);
    writeFileSync(pub, `${hostPublicKey}\n`);
    execFileSync('ssh-keygen', ['-q', '-s', this.hostCa(), '-I', sandboxId, '-h', '-n', sandboxId, '-V', '+1h', pub]);
    return readFileSync(join(this.dir, `${sandboxId}-host-cert.pub`), 'utf8');
  } // prettier-ignore

  /**
   * Runs `command` in the sandbox with the real ssh client as root, the host CA pinned for the
   * sandbox's name, through a loopback port whose connections `dial` bridges.
   */
  async ssh(
    dial: (sandboxId: string) => Promise<Duplex>,
    sandboxId: string,
    key: string,
    command: string[],
  ): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const server = createServer((socket) => {
      dial(sandboxId).then(
        (duplex) => {
          pipeline(socket, duplex, () => socket.destroy());
          pipeline(duplex, socket, () => {});
        },
        () => socket.destroy(),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const knownHosts = join(this.dir, `${sandboxId}-known_hosts`);
    writeFileSync(
      knownHosts,
      `@cert-authority ${sandboxId} ${readFileSync(`${this.hostCa()}.pub`, 'utf8').trim()}\n`,
    );
    // Asynchronously: the bridge that serves this connection runs in this process.
    const child = spawn(
      'ssh',
      ['-F', 'none', '-i', key, '-o', `CertificateFile=${key}-cert.pub`, '-o', 'IdentitiesOnly=yes',
        '-o', `UserKnownHostsFile=${knownHosts}`, '-o', `GlobalKnownHostsFile=${knownHosts}`,
        '-o', `HostKeyAlias=${sandboxId}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes',
        '-a', '-x', '-o', 'ClearAllForwardings=yes', '-o', 'ProxyCommand=none',
        '-p', String(port), '-l', 'root', '--', '127.0.0.1', ...command],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    ); // prettier-ignore
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearTimeout(timer);
    server.close();
    return { status, stdout, stderr };
  }
}
