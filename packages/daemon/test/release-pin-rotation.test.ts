/**
 * Release keys change only by a signed statement, as real daemons see it (issue 33 item 4): two real
 * `bcd` processes pin release keys at join (`--release-pins`): node A one key (k1, 1 needed), node
 * B two (k1 and k2, both needed), each installed as the package installs it under its supervisor. The deployment, which pins k1 alone, accepts through the real
 * binary a statement k1 signed (epoch 1: k3 and k4, both needed) and one k3 and k4 signed (epoch 2:
 * k2 alone). After the server restarts, each daemon reads the chain in its welcome: A follows it to
 * epoch 2; B, which needs two signatures where the first statement has one, refuses it and keeps its
 * pins, and keeps refusing at the next welcome.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@better-compute/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import {
  bcdJoin,
  daemonConnected,
  type Deployment,
  deployment,
  freePort,
  type Proc,
  root,
  start,
  until,
} from './daemon-support.js';
import { serveHere } from './served-support.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 120_000 });

const cliBin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const daemonDir = join(root, 'packages', 'daemon');
const secret = 'the release-pin rotation test deployment secret';
const scratch = mkdtempSync(join(tmpdir(), 'bcd-release-pins-'));
const pkiPath = join(scratch, 'pki.json');
const keyIds: Record<string, string> = {};
let env: Deployment;
let port = 0;
let stopServer: (() => Promise<void>) | undefined;

interface Node {
  stateDir: string;
  daemon: Proc;
}
const nodes: Record<'a' | 'b', Node> = {} as never;

/** The real binary, in the scratch directory; the token only in the environment. */
function cli(
  args: string[],
  online = false,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        cliBin,
        ...args,
        '--format',
        'compact',
        ...(online ? ['--url', `http://127.0.0.1:${port}`, '--tenant', 'root'] : []),
      ],
      {
        cwd: scratch,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: scratch,
          BETTER_IAM_HOME: join(scratch, 'iam'),
          ...(online ? { BETTER_COMPUTE_TOKEN: env.rootKey } : {}),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}
