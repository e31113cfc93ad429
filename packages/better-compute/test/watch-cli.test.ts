/**
 * `better-compute events watch` through the real binary against a running server (the real node
 * server and embedded Better IAM): --count, --since in both forms, --types, reconnection after the
 * server cut the connection, Ctrl-C, a refusal, and UNSUPPORTED without --url.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPostgresReachable } from '@better-compute/db/testing';
import { liveDeployment, type LiveDeployment } from './watch-support.js';

const root = join(import.meta.dirname, '..', '..', '..');
const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const cwd = mkdtempSync(join(tmpdir(), 'bc-watch-'));
const kind = (await isPostgresReachable()) ? 'postgres' : 'pglite';

interface Running {
  child: ChildProcess;
  lines: string[];
  stderr: () => string;
  exit: Promise<number | null>;
}

function start(args: string[], token: string | undefined): Running {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: cwd,
    BETTER_IAM_HOME: join(cwd, 'iam'),
  };
  if (token) env.BETTER_COMPUTE_TOKEN = token;
  const child = spawn(process.execPath, [bin, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
    let end: number;
    while ((end = out.indexOf('\n')) !== -1) {
      lines.push(out.slice(0, end));
      out = out.slice(end + 1);
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, stderr: () => err, exit };
}

async function until(check: () => boolean, run: Running, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out; the command wrote: ${run.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe(`events watch, the binary against a running server on ${kind}`, { timeout: 120_000 }, () => {
  let d: LiveDeployment;
  let counter = 0;
  const site = async () => {
    const answer = await d.call(
      'sites/create',
      { tenantId: 'root', name: `cli-site-${++counter}` },
      d.keys.root,
    );
    expect(answer.error).toBeUndefined();
    return answer.data as { id: string };
  };

  beforeAll(async () => {
    d = await liveDeployment(kind);
  }, 120_000);
  afterAll(async () => {
    await d?.close();
  });

  it('without --url it is UNSUPPORTED, with a hint', async () => {
    const run = start(['events', 'watch', '--count', '1'], d.keys.root);
    expect(await run.exit).not.toBe(0);
    expect(run.stderr()).toMatch(
      /^UNSUPPORTED: events watch follows a running server’s stream, and needs --url\nhint: Pass --url/,
    );
  });

  it('--types and --since are checked before connecting (exit 2)', async () => {
    const types = Array.from({ length: 21 }, (_, i) => `a${i}.b`).join(',');
    for (const args of [
      ['--types', types],
      ['--types', 'node*'],
      ['--since', 'yesterday'],
    ]) {
      const run = start(['events', 'watch', '--url', d.url, ...args], d.keys.root);
      expect(await run.exit, args.join(' ')).toBe(2);
      expect(run.stderr()).toMatch(/^INVALID_ARGUMENT: /);
    }
  });

  it('--count 2 prints two JSON lines and exits 0; --since resumes after a printed cursor, in either form', async () => {
    const run = start(['events', 'watch', '--url', d.url, '--types', 'site.*', '--count', '2'], d.keys.root);
    await until(() => d.compute.live.size === 1, run);
    const sites = [await site(), await site(), await site()];
    expect(await run.exit).toBe(0);
    expect(run.lines).toHaveLength(2);
    const printed = run.lines.map((line) => JSON.parse(line));
    expect(printed.map((e) => e.subject.id)).toEqual([sites[0]!.id, sites[1]!.id]);
    expect(printed[0]).toMatchObject({ type: 'site.created', tenantId: 'root' });
    expect(printed[0].cursor).toBe(printed[0].position.replace(':', '.'));

    for (const since of [printed[0].cursor, printed[0].position]) {
      const resumed = start(
        ['events', 'watch', '--url', d.url, '--types', 'site.created', '--since', since, '--count', '2'],
        d.keys.root,
      );
      expect(await resumed.exit).toBe(0);
      expect(resumed.lines.map((line) => JSON.parse(line).subject.id)).toEqual([sites[1]!.id, sites[2]!.id]);
    }
  });

  it('prints lines terminal-safe: DEL, C1 controls and U+2028/U+2029 escaped', async () => {
    const run = start(
      ['events', 'watch', '--url', d.url, '--types', 'test.unsafe', '--count', '1'],
      d.keys.root,
    );
    await until(() => d.compute.live.size === 1, run);
    // Written straight to the outbox: event data carries whatever a tenant's names hold.
    const name = `evil\u007f\u009b31m\u2028\u2029${++counter}`;
    const { sql } = await import('kysely');
    await sql`insert into compute.events (id, tx_index, tenant_id, type, subject_type, subject_id, data)
      values (${`evt_unsafe_${counter}`}, 0, 'root', 'test.unsafe', 'test', null, ${JSON.stringify({ name })}::jsonb)`.execute(
      d.database.db,
    );
    expect(await run.exit).toBe(0);
    const line = run.lines[0]!;
    expect(line).not.toMatch(/[\u007f-\u009f\u2028\u2029]/);
    expect(line).toContain('evil\\u007f\\u009b31m\\u2028\\u2029');
    expect(JSON.parse(line).data.name).toBe(name);
  });

  it('reconnects from the last event after the connection broke, and stops on Ctrl-C', async () => {
    const run = start(
      ['events', 'watch', '--url', d.url, '--path', '/api/compute/watch', '--types', 'site.'],
      d.keys.root,
    );
    await until(() => d.compute.live.size === 1, run);
    const first = await site();
    await until(() => run.lines.length === 1, run);
    d.server.closeAllConnections();
    // Let this process's own pooled connections notice they were cut too.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = await site();
    await until(() => run.lines.length === 2, run);
    expect(run.lines.map((line) => JSON.parse(line).subject.id)).toEqual([first.id, second.id]);
    expect(run.stderr()).toMatch(/reconnecting in/);
    run.child.kill('SIGINT');
    expect(await run.exit).toBe(0);
  });

  it('stops on a refusal with its code: a revoked key', async () => {
    const key = await d.compute.embeddedIam!.createApiKey(d.ids.root, { name: 'cli-watch' });
    const run = start(['events', 'watch', '--url', d.url], key.key);
    await until(() => d.compute.live.size === 1, run);
    await d.compute.embeddedIam!.revokeApiKey(key.apiKey.id);
    expect(await run.exit).not.toBe(0);
    expect(run.stderr()).toMatch(/^UNAUTHENTICATED: the credential is unknown, expired or revoked/m);
    // And refused before the stream: the same key again.
    const again = start(['events', 'watch', '--url', d.url], key.key);
    expect(await again.exit).not.toBe(0);
    expect(again.stderr()).toMatch(/^UNAUTHENTICATED: /m);
  });
});
