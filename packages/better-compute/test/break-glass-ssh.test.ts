/**
 * Break-glass SSH end to end, with real parts: the server signs with its PKI bundle, a real bcd
 * writes sshd's trust files through the ssh.trust command, a real sshd on a loopback port reads
 * them, and the real ssh client logs in with the certificate `ssh-cert` wrote. A fresh certificate
 * logs in; a revoked one stops working at the next login; an expired one and one for another node
 * never do; the private key and a HOST ssh would read as an option are refused before anything is
 * sent.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as OTPAuth from 'otpauth';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

// A login waits for the node to apply its SSH trust (up to a minute on a loaded machine).
vi.setConfig({ testTimeout: 240_000 });
import { betterCompute, type ComputeInstance, serve } from '../src/index.js';
import { createPkiBundle } from '../src/pki/create.js';
import {
  bcd,
  bcdJoin,
  daemonConnected,
  freePort,
  type Proc,
  start,
  until,
} from '../../daemon/test/daemon-support.js';
import { callServer, captureIO, cliLending, cliRunner, scratchDirectory } from './cli-support.js';
import { main } from '../src/cli/index.js';

const secret = 'the break-glass test deployment secret';
const scratch = scratchDirectory('.bc-ssh-');
const sshDir = join(scratch, 'node-ssh');
let database: TestDatabase;
let compute: ComputeInstance;
let url = '';
const stop = new AbortController();
let serving: Promise<void>;
let daemon: Proc;
let sshd: Proc;
let sshdPort: number;
let nodeId: string;
let otherNodeId: string;
let apiKey: string;
let mfaToken: string;
let clockShiftMs = 0;

const call = <T = any>(method: string, body: Record<string, unknown>, token = mfaToken): Promise<T> =>
  callServer<T>(url, method, body, token);

/** Runs the real ssh client; resolves with its status and what it printed. */
function ssh(args: string[]): Promise<{ status: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn('ssh', ['-F', join(scratch, 'ssh_config'), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('exit', (code) => resolve({ status: code ?? 255, out, err }));
  });
}

const keyFile = join(scratch, 'id_ed25519');
const certFile = `${keyFile}-cert.pub`;
const login = () =>
  ssh([
    '-i',
    keyFile,
    '-o',
    `CertificateFile=${certFile}`,
    '-l',
    'root',
    '--',
    '127.0.0.1',
    'echo',
    'logged-in-as-$(id -un)',
  ]);

/** Waits until the node's daemon ran every ssh.trust command queued so far. */
async function trustApplied(): Promise<void> {
  await until(
    'the node to apply its SSH trust',
    async () => {
      const page = await call<any>('commands.list', { nodeId, limit: 500 });
      const trust = page.items.filter((c: any) => c.kind === 'ssh.trust');
      // The newest describes the whole state; an older one may have expired undelivered.
      const open = trust.some((c: any) => ['queued', 'sent', 'running'].includes(c.state));
      return !open && trust.at(-1)?.state === 'succeeded';
      // Generous: in the full suite, two files at a time on two cores, the node's daemon and its
      // gateway share the machine with every other suite's servers (once over 60 s).
    },
    150_000,
  );
}

const cli = () =>
  cliRunner(() => compute, scratch, { BETTER_COMPUTE_URL: url, BETTER_COMPUTE_TOKEN: mfaToken });

