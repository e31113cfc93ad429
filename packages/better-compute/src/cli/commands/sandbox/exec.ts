/**
 * `sandbox exec SANDBOX [--key FILE] [--minutes N] [--ssh PROGRAM] [--accept-host-key] [-- COMMAND…]`:
 * sandboxes.exec, then OpenSSH through the grant's single-use tunnel. Only the public key beside
 * --key is sent; the certificate (valid --minutes) goes into a private temporary directory, removed
 * whatever happens; one loopback connection is bridged to the tunnel; ssh runs with none of your
 * configuration, a known-hosts file of its own (the sandbox CA pinned for a certified guest), every
 * forwarding off, and `--` before the host, so the remote command is never read as an ssh option.
 * The command's words are quoted for the guest's shell one by one (remote-argv.ts), so the guest
 * runs exactly the vector given. Exits with ssh's status.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import { CliError, RemoteExitError } from '../../errors.js';
import { remoteCommandLine } from '../../remote-argv.js';
import { bridgeSocket } from '../../tunnel-socket.js';

const UNIX_ACCOUNT = /^[a-z_][a-z0-9_-]{0,31}$/;
const HOST_PRINCIPAL = /^sbx_[0-9a-z]{1,64}$/;

function invalidResponse(message: string): ComputeError {
  return new ComputeError('INVALID_RESPONSE', message, {
    hint: 'Nothing was run. Check that --url points at a better-compute API you trust.',
  });
}

export default defineCommand({
  name: 'sandbox exec',
  group: 'Sandboxes',
  summary:
    'Run a command (or a shell) in a sandbox over OpenSSH through a single-use tunnel (sandboxes.exec)',
  target: 'token',
  output: false,
  calls: ['sandboxes.exec'],
  positionals: [{ name: 'sandbox', description: 'The sandbox, sbx_…', required: true, kind: 'sandbox' }],
  flags: {
    key: {
      type: 'string',
      description:
        'Your private key; its .pub beside it is sent (default ~/.ssh/id_ed25519, else ~/.ssh/id_ecdsa)',
      placeholder: 'FILE',
    },
    // sandboxes.exec's bounds (SANDBOX_EXEC_*_MINUTES), as literals so help loads no schema;
    // test/cli-remote-argv.test.ts holds the two equal.
    minutes: {
      type: 'number',
      integer: true,
      min: 1,
      max: 15,
      default: 10,
      description: 'How long the certificate is valid, in minutes (never past your session)',
      placeholder: 'N',
    },
    ssh: { type: 'string', default: 'ssh', description: 'The OpenSSH client to run', placeholder: 'PROGRAM' },
    acceptHostKey: {
      type: 'boolean',
      description: 'Trust an uncertified guest’s host key on first use, for this connection only',
    },
  },
  examples: [
    'better-compute sandbox exec sbx_01k5w… -- pytest -q',
    'better-compute sandbox exec sbx_01k5w…                 # a login shell',
    "better-compute sandbox exec sbx_01k5w… -- sh -c 'make && make test'   # each word arrives whole",
    'better-compute sandbox exec sbx_01k5w… --minutes 15 -- ./long-job.sh',
  ],
  async run({ args, flags, rest, global, io, api, log }) {
    if (!global.url)
      throw new CliError(
        'UNSUPPORTED',
        'sandbox exec opens a WebSocket on a running server, and needs --url',
        {
          hint: 'Pass --url https://compute.example.com (or set BETTER_COMPUTE_URL).',
        },
      );
    // Checked before anything is sent: a word that cannot cross costs no grant.
    const command = remoteCommandLine(rest);
    const { existsSync, readFileSync } = await import('node:fs');
    const { join, resolve } = await import('node:path');
    const home = io.env.HOME ?? io.env.USERPROFILE ?? '';
    const key = flags.key
      ? resolve(io.cwd, flags.key.endsWith('.pub') ? flags.key.slice(0, -4) : flags.key)
      : [join(home, '.ssh', 'id_ed25519'), join(home, '.ssh', 'id_ecdsa')].find((path) =>
          existsSync(`${path}.pub`),
        );
    if (!key)
      throw new CliError(
        'INVALID_ARGUMENT',
        'no key: ~/.ssh/id_ed25519.pub and ~/.ssh/id_ecdsa.pub do not exist',
        {
          hint: 'Make one with ssh-keygen -t ed25519, or pass --key FILE.',
          details: { field: 'key' },
        },
      );
    let publicKey: string;
    try {
      publicKey = readFileSync(`${key}.pub`, 'utf8').trim();
    } catch (error) {
      throw new CliError(
        'INVALID_ARGUMENT',
        `${key}.pub cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'}): sandbox exec sends the public key beside --key`,
        { hint: 'Pass --key with the private key whose .pub lies beside it.', details: { field: 'key' } },
      );
    }
    if (/PRIVATE KEY/.test(publicKey) || publicKey.includes('\n'))
      throw new CliError(
        'INVALID_ARGUMENT',
        `${key}.pub holds a private key or several lines; only a public key is sent`,
        {
          hint: 'Put the one-line public key ssh-keygen wrote in the .pub file.',
          details: { field: 'key' },
        },
      );
    const { checkCertificate } = await import('../ssh-cert/check.js');
    const fingerprint = await checkCertificate.publicKey(publicKey, `${key}.pub`);
    const client = await api();
    let grant;
    try {
      grant = await client.call('sandboxes.exec', {
        sandboxId: args.sandbox,
        publicKey,
        minutes: flags.minutes,
      });
    } catch (error) {
      if (
        error instanceof ComputeError &&
        error.code === 'INVALID_STATE' &&
        (error.details as { reason?: string } | undefined)?.reason === 'restore-shares-identity'
      )
        throw new ComputeError(error.code, error.message, {
          details: error.details,
          hint: `Delete the sandbox it was restored from, or its sibling restores, or wait until better-compute sandbox get ${args.sandbox} shows identityRebound: true.`,
        });
      throw error;
    }
    if (typeof grant.account !== 'string' || !UNIX_ACCOUNT.test(grant.account))
      throw invalidResponse('the server named an account that is not a Unix account name');
    if (typeof grant.hostPrincipal !== 'string' || !HOST_PRINCIPAL.test(grant.hostPrincipal))
      throw invalidResponse('the server named a host principal that is not a sandbox id');
    await checkCertificate.answer(grant, fingerprint);
    if (!grant.hostCertified && !flags.acceptHostKey)
      throw new ComputeError(
        'INVALID_STATE',
        `${args.sandbox} has no valid host certificate from the sandbox CA`,
        {
          hint: 'Pass --accept-host-key to trust its host key on first use for this connection.',
        },
      );
    if (!io.spawn)
      throw new CliError('UNSUPPORTED', 'this program cannot run ssh (its CliIO has no spawn)', {
        hint: 'Run sandbox exec from the better-compute binary, or give runCli a CliIO with spawn.',
      });
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { createServer } = await import('node:net');
    const dir = mkdtempSync(join(tmpdir(), 'better-compute-exec-'));
    const sockets: { close(): void }[] = [];
    const server = createServer();
    try {
      const certificate = join(dir, 'key-cert.pub');
      const knownHosts = join(dir, 'known_hosts');
      writeFileSync(certificate, `${grant.certificate}\n`, { mode: 0o600 });
      writeFileSync(
        knownHosts,
        grant.hostCertified ? `@cert-authority ${grant.hostPrincipal} ${grant.hostCaPublicKey.trim()}\n` : '',
        { mode: 0o600 },
      );
      if (!grant.hostCertified)
        log(`${args.sandbox}'s host key is trusted on first use for this connection (--accept-host-key)`);
      // One connection, bridged to the single-use tunnel; the listener closes once it is taken.
      server.once('connection', (socket) => {
        server.close();
        socket.pause();
        client.tunnel(grant.ticket).then(
          (ws) => {
            sockets.push({ close: () => ws.close(1000) });
            bridgeSocket(ws, socket, log);
          },
          (error: unknown) => {
            log(`the tunnel could not open: ${error instanceof Error ? error.message : String(error)}`);
            socket.destroy();
          },
        );
      });
      await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', () => resolveListen()));
      const port = (server.address() as { port: number }).port;
      const quoted = (path: string) => `"${path}"`;
      const status = await io.spawn(flags.ssh, [
        '-F', 'none',
        '-i', key,
        '-o', `CertificateFile=${quoted(certificate)}`,
        '-o', 'IdentitiesOnly=yes',
        '-o', `UserKnownHostsFile=${quoted(knownHosts)}`,
        '-o', `GlobalKnownHostsFile=${quoted(knownHosts)}`,
        '-o', `HostKeyAlias=${grant.hostCertified ? grant.hostPrincipal : args.sandbox}`,
        '-o', `StrictHostKeyChecking=${grant.hostCertified ? 'yes' : 'accept-new'}`,
        '-a', '-x',
        '-o', 'ForwardAgent=no',
        '-o', 'ForwardX11=no',
        '-o', 'ClearAllForwardings=yes',
        '-o', 'ProxyCommand=none',
        '-o', 'ProxyJump=none',
        '-o', 'ControlMaster=no',
        '-o', 'ControlPath=none',
        '-o', 'PermitLocalCommand=no',
        '-p', String(port),
        '-l', grant.account,
        '--', '127.0.0.1',
        ...(command === undefined ? [] : [command]),
      ]); // prettier-ignore
      if (status !== 0) throw new RemoteExitError(status, `ssh exited with status ${status}`);
      return undefined;
    } finally {
      for (const socket of sockets) socket.close();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