async function cliJson(args: string[], online = false): Promise<any> {
  const result = await cli(args, online);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

async function startServer(): Promise<void> {
  stopServer = (
    await serveHere(
      {
        database: env.database.url!,
        pki: pkiPath,
        secret,
        rateLimit: false,
        release: { pins: [keyIds.k1!], threshold: 1 },
      },
      port,
    )
  ).stop;
}

const pinsOf = (node: Node) => JSON.parse(readFileSync(join(node.stateDir, 'release-pins.json'), 'utf8'));

beforeAll(async () => {
  env = await deployment();
  port = await freePort();
  for (const name of ['k1', 'k2', 'k3', 'k4'])
    keyIds[name] = (await cliJson(['release', 'keygen', '--out', `${name}.pem`])).keyId;
  writeFileSync(join(scratch, 'pins-a.json'), JSON.stringify({ pins: [keyIds.k1], threshold: 1 }));
  writeFileSync(join(scratch, 'pins-b.json'), JSON.stringify({ pins: [keyIds.k1, keyIds.k2], threshold: 2 }));
  await createPkiBundle({ path: pkiPath, secret, trustDomain: 'release-pins.test' });
  await startServer();
  const site = await env.call('sites.create', { name: 'pins' });
  const pool = await env.call('pools.create', { siteId: site.id, name: 'pins' });
  const token = await env.call('joinTokens.create', { poolId: pool.id, uses: 2, preApproved: true });
  for (const name of ['a', 'b'] as const) {
    const dir = join(scratch, name);
    const stateDir = join(dir, 'state');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    await bcdJoin(`http://127.0.0.1:${port}`, token.token, dir, stateDir, [
      '--release-pins',
      join(scratch, `pins-${name}.json`),
    ]);
    // Installed as the package installs it and run under its supervisor, as an update needs.
    for (const sub of ['bin', 'dist', 'scripts']) mkdirSync(join(dir, sub), { recursive: true });
    for (const file of ['bin/bcd.cjs', 'dist/bcd.cjs', 'dist/supervisor.cjs', 'scripts/health-check.sh'])
      copyFileSync(join(daemonDir, file), join(dir, file));
    nodes[name] = {
      stateDir,
      daemon: start(
        join(dir, 'bin', 'bcd.cjs'),
        [
          'run',
          '--supervise',
          '--state-dir',
          stateDir,
          '--scripts-dir',
          join(dir, 'scripts'),
          '--ssh-dir',
          join(dir, 'ssh'),
        ],
        { NODE_PATH: join(root, 'node_modules') },
      ),
    };
  }
  for (const node of Object.values(nodes)) await daemonConnected(node.stateDir);
});

afterAll(async () => {
  for (const node of Object.values(nodes)) node.daemon.child.kill('SIGKILL');
  await stopServer?.();
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('release keys change by a signed statement', () => {
  it('a daemon follows a valid chain to its end; one that needs two signatures where there is one keeps its pins', async () => {
    expect(pinsOf(nodes.a)).toMatchObject({ pins: [keyIds.k1], threshold: 1, source: 'join' });
    expect(pinsOf(nodes.b)).toMatchObject({ pins: [keyIds.k1, keyIds.k2], threshold: 2, source: 'join' });

    // Epoch 1, by k1 (the deployment's one key): k3 and k4, both needed. Epoch 2, by k3 and k4: k2.
    await cliJson([
      'release',
      'sign-pins',
      '--key',
      'k1.pem',
      '--pins',
      `${keyIds.k3},${keyIds.k4}`,
      '--threshold',
      '2',
      '--epoch',
      '1',
      '--out',
      'epoch-1.json',
    ]);
    await cliJson([
      'release',
      'sign-pins',
      '--key',
      'k3.pem',
      '--pins',
      keyIds.k2!,
      '--threshold',
      '1',
      '--epoch',
      '2',
      '--out',
      'epoch-2a.json',
    ]);
    await cliJson([
      'release',
      'sign-pins',
      '--key',
      'k4.pem',
      '--statement',
      'epoch-2a.json',
      '--out',
      'epoch-2.json',
    ]);
    expect(await cliJson(['releases', 'rotate-pins', 'epoch-1.json'], true)).toMatchObject({
      epoch: 1,
      signers: [keyIds.k1],
    });
    expect(await cliJson(['releases', 'rotate-pins', 'epoch-2.json'], true)).toMatchObject({
      epoch: 2,
      pins: [keyIds.k2],
      signers: [keyIds.k3, keyIds.k4],
    });

    // The daemons read the chain in the welcome of their next session.
    const seen = { a: nodes.a.daemon.err.length, b: nodes.b.daemon.err.length };
    await stopServer!();
    await startServer();
    await until('node A to follow the chain', async () =>
      nodes.a.daemon.err
        .slice(seen.a)
        .some((line) => line.includes('followed the signed release-pin statements')),
    );
    expect(nodes.a.daemon.err.join('\n')).toContain(
      'bcd: followed the signed release-pin statements from epoch 0 to 2: 1 release key(s), 1 needed',
    );
    expect(pinsOf(nodes.a)).toMatchObject({ pins: [keyIds.k2], threshold: 1, epoch: 2, source: 'statement' });

    const refusal =
      'bcd: kept the pinned release keys of epoch 0: the statement of epoch 1 has 1 valid signature by the pinned release keys; 2 are needed';
    await until('node B to refuse the chain', async () =>
      nodes.b.daemon.err.slice(seen.b).some((line) => line.includes(refusal)),
    );
    expect(pinsOf(nodes.b)).toMatchObject({ pins: [keyIds.k1, keyIds.k2], threshold: 2, source: 'join' });
    expect(pinsOf(nodes.b).epoch).toBeUndefined();
    // Neither log carries key material.
    expect([...nodes.a.daemon.err, ...nodes.b.daemon.err].join('\n')).not.toContain('PRIVATE KEY');

    // At the next welcome A holds epoch 2 and has nothing to follow; B refuses again, pins unchanged.
    const again = { a: nodes.a.daemon.err.length, b: nodes.b.daemon.err.length };
    await stopServer!();
    await startServer();
    await until('node B to refuse the chain again', async () =>
      nodes.b.daemon.err.slice(again.b).some((line) => line.includes(refusal)),
    );
    await until('node A’s next session', async () =>
      nodes.a.daemon.err.slice(again.a).some((line) => line.includes('bcd: session up as')),
    );
    expect(nodes.a.daemon.err.slice(again.a).some((line) => line.includes('release-pin'))).toBe(false);
    expect(pinsOf(nodes.a)).toMatchObject({ pins: [keyIds.k2], epoch: 2 });
    expect(pinsOf(nodes.b)).toMatchObject({ pins: [keyIds.k1, keyIds.k2], threshold: 2 });
  });

  it('node A checks updates under the keys it followed to: k1, its key at join, no longer counts; k2 does', async () => {
    const manifest = {
      version: '9.0.0',
      artifacts: [{ platform: `${process.platform}-${process.arch}`, size: 1, sha256: 'a'.repeat(64) }],
      minimumVersion: '0.1.0',
      notes: 'never stored: the daemon stops before fetching it or after',
      createdAt: '2026-06-01T00:00:00.000Z',
    };
    writeFileSync(join(scratch, 'manifest.json'), JSON.stringify(manifest));
    await cliJson(['release', 'sign', '--key', 'k1.pem', 'manifest.json', '--out', 'by-k1.json']);
    await cliJson(['release', 'sign', '--key', 'k2.pem', 'manifest.json', '--out', 'by-k2.json']);
    const nodeA = JSON.parse(readFileSync(join(nodes.a.stateDir, 'node.json'), 'utf8')).nodeId as string;
    // Written straight into the database, as a control plane that was taken over could.
    const sendUpdate = async (file: string) => {
      const id = newId('command');
      await env.database.db
        .insertInto('compute.commands' as never)
        .values({
          id,
          tenant_id: 'root',
          node_id: nodeA,
          kind: 'bcd.update',
          payload: JSON.stringify({
            release: JSON.parse(readFileSync(join(scratch, file), 'utf8')),
            healthTimeoutSeconds: 30,
          }),
          created_at: new Date(),
          expires_at: new Date(Date.now() + 600_000),
        } as never)
        .execute();
      return until(
        `${id} to end`,
        async () => {
          const row = (await env.database.db
            .selectFrom('compute.commands' as never)
            .select(['state', 'error'] as never)
            .where('id' as never, '=', id as never)
            .executeTakeFirst()) as { state: string; error: string | null } | undefined;
          return row && ['succeeded', 'failed', 'cancelled'].includes(row.state) ? row : undefined;
        },
        30_000,
      );
    };
    const byOldKey = await sendUpdate('by-k1.json');
    expect(byOldKey.state).toBe('failed');
    expect(byOldKey.error).toContain('RELEASE_UNVERIFIED');
    // Signed by the key of epoch 2 it passes the signature check and fails later (no build stored).
    const byNewKey = await sendUpdate('by-k2.json');
    expect(byNewKey.state).toBe('failed');
    expect(byNewKey.error).toBe(
      'refused by the node: fetching the build failed: release 9.0.0 is not registered',
    );
  });
});