beforeAll(async () => {
  const pki = join(scratch, 'pki.json');
  await createPkiBundle({ path: pki, secret });
  database = await createTestDatabase('postgres');
  compute = await betterCompute(
    { database, pki, secret, trustedOrigins: [], rateLimit: false },
    { log: () => {}, now: () => new Date(Date.now() + clockShiftMs) },
  );
  await compute.migrate();
  const dev = (await compute.embeddedIam!.bootstrapDev())!;
  apiKey = dev.rootAdmin.apiKey;
  // A person's session opened with a second factor, as ssh-cert needs by default.
  const iam = compute.embeddedIam!;
  const { secret: seed } = await iam.enrollTotp(dev.rootAdmin.principalId);
  const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(seed) });
  await iam.confirmTotp(dev.rootAdmin.principalId, totp.generate());
  const signedIn = await iam.signIn(
    dev.rootAdmin.email,
    dev.rootAdmin.password,
    'root',
    totp.generate({ timestamp: Date.now() + 30_000 }),
  );
  expect(signedIn.session.mfa).toBe(true);
  mfaToken = signedIn.token;
  serving = serve({
    compute,
    port: 0,
    roles: ['api', 'gateway'],
    signal: stop.signal,
    log: () => {},
    onListening: (u) => (url = u),
  });
  await until('serve', async () => url);

  const site = await call('sites.create', { name: 'lab' }, apiKey);
  const pool = await call('pools.create', { siteId: site.id, name: 'lab' }, apiKey);
  const { token } = await call('joinTokens.create', { poolId: pool.id, uses: 2, preApproved: true }, apiKey);
  const stateDir = join(scratch, 'state');
  const joined = await bcdJoin(url, token, scratch, stateDir);
  nodeId = JSON.parse(joined.out[0]!).nodeId;
  const other = await call(
    'nodes.join',
    { joinToken: token, hostname: 'other', inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] } },
    apiKey,
  );
  otherNodeId = other.nodeId;
  daemon = bcd(['run', '--state-dir', stateDir], { BCD_SSH_DIR: sshDir });
  await until(
    'the node to be ready',
    async () => (await call<any>('nodes.get', { nodeId }, apiKey)).state === 'ready',
  );
  // Ready comes with the join; the daemon's session (which runs the ssh.trust commands) after it.
  await daemonConnected(stateDir);

  // The node's sshd, configured as docs/break-glass-ssh.md says, on a loopback port.
  spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(scratch, 'host_key')]);
  spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'tester', '-f', keyFile]);
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  sshdPort = await freePort();
  writeFileSync(
    join(scratch, 'sshd_config'),
    [
      `Port ${sshdPort}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(scratch, 'host_key')}`,
      `PidFile ${join(scratch, 'sshd.pid')}`,
      'UsePAM no',
      'StrictModes no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'AuthorizedKeysFile none',
      'PermitRootLogin prohibit-password',
      `TrustedUserCAKeys ${join(sshDir, 'trusted-user-ca-keys')}`,
      `RevokedKeys ${join(sshDir, 'revoked-keys')}`,
      `AuthorizedPrincipalsFile ${join(sshDir, 'principals')}/%u`,
      'LogLevel VERBOSE',
    ].join('\n') + '\n',
  );
  writeFileSync(
    join(scratch, 'ssh_config'),
    [
      'Host 127.0.0.1',
      `  Port ${sshdPort}`,
      '  StrictHostKeyChecking no',
      '  UserKnownHostsFile /dev/null',
      '  BatchMode yes',
      '  LogLevel ERROR',
      '  ConnectTimeout 10',
    ].join('\n') + '\n',
  );
  // `--ssh` runs the real client with the fixture's configuration, as a person's own ssh_config would.
  writeFileSync(join(scratch, 'ssh'), `#!/bin/sh\nexec ssh -F ${join(scratch, 'ssh_config')} "$@"\n`);
  chmodSync(join(scratch, 'ssh'), 0o755);
  sshd = start('/usr/sbin/sshd', ['-D', '-e', '-f', join(scratch, 'sshd_config')], {}, true);
  await until('sshd to listen', async () => sshd.err.some((line) => line.includes('Server listening')));
}, 120_000);

afterAll(async () => {
  sshd?.child.kill('SIGTERM');
  daemon?.child.kill('SIGTERM');
  await daemon?.exited;
  stop.abort();
  await serving;
  await database?.close();
});

