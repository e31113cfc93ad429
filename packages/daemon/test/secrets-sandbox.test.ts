/**
 * The guide's sandbox-template example with `--env OPENAI_API_KEY=secret://…`, end to end on this
 * machine: dev on a PostgreSQL database with its real node (bcd, bubblewrap), a secret put from
 * standard input through the real CLI, a template naming it, a sandbox created from it, and
 * `sandbox exec` over OpenSSH reading the variable inside (in a session, and in the sandbox's pid 1).
 * Then the secret's bytes are searched for everywhere else they could be: the database dump
 * (pg_dump: the secrets table, commands, workflows, the outbox, the audit log, kept answers), the
 * server's and the node's log, the events and every answer the CLI printed.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '@better-compute/db/testing';
import { ensureGuestImage } from '../../better-compute/test/guest-support.js';
import { bwrapAvailable } from '../src/runtimes/index.js';
import {
  computeBin,
  type DevServer,
  runCompute,
  type RunResult,
  startDev,
} from '../../../test/e2e/support.js';

const work = mkdtempSync(join(tmpdir(), 'bc-secrets-sandbox-'));
const deploymentSecret = `secrets-e2e-${randomBytes(16).toString('hex')}`;
/** What is searched for: unique, and in the middle of a value with a quote and a line break. */
const MARK = `mk${randomBytes(12).toString('hex')}`;
const VALUE = `sk-proj-${MARK} it's\nsecond line`;
let database: TestDatabase | undefined;
let dev: DevServer;
let member = '';
const printed: string[] = [];

