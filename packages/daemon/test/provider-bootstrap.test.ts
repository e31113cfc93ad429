/**
 * `provider-accounts bootstrap` for real, through the CLI binary against `better-compute serve`:
 * a throwaway Debian root (debootstrap with openssh-server, cached under ~/.cache/better-compute,
 * the approach of install-script.test.ts) runs a real sshd on a free port under bubblewrap, standing
 * in for a rented dedicated server. The account pins the host's key and names the SSH key as a
 * secret; offers reads the host's hardware over OpenSSH; bootstrap's job mints a join token and
 * runs the project's installer there with the token on standard input; the host's bcd (the unit's
 * own command, as install-script.test.ts starts it: there is no systemd in the root) comes up as a
 * ready node of the pool and runs a command. A second bootstrap finds it a node already. The
 * private key's bytes are in no event, audit entry, log line, answer or process argument.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatedCommandSigner } from '../../better-compute/src/gateway/signer.js';
import {
  type Deployment,
  deployment,
  freePort,
  type Proc,
  root,
  start,
  startServer,
  until,
} from './daemon-support.js';

const run = promisify(execFile);
const cache = join(homedir(), '.cache', 'better-compute');
const debianRoot = join(cache, 'debian-bookworm');
const sshdRoot = join(cache, 'debian-bookworm-sshd');
const cli = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const scratch = mkdtempSync(join(cache.replace(/better-compute$/, ''), 'bc-pacct-'));
const machine = join(scratch, 'machine');
const SECRET = 'provider-bootstrap-suite-deployment-secret-01';
let env: Deployment;
let server: Proc | undefined;
let sshd: Proc | undefined;
let daemon: Proc | undefined;
let url: string;
let sshPort: number;
let hostKey: string;
let keyBody: string;
/** Every process argument seen while the suite ran (sampled from /proc). */
const argvSeen = new Set<string>();
let sampler: NodeJS.Timeout | undefined;

const has = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;

/** The tools and the Debian roots this suite needs, made when missing (and cached). */
function prepareHost(): void {
  if (!has('debootstrap') || !has('bwrap') || !has('ssh') || !has('ssh-keygen')) {
    execFileSync('apt-get', ['update'], { stdio: 'ignore' });
    execFileSync('apt-get', ['install', '-y', 'debootstrap', 'bubblewrap', 'openssh-client'], {
      stdio: 'ignore',
    });
  }
  mkdirSync(cache, { recursive: true });
  if (!existsSync(join(debianRoot, 'usr', 'bin', 'apt-get'))) {
    const building = `${debianRoot}.${process.pid}.tmp`;
    rmSync(building, { recursive: true, force: true });
    execFileSync('debootstrap', ['--variant=minbase', 'bookworm', building, 'http://deb.debian.org/debian'], {
      stdio: 'ignore',
    });
    renameSync(building, debianRoot);
  }
  if (!existsSync(join(sshdRoot, 'usr', 'sbin', 'sshd'))) {
    const building = `${sshdRoot}.${process.pid}.tmp`;
    rmSync(building, { recursive: true, force: true });
    execFileSync('cp', ['-a', '--reflink=auto', debianRoot, building]);
    execFileSync(
      'bwrap',
      [
        ...['--bind', building, '/', '--proc', '/proc', '--dev', '/dev'],
        ...['--ro-bind', '/etc/resolv.conf', '/etc/resolv.conf', '--unshare-pid', '--die-with-parent'],
        ...[
          '/bin/sh',
          '-c',
          'DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server',
        ],
      ],
      { stdio: 'ignore' },
    );
    renameSync(building, sshdRoot);
  }
}

/** As install-script.test.ts: the machine's own root, /proc, /dev and pid namespace, this Node.js, the host's network. */
function inMachine(args: string[]): string[] {
  return [
    ...['--bind', machine, '/', '--proc', '/proc', '--dev', '/dev', '--ro-bind', '/sys', '/sys'],
    ...['--ro-bind', process.execPath, '/usr/local/bin/node', '--unshare-pid', '--die-with-parent'],
    ...args,
  ];
}

/** The CLI binary against the served deployment, as root's administrator. */
async function bc(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [cli, ...args], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: scratch,
        BETTER_COMPUTE_URL: url,
        BETTER_COMPUTE_TOKEN: env.rootKey,
        BETTER_COMPUTE_TENANT: 'root',
      },
      cwd: scratch,
      maxBuffer: 16 << 20,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

function sampleArgv(): void {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      argvSeen.add(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '));
    } catch {
      // gone between the listing and the read
    }
  }
}

