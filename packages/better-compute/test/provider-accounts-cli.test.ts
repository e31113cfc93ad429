/**
 * The provider-accounts commands through the real binary against `dev --memory`: create from a file
 * and from standard input, list as a table, get, update with --if-version, offers (real OpenSSH to a
 * port where nothing listens: the host unreachable, with the reason), delete; and the refusals a
 * person meets: no --config-file, a file that is not JSON, a literal key refused before anything is
 * sent (no account appears), an unknown field named by its path, an id of the wrong kind, a
 * member's create. The key's bytes are in no output.
 */
import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  computeBin,
  type DevServer,
  type RunResult,
  type RunningServer,
  runCompute,
  startDev,
} from '../../../test/e2e/support.js';

const work = mkdtempSync(join(tmpdir(), 'bc-pacct-cli-'));
let server: RunningServer | undefined;
let url = '';
let dev: DevServer['dev'];
const PRIVATE_KEY = generateKeyPairSync('ed25519')
  .privateKey.export({ format: 'pem', type: 'pkcs8' })
  .toString();
const KEY_BODY = PRIVATE_KEY.split('\n')[1]!;
const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBr0S7JUZiD1ijqIdu2S5gMYFr2LSf4VfeZuYUyQmO7x';
const outputs: string[] = [];
let keyRef = '';
let port = 0;

function seen(result: RunResult) {
  outputs.push(result.stdout, result.stderr);
  return result;
}

async function compute(args: string[], token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return seen(await runCompute(args, { cwd: work, url, token, timeoutMs: 30_000 }));
}

function withStdin(args: string[], input: string, token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [computeBin, ...args], {
      cwd: work,
      env: { PATH: process.env.PATH ?? '', HOME: work, BETTER_COMPUTE_URL: url, BETTER_COMPUTE_TOKEN: token },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (status) => resolve(seen({ status, stdout, stderr })));
    child.stdin.end(input);
  });
}

async function json(args: string[]) {
  const result = await compute([...args, '--format', 'json']);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

const code = (result: RunResult) => /^([A-Z_]+):/m.exec(result.stderr)?.[1];

function config(change: (c: any) => void = () => {}) {
  const c: any = {
    name: 'rack-7',
    driver: 'ssh',
    settings: {
      joinUrl: 'https://compute.example.com',
      hosts: [{ address: `root@127.0.0.1:${port}`, hostKey: HOST_KEY }],
    },
    credentials: { privateKey: keyRef },
  };
  change(c);
  return c;
}

beforeAll(async () => {
  ({ server, url, dev } = await startDev(work, []));
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  port = (closed.address() as { port: number }).port;
  await new Promise((resolve) => closed.close(resolve));
  writeFileSync(join(work, 'rack.key'), PRIVATE_KEY, { mode: 0o600 });
  const put = await compute(['secrets', 'put', 'rack-key', '--value-file', 'rack.key']);
  expect(put.status, put.stderr).toBe(0);
  keyRef = JSON.parse(put.stdout).reference;
  writeFileSync(join(work, 'rack.json'), JSON.stringify(config(), null, 2));
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('provider-accounts commands through the real binary', () => {
  let id = '';

  it('a literal key is refused before anything is sent; create stores the file, list and get show it', async () => {
    writeFileSync(
      join(work, 'literal.json'),
      JSON.stringify(config((c) => (c.credentials.privateKey = PRIVATE_KEY))),
    );
    const literal = await compute(['provider-accounts', 'create', '--config-file', 'literal.json']);
    expect(literal.status).not.toBe(0);
    expect(code(literal)).toBe('INVALID_ARGUMENT');
    expect(literal.stderr).toContain('nothing was sent');
    writeFileSync(
      join(work, 'plain.json'),
      JSON.stringify(config((c) => (c.credentials.privateKey = 'hunter2'))),
    );
    const plain = await compute(['provider-accounts', 'create', '--config-file', 'plain.json']);
    expect(plain.stderr).toContain('credentials.privateKey is not a secret reference');
    expect((await json(['provider-accounts', 'list'])).items).toEqual([]);
    const created = await json(['provider-accounts', 'create', '--config-file', 'rack.json']);
    id = created.id;
    expect(created).toMatchObject({
      id: expect.stringMatching(/^pacct_/),
      name: 'rack-7',
      version: 1,
      config: config(),
    });
    const table = await compute(['provider-accounts', 'list']);
    expect(table.stdout).toMatch(/id\s+name\s+driver\s+version\s+hosts\s+updated/);
    expect(table.stdout).toContain('rack-7');
    expect(await json(['provider-accounts', 'get', id])).toMatchObject({ id, bootstraps: [] });
  });

  it('update takes standard input at a version; a stale version is CONFLICT', async () => {
    const changed = JSON.stringify(config((c) => (c.description = 'rack seven')));
    const stale = await withStdin(
      ['provider-accounts', 'update', id, '--config-file', '-', '--if-version', '3'],
      changed,
    );
    expect(code(stale)).toBe('CONFLICT');
    const updated = await withStdin(
      ['provider-accounts', 'update', id, '--config-file', '-', '--if-version', '1'],
      changed,
    );
    expect(updated.status, updated.stderr).toBe(0);
    expect(JSON.parse(updated.stdout)).toMatchObject({ version: 2, config: { description: 'rack seven' } });
  });

  it('offers runs real OpenSSH: the host where nothing listens is unreachable, with the reason', async () => {
    const offers = await json(['provider-accounts', 'offers', id]);
    expect(offers.offers).toEqual([
      expect.objectContaining({
        host: `root@127.0.0.1:${port}`,
        reachable: false,
        error: expect.stringContaining('could not reach'),
      }),
    ]);
  });

  it('bad input is refused with its code and a hint, and changes nothing', async () => {
    expect(code(await compute(['provider-accounts', 'create']))).toBe('INVALID_ARGUMENT');
    writeFileSync(join(work, 'broken.json'), '{"name": ');
    const broken = await compute(['provider-accounts', 'create', '--config-file', 'broken.json']);
    expect(broken.stderr).toContain('is not JSON');
    writeFileSync(
      join(work, 'extra.json'),
      JSON.stringify(config((c) => ((c.name = 'extra'), (c.settings.region = 'eu')))),
    );
    const extra = await compute(['provider-accounts', 'create', '--config-file', 'extra.json']);
    expect(code(extra)).toBe('INVALID_ARGUMENT');
    expect(extra.stderr).toContain('region');
    expect(code(await compute(['provider-accounts', 'get', 'pool_01k5w7f2x8k3m9q4r6t1v0z2y3']))).toBe(
      'INVALID_ARGUMENT',
    );
    expect(code(await compute(['provider-accounts', 'bootstrap', id]))).toBe('INVALID_ARGUMENT');
    const member = await compute(
      ['provider-accounts', 'create', '--config-file', 'rack.json'],
      dev.acmeMember.apiKey,
    );
    expect(code(member)).toBe('ACCESS_DENIED');
    expect((await json(['provider-accounts', 'list'])).items).toHaveLength(1);
  });

  it('delete at its version removes it; the key’s bytes were in no output', async () => {
    expect(await json(['provider-accounts', 'delete', id, '--if-version', '2'])).toEqual({
      id,
      name: 'rack-7',
      deleted: true,
    });
    expect((await json(['provider-accounts', 'list'])).items).toEqual([]);
    expect(outputs.join('\n')).not.toContain(KEY_BODY);
  });
});