async function cli(args: string[], token = member, input?: string): Promise<RunResult> {
  if (input === undefined) {
    const result = await runCompute(args, { cwd: work, url: dev.url, token, timeoutMs: 120_000 });
    printed.push(result.stdout, result.stderr);
    return result;
  }
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [computeBin, ...args], {
      cwd: work,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: work,
        BETTER_COMPUTE_URL: dev.url,
        BETTER_COMPUTE_TOKEN: token,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (status) => {
      printed.push(stdout, stderr);
      resolve({ status, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

async function json(args: string[], token = member, input?: string) {
  const result = await cli([...args, '--format', 'json'], token, input);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

const reachable = bwrapAvailable() && (await isPostgresReachable());

describe.skipIf(!reachable)('a secret in a real bubblewrap sandbox', () => {
  beforeAll(async () => {
    const image = await ensureGuestImage();
    database = await createTestDatabase('postgres', 2);
    const pki = join(work, 'pki.json');
    execFileSync(process.execPath, [computeBin, 'pki', 'init', '--pki', pki], {
      cwd: work,
      env: { PATH: process.env.PATH ?? '', HOME: work, BETTER_COMPUTE_SECRET: deploymentSecret },
    });
    writeFileSync(
      join(work, 'better-compute.config.mjs'),
      `export default ${JSON.stringify({ database: database.url, pki, secret: deploymentSecret })};\n`,
    );
    mkdirSync(join(work, '.ssh'), { mode: 0o700 });
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(work, '.ssh', 'id_ed25519')]);
    dev = await startDev(work, ['--node'], {
      ready: /acme's sandbox template (sbxt_[0-9a-z]+)/,
      timeoutMs: 180_000,
      env: { BETTER_COMPUTE_GUEST_CACHE: dirname(image.dir) },
    });
    member = JSON.parse(readFileSync(join(work, '.better-compute', 'dev-memory.json'), 'utf8')).acmeMember
      .sessionToken;
  }, 600_000);

  afterAll(async () => {
    await dev?.server.stop();
    await database?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the variable is set inside the sandbox, and its bytes are nowhere else', async () => {
    const admin = dev.dev.acmeAdmin.apiKey;
    const secret = await json(['secrets', 'put', 'openai', '--stdin'], admin, VALUE);
    expect(secret).toMatchObject({ name: 'openai', version: 1, reference: `secret://acme/${secret.id}` });
    const shell = (await json(['sandbox', 'templates'], admin)).items.find(
      (t: { name: string }) => t.name === 'shell',
    );
    // The guide's example, on this node's pool, with no warm pool (the node has two cores).
    const template = await json(
      ['sandbox-template', 'create', '--name', 'python', '--pool', shell.poolId, '--flavor', shell.flavorId,
        '--image', shell.imageId, '--warm-min', '0', '--max-ttl', '4h',
        '--env', `OPENAI_API_KEY=${secret.reference}`, '--network', 'private'],
      admin,
    ); // prettier-ignore
    expect(template.env).toEqual([{ name: 'OPENAI_API_KEY', secretRef: secret.reference }]);
    let sandbox = await json(['sandbox', 'create', '--template', template.id, '--wait', '30']);
    for (let i = 0; i < 240 && sandbox.state === 'starting'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      sandbox = await json(['sandbox', 'get', sandbox.id]);
    }
    expect(sandbox.state, JSON.stringify(sandbox)).toBe('running');
    const session = await cli(['sandbox', 'exec', sandbox.id, '--', 'printenv', 'OPENAI_API_KEY']);
    expect(session.status, session.stderr).toBe(0);
    expect(session.stdout).toBe(`${VALUE}\n`);
    const pid1 = await cli(['sandbox', 'exec', sandbox.id, '--', 'sh', '-c',
      'tr "\\0" "\\n" </proc/1/environ | grep -c "^OPENAI_API_KEY=sk-proj-"']); // prettier-ignore
    expect(pid1.stdout.trim(), pid1.stderr).toBe('1');
    // The daemon's own environment is not the sandbox's.
    const inherited = await cli(['sandbox', 'exec', sandbox.id, '--', 'sh', '-c',
      'tr "\\0" "\\n" </proc/1/environ | grep -c BETTER_COMPUTE || true']); // prettier-ignore
    expect(inherited.stdout.trim()).toBe('0');
    // Those outputs held it, as asked; everything after this must not.
    printed.length = 0;

    await json(['sandbox', 'delete', sandbox.id]);
    for (let i = 0; i < 150; i++) {
      if ((await json(['sandbox', 'get', sandbox.id])).state === 'deleted') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const events = await cli(['events', 'list', '--limit', '500', '--format', 'json'], admin);
    expect(events.status, events.stderr).toBe(0);
    const types = JSON.parse(events.stdout).items.map((e: { type: string }) => e.type);
    expect(types).toEqual(expect.arrayContaining(['secret.put', 'sandbox.created', 'sandbox.deleted']));
    const commands = await cli(['commands', 'list', '--node', sandbox.nodeId, '--format', 'json'],
      dev.dev.rootAdmin.apiKey); // prettier-ignore
    expect(commands.status, commands.stderr).toBe(0);
    const start = JSON.parse(commands.stdout).items.find(
      (c: { kind: string; payload: { sandboxId?: string } }) =>
        c.kind === 'sandbox.create' && c.payload.sandboxId === sandbox.id,
    );
    expect(start).toMatchObject({
      state: 'succeeded',
      payload: { env: [{ name: 'OPENAI_API_KEY', secretRef: secret.reference }] },
    });

    const dump = execFileSync('pg_dump', ['--no-owner', '-d', database!.url!], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    });
    // The dump is whole: the secret's row (sealed), the command that named it, its audit entry.
    expect(dump).toContain(secret.id);
    expect(dump).toContain('compute:secrets:write');
    expect(dump).toMatch(/v1\.[A-Za-z0-9_-]+\./);
    expect(dump).toContain('OPENAI_API_KEY');
    for (const [where, text] of [
      ['the database dump', dump],
      ['the server’s and the node’s log', dev.server.output()],
      ['the CLI’s outputs', printed.join('\n')],
    ] as const)
      expect(text.includes(MARK), where).toBe(false);
  }, 600_000);
});