beforeAll(async () => {
  prepareHost();
  execFileSync('cp', ['-a', '--reflink=auto', sshdRoot, machine]);
  // The host's own keys and the account's key, made fresh for this run.
  rmSync(join(machine, 'etc', 'ssh', 'ssh_host_ed25519_key'), { force: true });
  rmSync(join(machine, 'etc', 'ssh', 'ssh_host_ed25519_key.pub'), { force: true });
  execFileSync('ssh-keygen', [
    '-q',
    '-t',
    'ed25519',
    '-N',
    '',
    '-f',
    join(machine, 'etc', 'ssh', 'ssh_host_ed25519_key'),
  ]);
  hostKey = readFileSync(join(machine, 'etc', 'ssh', 'ssh_host_ed25519_key.pub'), 'utf8')
    .trim()
    .split(' ')
    .slice(0, 2)
    .join(' ');
  execFileSync('ssh-keygen', [
    '-q',
    '-t',
    'ed25519',
    '-N',
    '',
    '-C',
    'pacct',
    '-f',
    join(scratch, 'account-key'),
  ]);
  keyBody = readFileSync(join(scratch, 'account-key'), 'utf8').split('\n')[1]!;
  mkdirSync(join(machine, 'root', '.ssh'), { recursive: true, mode: 0o700 });
  writeFileSync(
    join(machine, 'root', '.ssh', 'authorized_keys'),
    readFileSync(join(scratch, 'account-key.pub')),
    {
      mode: 0o600,
    },
  );
  mkdirSync(join(machine, 'run', 'sshd'), { recursive: true, mode: 0o755 });
  sshPort = await freePort();
  writeFileSync(
    join(machine, 'etc', 'ssh', 'sshd_test_config'),
    [
      `Port ${sshPort}`,
      'ListenAddress 127.0.0.1',
      'HostKey /etc/ssh/ssh_host_ed25519_key',
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'PidFile none',
      'AuthorizedKeysFile .ssh/authorized_keys',
      '',
    ].join('\n'),
  );
  sshd = start(
    'bwrap',
    inMachine(['/usr/sbin/sshd', '-D', '-e', '-f', '/etc/ssh/sshd_test_config']),
    {},
    true,
  );
  env = await deployment();
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const keyFile = join(scratch, 'command-root.pem');
  writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
  server = await startServer(env.database.url!, port, keyFile, { BETTER_COMPUTE_SECRET: SECRET });
  await until('sshd to listen', async () => sshd!.err.some((line) => line.includes('listening')), 20_000);
  sampler = setInterval(sampleArgv, 25);
}, 900_000);