describe('break-glass SSH with a real sshd', () => {
  it('ssh-cert writes a node-bound certificate beside the key, and it logs in as root', async () => {
    const { json } = cli();
    const issued = await json([
      'ssh-cert',
      '--tenant',
      'root',
      '--node',
      nodeId,
      '--key',
      `${keyFile}.pub`,
      '--minutes',
      '5',
    ]);
    expect(issued).toMatchObject({
      nodeId,
      account: 'root',
      principal: `root@${nodeId}`,
      state: 'active',
      certificateFile: certFile,
    });
    expect(issued.keyId).toContain(issued.id);
    expect(JSON.stringify(issued)).not.toContain('-cert-v01@openssh.com');
    const listed = spawnSync('ssh-keygen', ['-L', '-f', certFile], { encoding: 'utf8' }).stdout;
    expect(listed).toContain('user certificate');
    expect(listed).toContain(`root@${nodeId}`);
    expect(listed).toContain('permit-pty');
    await trustApplied();
    expect(readFileSync(join(sshDir, 'principals', 'root'), 'utf8').trim()).toBe(`root@${nodeId}`);
    const session = await login();
    expect(session.err).toBe('');
    expect(session.out.trim()).toBe('logged-in-as-root');
    expect(sshd.err.join('\n')).toContain(issued.id);
  });

  it('ssh-cert --connect runs ssh with the certificate and exits with the remote status', async () => {
    const printed: string[] = [];
    const spawnPiped = (command: string, args: string[]) =>
      new Promise<number>((resolve) => {
        const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
        child.stdout.on('data', (chunk: Buffer) => printed.push(chunk.toString()));
        child.on('exit', (code) => resolve(code ?? 255));
      });
    const connect = async (remote: string[]) => {
      const { io, err } = captureIO(
        { HOME: scratch, BETTER_COMPUTE_URL: url, BETTER_COMPUTE_TOKEN: mfaToken },
        { cwd: scratch, spawn: spawnPiped },
      );
      const argv = ['ssh-cert', '--tenant', 'root', '--node', nodeId, '--key', `${keyFile}.pub`];
      const code = await main(
        [...argv, '--connect', '127.0.0.1', '--ssh', join(scratch, 'ssh'), '--', ...remote],
        cliLending(() => compute),
        io,
      );
      return { code, err: err.join('\n') };
    };
    await trustApplied();
    // The certificate is fresh at each run; the first run's trust command may still be on its way.
    await until(
      'a login through --connect',
      async () => (await connect(['echo', 'through-connect'])).code === 0,
    );
    expect(printed.join('')).toContain('through-connect');
    const failed = await connect(['exit', '7']);
    expect(failed.code).toBe(7);
    expect(failed.err).toContain('REMOTE_EXIT');
  });

  it('a revoked certificate stops working at the next login, and the list says who revoked it and why', async () => {
    const { json } = cli();
    const issued = await json(['ssh-cert', '--tenant', 'root', '--node', nodeId, '--key', `${keyFile}.pub`]);
    await trustApplied();
    expect((await login()).status).toBe(0);
    const revoked = await call('nodes.revokeSshCert', { sshCertId: issued.id, reason: 'laptop lost' });
    expect(revoked).toMatchObject({ state: 'revoked', revocationReason: 'laptop lost' });
    await trustApplied();
    const refused = await login();
    expect(refused.status).toBe(255);
    expect(refused.out).toBe('');
    const page = await call<any>('nodes.listSshCerts', { nodeId, includeExpired: true });
    expect(page.items.find((c: any) => c.id === issued.id)).toMatchObject({
      state: 'revoked',
      revokedBy: expect.stringMatching(/^/),
    });
    const active = await call<any>('nodes.listSshCerts', { nodeId });
    expect(active.items.map((c: any) => c.id)).not.toContain(issued.id);
  });

  it('an expired certificate and one for another node never log in', async () => {
    const { json } = cli();
    clockShiftMs = -2 * 3600_000;
    try {
      await json([
        'ssh-cert',
        '--tenant',
        'root',
        '--node',
        nodeId,
        '--key',
        `${keyFile}.pub`,
        '--minutes',
        '1',
      ]);
    } finally {
      clockShiftMs = 0;
    }
    expect(spawnSync('ssh-keygen', ['-L', '-f', certFile], { encoding: 'utf8' }).stdout).toContain('Valid:');
    expect((await login()).status).toBe(255);
    await json(['ssh-cert', '--tenant', 'root', '--node', otherNodeId, '--key', `${keyFile}.pub`]);
    expect((await login()).status).toBe(255);
    // The same key, certified for this node again, logs in: what failed was the certificate.
    await json(['ssh-cert', '--tenant', 'root', '--node', nodeId, '--key', `${keyFile}.pub`]);
    await trustApplied();
    expect((await login()).status).toBe(0);
  });

  it('refuses a session without a second factor, and an agent-free API key, before signing', async () => {
    await expect(
      call('nodes.issueSshCert', { nodeId, publicKey: readFileSync(`${keyFile}.pub`, 'utf8') }, apiKey),
    ).rejects.toMatchObject({
      code: 'ACCESS_DENIED',
      details: { reason: 'mfa-required' },
    });
  });

  it('refuses an agent even with the role, before signing', async () => {
    const iam = compute.embeddedIam!;
    const person = (await iam.listPrincipals({ tenantId: 'root', kind: 'person' })).items[0]!;
    const agent = await iam.createAgent({ tenantId: 'root', displayName: 'helper', actingFor: person.id });
    await iam.createBinding({ tenantId: 'root', role: 'platform-admin', principalId: agent.id });
    const { key } = await iam.createApiKey(agent.id, { name: 'agent' });
    const publicKey = readFileSync(`${keyFile}.pub`, 'utf8');
    await expect(call('nodes.issueSshCert', { nodeId, publicKey }, key)).rejects.toMatchObject({
      code: 'ACCESS_DENIED',
    });
  });

  it('refuses a private key, a file that is not .pub, a HOST ssh would read as an option and a command without --connect, before issuing', async () => {
    const { run } = cli();
    const before = (await call<any>('nodes.listSshCerts', { nodeId, includeExpired: true, limit: 500 })).items
      .length;
    writeFileSync(join(scratch, 'stolen.pub'), readFileSync(keyFile, 'utf8'));
    for (const [argv, field] of [
      [['--key', keyFile], 'key'],
      [['--key', join(scratch, 'stolen.pub')], 'key'],
      [['--key', `${keyFile}.pub`, '--connect', '-oProxyCommand=touch /tmp/pwned'], 'connect'],
      [['--key', `${keyFile}.pub`, '--connect', '127.0.0.1 -oProxyCommand=x'], 'connect'],
      [['--key', `${keyFile}.pub`, '--', 'id'], 'connect'],
      [['--key', `${keyFile}.pub`, '--account', 'root;id'], 'account'],
    ] as const) {
      const result = await run(['ssh-cert', '--tenant', 'root', '--node', nodeId, ...argv]);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.err.join('\n')).toContain('INVALID_ARGUMENT');
      expect(result.err.join('\n')).not.toContain('PRIVATE KEY');
      void field;
    }
    expect(
      (await call<any>('nodes.listSshCerts', { nodeId, includeExpired: true, limit: 500 })).items,
    ).toHaveLength(before);
    expect(existsSync('/tmp/pwned')).toBe(false);
  });
});
