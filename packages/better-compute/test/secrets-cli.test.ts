/**
 * The secrets commands through the real binary against `dev --memory`: put from standard input and
 * from a file (each a new version, kept byte for byte), the metadata only in the output; a value on
 * the command line (`--value`, a second argument) refused before anything is sent, and never echoed;
 * list, get, delete; and the value in no output of the CLI or the server.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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

const work = mkdtempSync(join(tmpdir(), 'bc-secrets-cli-'));
let server: RunningServer | undefined;
let url = '';
let dev: DevServer['dev'];
const MARK = `cli${'4b8e0f1d2c'.repeat(3)}`;

function compute(args: string[], token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return runCompute(args, { cwd: work, url, token, timeoutMs: 30_000 });
}

/** The binary with `input` on its standard input. */
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
    child.once('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(input);
  });
}

const outputs: string[] = [];
function seen(result: RunResult) {
  outputs.push(result.stdout, result.stderr);
  return result;
}

beforeAll(async () => {
  ({ server, url, dev } = await startDev(work, []));
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('secrets commands through the real binary', () => {
  let id = '';

  it('put --stdin creates version 1 and prints its metadata, never the value', async () => {
    const result = seen(await withStdin(['secrets', 'put', 'openai', '--stdin'], `sk-${MARK}`));
    expect(result.status, result.stderr).toBe(0);
    const printed = JSON.parse(result.stdout);
    id = printed.id;
    expect(printed).toEqual({
      id: expect.stringMatching(/^sec_/),
      tenantId: 'acme',
      name: 'openai',
      version: 1,
      reference: `secret://acme/${printed.id}`,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
  });

  it('put --value-file adds a version, by name or by id; the file is read as it is', async () => {
    writeFileSync(join(work, 'openai.key'), `sk-${MARK}-2\n`);
    const byName = seen(await compute(['secrets', 'put', 'openai', '--value-file', 'openai.key']));
    expect(byName.status, byName.stderr).toBe(0);
    expect(JSON.parse(byName.stdout)).toMatchObject({ id, version: 2 });
    const byId = seen(
      await compute(['secrets', 'put', id, '--value-file', 'openai.key', '--if-version', '2']),
    );
    expect(JSON.parse(byId.stdout)).toMatchObject({ id, version: 3 });
    const stale = seen(
      await compute(['secrets', 'put', id, '--value-file', 'openai.key', '--if-version', '2']),
    );
    expect(stale.status).not.toBe(0);
    expect(stale.stderr).toMatch(/^CONFLICT:/m);
  });

  it('a value on the command line is refused before anything is sent, and never echoed', async () => {
    for (const args of [
      ['secrets', 'put', 'leak', '--value', `sk-${MARK}`],
      ['secrets', 'put', 'leak', `--value=sk-${MARK}`],
      ['secrets', 'put', 'leak', `sk-${MARK}`],
      ['secrets', 'put', 'leak'],
    ]) {
      const refused = seen(await compute(args));
      expect(refused.status, args.join(' ')).toBe(2);
      expect(refused.stderr).toMatch(/^INVALID_ARGUMENT:/m);
    }
    const both = seen(
      await withStdin(['secrets', 'put', 'leak', '--stdin', '--value-file', 'openai.key'], 'x'),
    );
    expect(both.status).toBe(2);
    expect(both.stderr).toContain('exactly one of --value-file FILE and --stdin');
    writeFileSync(join(work, 'binary.key'), Buffer.from([0xff, 0xfe, 0x00]));
    const binary = seen(await compute(['secrets', 'put', 'leak', '--value-file', 'binary.key']));
    expect(binary.stderr).toContain('not UTF-8');
    writeFileSync(join(work, 'big.key'), 'x'.repeat(32_769));
    expect(seen(await compute(['secrets', 'put', 'leak', '--value-file', 'big.key'])).stderr).toContain(
      'at most 32768',
    );
    const empty = seen(await withStdin(['secrets', 'put', 'leak', '--stdin'], ''));
    expect(empty.stderr).toContain('the value is empty');
    const listed = JSON.parse(seen(await compute(['secrets', 'list', '--format', 'json'])).stdout);
    expect(listed.items.map((s: { name: string }) => s.name)).toEqual(['openai']);
  });

  it('list is a table of names, versions and references; get shows one; delete removes it', async () => {
    const table = seen(await compute(['secrets', 'list']));
    expect(table.stdout).toMatch(new RegExp(`${id}\\s+openai\\s+3\\s+secret://acme/${id}`));
    expect(seen(await compute(['secrets', 'get', 'openai', '--query', 'reference'])).stdout.trim()).toBe(
      `secret://acme/${id}`,
    );
    // A member reads names only; putting and deleting is an administrator's.
    const member = seen(await withStdin(['secrets', 'put', 'mine', '--stdin'], MARK, dev.acmeMember.apiKey));
    expect(member.stderr).toMatch(/^ACCESS_DENIED:/m);
    const deleted = seen(await compute(['secrets', 'delete', 'openai']));
    expect(JSON.parse(deleted.stdout)).toEqual({ id, name: 'openai', deleted: true });
    expect(seen(await compute(['secrets', 'get', id])).stderr).toMatch(/^NOT_FOUND:/m);
  });

  it('the value is in no output: not the commands’, not the server’s', () => {
    for (const text of [...outputs, server!.output()]) expect(text).not.toContain(MARK);
  });
});