afterAll(async () => {
  if (sampler) clearInterval(sampler);
  daemon?.child.kill('SIGKILL');
  sshd?.child.kill('SIGKILL');
  server?.child.kill('SIGKILL');
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('provider-accounts bootstrap over real OpenSSH', () => {
  let accountId = '';
  let poolId = '';
  let nodeId = '';
  const answers: string[] = [];
  const host = () => `root@127.0.0.1:${sshPort}`;

  it('creates an ssh account whose key is a secret reference; a literal key is refused before anything is sent', async () => {
    const put = await bc(['secrets', 'put', 'rack-key', '--value-file', 'account-key']);
    expect(put.code).toBe(0);
    const reference = JSON.parse(put.stdout).reference as string;
    const document = {
      name: 'rack-12',
      driver: 'ssh',
      settings: { joinUrl: url, hosts: [{ address: host(), hostKey }] },
      credentials: { privateKey: reference },
    };
    writeFileSync(
      join(scratch, 'literal.json'),
      JSON.stringify({
        ...document,
        credentials: { privateKey: readFileSync(join(scratch, 'account-key'), 'utf8') },
      }),
    );
    const literal = await bc(['provider-accounts', 'create', '--config-file', 'literal.json']);
    expect(literal.code).not.toBe(0);
    expect(literal.stderr).toContain('INVALID_ARGUMENT');
    expect(literal.stderr).toContain('nothing was sent');
    writeFileSync(join(scratch, 'account.json'), JSON.stringify(document));
    const created = await bc(['provider-accounts', 'create', '--config-file', 'account.json']);
    expect(created.code, created.stderr).toBe(0);
    answers.push(created.stdout);
    accountId = JSON.parse(created.stdout).id;
    expect(accountId).toMatch(/^pacct_/);
  });

  it('offers reads the host’s hardware over OpenSSH with the pinned host key; another key is refused', async () => {
    const offers = await bc(['provider-accounts', 'offers', accountId]);
    expect(offers.code, offers.stderr).toBe(0);
    answers.push(offers.stdout);
    const [offer] = JSON.parse(offers.stdout).offers;
    expect(offer).toMatchObject({ host: host(), reachable: true, error: null, nodeId: null, gpus: [] });
    expect(offer.cores).toBeGreaterThan(0);
    expect(offer.memoryMiB).toBeGreaterThan(100);
    // A pin that is not the host's key: ssh refuses before it authenticates.
    const other = JSON.parse(readFileSync(join(scratch, 'account.json'), 'utf8'));
    other.name = 'wrong-pin';
    other.settings.hosts[0].hostKey = readFileSync(join(scratch, 'account-key.pub'), 'utf8')
      .trim()
      .split(' ')
      .slice(0, 2)
      .join(' ');
    writeFileSync(join(scratch, 'wrong.json'), JSON.stringify(other));
    const wrong = JSON.parse(
      (await bc(['provider-accounts', 'create', '--config-file', 'wrong.json'])).stdout,
    );
    const refused = await bc(['provider-accounts', 'offers', wrong.id]);
    expect(JSON.parse(refused.stdout).offers[0]).toMatchObject({
      reachable: false,
      error: expect.stringContaining('did not present the pinned host key'),
    });
  }, 60_000);

  it('bootstrap runs the installer on the host with a fresh token; the host joins the pool', async () => {
    const site = await env.call<{ id: string }>('sites.create', { name: 'rented' });
    poolId = (await env.call<{ id: string }>('pools.create', { siteId: site.id, name: 'rented-nodes' })).id;
    const bootstrap = await bc([
      'provider-accounts',
      'bootstrap',
      accountId,
      '--pool',
      poolId,
      '--wait',
      '300',
    ]);
    answers.push(bootstrap.stdout);
    expect(bootstrap.code, bootstrap.stderr).toBe(0);
    const result = JSON.parse(bootstrap.stdout);
    expect(result).toMatchObject({ state: 'succeeded', poolId, hosts: [{ host: host(), state: 'joined' }] });
    nodeId = result.hosts[0].nodeId;
    const identity = JSON.parse(readFileSync(join(machine, 'var', 'lib', 'bcd', 'node.json'), 'utf8'));
    expect(identity.nodeId).toBe(nodeId);
    // The join token was a single-use one, spent.
    const tokens = await env.call<any>('joinTokens.list', { poolId });
    expect(tokens.items).toHaveLength(1);
    expect(tokens.items[0]).toMatchObject({ usesAllowed: 1, usesLeft: 0 });
  }, 400_000);

  it('the host’s bcd (the unit’s own command) comes up ready in the pool and runs a command', async () => {
    const unit = readFileSync(join(machine, 'etc', 'systemd', 'system', 'bcd.service'), 'utf8');
    const execStart = /^ExecStart=(.*)$/m.exec(unit)![1]!.trim().split(/\s+/);
    const startedAt = Date.now();
    daemon = start('bwrap', inMachine(execStart), {}, true);
    const node = await until(
      'the bootstrapped node to be ready',
      async () => {
        const n = await env.call<any>('nodes.get', { nodeId });
        return n.state === 'ready' ? n : undefined;
      },
      90_000,
    );
    expect(node.poolId).toBe(poolId);
    // The node may read ready from the join's own report before this daemon has said hello: the
    // command is sent once this daemon's session is up, as a command to a node that has one.
    await until('this daemon’s session', async () => {
      const found = await sql<{ connected_at: Date }>`
        select connected_at from compute.node_sessions where node_id = ${nodeId}`.execute(
        env.compute.database.db,
      );
      const row = found.rows[0];
      return row && new Date(row.connected_at).getTime() >= startedAt - 1000 ? row : undefined;
    });
    const queued = await env.call<any>('commands.run', { nodeId, kind: 'inventory.refresh' });
    const done = await until(
      'the command to finish',
      async () => {
        const c = await env.call<any>('commands.get', { commandId: queued.id });
        return c.state === 'succeeded' || c.state === 'failed' ? c : undefined;
      },
      60_000,
    );
    expect(done.state, JSON.stringify(done)).toBe('succeeded');
  }, 180_000);

  it('a second bootstrap finds the host a node already and leaves it as it is', async () => {
    const offers = JSON.parse((await bc(['provider-accounts', 'offers', accountId])).stdout);
    expect(offers.offers[0].nodeId).toBe(nodeId);
    const again = await bc(['provider-accounts', 'bootstrap', accountId, '--pool', poolId, '--wait', '120']);
    answers.push(again.stdout);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      state: 'succeeded',
      hosts: [{ host: host(), state: 'already-node', nodeId }],
    });
    expect((await env.call<any>('joinTokens.list', { poolId })).items).toHaveLength(1);
    const events = await env.call<any>('events.list', { type: 'providerAccount.', limit: 100 });
    expect(events.items.map((e: any) => e.type)).toEqual(
      expect.arrayContaining([
        'providerAccount.created',
        'providerAccount.bootstrap-started',
        'providerAccount.host-joined',
        'providerAccount.bootstrap-finished',
      ]),
    );
  }, 180_000);

  it('the private key’s bytes are in no event, audit entry, job, log line, answer or process argument', async () => {
    sampleArgv();
    // The sampler saw the driver's ssh: the key went by file, the pin by known_hosts.
    expect([...argvSeen].some((line) => line.includes('StrictHostKeyChecking=yes'))).toBe(true);
    const db = env.compute.database.db;
    for (const table of ['events', 'audit_events', 'jobs', 'provider_accounts', 'provider_bootstraps']) {
      const { rows } = await sql.raw(`select * from compute.${table}`).execute(db);
      expect(JSON.stringify(rows), table).not.toContain(keyBody);
    }
    const logs = [
      ...server!.out,
      ...server!.err,
      ...sshd!.err,
      ...(daemon?.err ?? []),
      ...(daemon?.out ?? []),
    ].join('\n');
    expect(logs).not.toContain(keyBody);
    expect(answers.join('\n')).not.toContain(keyBody);
    expect([...argvSeen].join('\n')).not.toContain(keyBody);
  });
});
