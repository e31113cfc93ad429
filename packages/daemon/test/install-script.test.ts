/**
 * `daemon install-script` for real: the script passes shellcheck, then runs as root inside a
 * throwaway Debian root (debootstrap, cached under ~/.cache/better-compute, run with
 * bubblewrap), installs bcd, writes its unit and joins with a token from a file; the unit's
 * own command then brings the node to ready against a real server.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
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

const cache = join(homedir(), '.cache', 'better-compute');
const debianRoot = join(cache, 'debian-bookworm');
const cli = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const scratch = mkdtempSync(join(cache.replace(/better-compute$/, ''), 'bc-install-'));
const machine = join(scratch, 'machine');
let env: Deployment;
let server: Proc | undefined;
let daemon: Proc | undefined;
let port: number;

const has = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;

/** The tools this suite needs, installed from Debian when missing; the Debian root, made when missing. */
function prepareHost(): void {
  if (!has('shellcheck') || !has('debootstrap') || !has('bwrap')) {
    execFileSync('apt-get', ['update'], { stdio: 'ignore' });
    execFileSync('apt-get', ['install', '-y', 'shellcheck', 'debootstrap', 'bubblewrap'], {
      stdio: 'ignore',
    });
  }
  if (!existsSync(join(debianRoot, 'usr', 'bin', 'apt-get'))) {
    mkdirSync(cache, { recursive: true });
    const building = `${debianRoot}.${process.pid}.tmp`;
    rmSync(building, { recursive: true, force: true });
    execFileSync('debootstrap', ['--variant=minbase', 'bookworm', building, 'http://deb.debian.org/debian'], {
      stdio: 'ignore',
    });
    renameSync(building, debianRoot);
  }
}

/**
 * Runs a command as root inside the machine (bubblewrap: its own root, /proc, /dev and pid
 * namespace), with this host's Node.js bound in and the host's network, so it reaches the server.
 */
function inMachine(args: string[]): string[] {
  return [
    '--bind',
    machine,
    '/',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--ro-bind',
    '/sys',
    '/sys',
    '--ro-bind',
    process.execPath,
    '/usr/local/bin/node',
    '--unshare-pid',
    '--die-with-parent',
    ...args,
  ];
}

beforeAll(async () => {
  prepareHost();
  // cp -a, not fs.cpSync: the root holds device nodes.
  execFileSync('cp', ['-a', '--reflink=auto', debianRoot, machine]);
  env = await deployment();
  port = await freePort();
  const keyFile = join(scratch, 'command-root.pem');
  writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
  server = await startServer(env.database.url!, port, keyFile);
}, 900_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  server?.child.kill('SIGKILL');
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('daemon install-script', () => {
  let script: string;

  it('prints a POSIX script that shellcheck passes, carrying no secret', () => {
    const out = join(scratch, 'install.sh');
    const made = spawnSync(
      process.execPath,
      [cli, 'daemon', 'install-script', '--url', `http://127.0.0.1:${port}`, '--plugins', '--out', out],
      { encoding: 'utf8' },
    );
    expect(made.status).toBe(0);
    script = readFileSync(out, 'utf8');
    expect(script.startsWith('#!/bin/sh\n')).toBe(true);
    const checked = spawnSync('shellcheck', ['-s', 'sh', out], { encoding: 'utf8' });
    expect(checked.stdout + checked.stderr).toBe('');
    expect(checked.status).toBe(0);
    // A second --out over the same file is refused, never written over.
    const again = spawnSync(process.execPath, [cli, 'daemon', 'install-script', '--out', out], {
      encoding: 'utf8',
    });
    expect(again.status).not.toBe(0);
    expect(again.stderr).toContain('ALREADY_EXISTS');
  });

  it('refuses a token on the command line and runs only as root with Node.js 20', () => {
    writeFileSync(join(machine, 'install.sh'), script);
    const refused = spawnSync('bwrap', inMachine(['/bin/sh', '/install.sh', '--token', 'jtok_secret']), {
      encoding: 'utf8',
    });
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain('never an argument');
  });

  it('installs bcd in a fresh Debian root, writes the unit, joins; the unit’s command brings the node to ready', async () => {
    const site = await env.call('sites.create', { name: 'debian' });
    const pool = await env.call('pools.create', { siteId: site.id, name: 'debian-nodes' });
    const token = await env.call('joinTokens.create', { poolId: pool.id, preApproved: true });
    mkdirSync(join(machine, 'root'), { recursive: true });
    writeFileSync(join(machine, 'root', 'join-token'), `${token.token}\n`, { mode: 0o600 });
    const installed = spawnSync(
      'bwrap',
      inMachine(['/bin/sh', '/install.sh', '--token-file', '/root/join-token']),
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(installed.stderr).not.toContain(token.token);
    expect(installed.stdout).not.toContain(token.token);
    expect(installed.status).toBe(0);
    expect(installed.stdout).toContain('the unit is written');
    const unit = readFileSync(join(machine, 'etc', 'systemd', 'system', 'bcd.service'), 'utf8');
    expect(unit).toContain('ExecStart=/usr/local/bin/node /opt/bcd/bin/bcd.cjs run --state-dir /var/lib/bcd');
    expect(existsSync(join(machine, 'etc', 'bcd', 'plugins.d'))).toBe(true);
    expect(existsSync(join(machine, 'opt', 'bcd', 'scripts', 'health-check.sh'))).toBe(true);
    const identity = JSON.parse(readFileSync(join(machine, 'var', 'lib', 'bcd', 'node.json'), 'utf8'));
    expect(identity.nodeId).toMatch(/^node_/);
    // The unit's own command line, as systemd would run it.
    const execStart = /^ExecStart=(.*)$/m.exec(unit)![1]!.trim().split(/\s+/);
    daemon = start('bwrap', inMachine(execStart), {}, true);
    const node = await until(
      'the installed node to be ready',
      async () => {
        const n = await env.call<any>('nodes.get', { nodeId: identity.nodeId });
        return n.state === 'ready' ? n : undefined;
      },
      60_000,
    );
    expect(node.poolId).toBe(pool.id);
    // node-pty came with the installer, so the installed daemon can open a node console.
    const session = await until('the installed node’s hello', async () => {
      const found = await sql<{ capabilities: string[] }>`
        select capabilities from compute.node_sessions where node_id = ${identity.nodeId}`.execute(
        env.compute.database.db,
      );
      return found.rows[0];
    });
    expect(session.capabilities).toContain('pty');
  }, 180_000);
});
