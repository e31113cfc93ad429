/**
 * A rotated command root reaches a daemon that pinned the old one: a real `bcd` pins the PKI
 * bundle's command root on its first session; after `pki rotate-command-root` (twice) and a
 * restarted server, it follows the signed statements, pins the new root and runs the commands it
 * signs. A server with an unrelated bundle gets nothing adopted, and its commands are refused.
 * Unit cases: broken, forged, partial and malformed chains.
 */
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import { rotateCommandRoot } from '../../better-compute/src/pki/rotation.js';
import { decideCommandRoot } from '../src/command-root.js';
import { bcd, type Deployment, deployment, freePort, type Proc, until } from './daemon-support.js';
import { serveHere } from './served-support.js';

const secret = 'the rotation test deployment secret';
const scratch = mkdtempSync(join(tmpdir(), 'bcd-rotation-'));
const pkiPath = join(scratch, 'pki.json');
const stateDir = join(scratch, 'state');
const gpuFile = join(scratch, 'gpus.json');
let env: Deployment;
let port: number;
let daemon: Proc | undefined;
let stopServer: (() => Promise<void>) | undefined;
let nodeId = '';

const pem = (key: { commandRoot: { publicKey: import('node:crypto').KeyObject } }) =>
  key.commandRoot.publicKey.export({ type: 'spki', format: 'pem' }).toString();
const pinned = () => JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')).commandRoot as string;

/** `serve` with every role on the test's database, signing with the bundle at pkiPath. */
async function startServer(): Promise<void> {
  stopServer = (
    await serveHere({ database: env.database.url!, pki: pkiPath, secret, rateLimit: false }, port)
  ).stop;
}

async function runCommand(): Promise<{ state: string; error: string | null }> {
  const command = await env.call<any>('commands.run', { nodeId, kind: 'inventory.refresh' });
  return until(`${command.id} to finish`, async () => {
    const found = await env.call<any>('commands.get', { commandId: command.id });
    return ['succeeded', 'failed'].includes(found.state) ? found : undefined;
  });
}

beforeAll(async () => {
  env = await deployment();
  port = await freePort();
  writeFileSync(gpuFile, JSON.stringify({ gpus: [] }));
  await createPkiBundle({ path: pkiPath, secret });
  await startServer();
}, 120_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  await stopServer?.();
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a command-root rotation, as a real daemon sees it', () => {
  it('pins the bundle’s root on the first session and runs its commands', async () => {
    const site = await env.call('sites.create', { name: 'rot' });
    const pool = await env.call('pools.create', { siteId: site.id, name: 'rot-pool' });
    const token = await env.call('joinTokens.create', { poolId: pool.id, preApproved: true });
    const tokenFile = join(scratch, 'join-token');
    writeFileSync(tokenFile, `${token.token}\n`, { mode: 0o600 });
    const joining = bcd([
      'join',
      '--url',
      `http://127.0.0.1:${port}`,
      '--token-file',
      tokenFile,
      '--state-dir',
      stateDir,
      '--gpu-inventory',
      gpuFile,
    ]);
    expect(await joining.exited).toBe(0);
    nodeId = JSON.parse(joining.out[0]!).nodeId;
    daemon = bcd(['run', '--state-dir', stateDir, '--gpu-inventory', gpuFile]);
    await until('the root to be pinned', async () =>
      daemon!.err.some((line) => line.includes('pinned the command root')),
    );
    const bundle = JSON.parse(readFileSync(pkiPath, 'utf8'));
    expect(createPublicKey(pinned()).export({ type: 'spki', format: 'der' }).toString('base64')).toBe(
      createPublicKey(bundle.commandRoot.publicKey)
        .export({ type: 'spki', format: 'der' })
        .toString('base64'),
    );
    expect(await runCommand()).toMatchObject({ state: 'succeeded' });
  }, 120_000);

  it('follows two signed rotations to the new root after the server restarts, and runs its commands', async () => {
    await stopServer!();
    await rotateCommandRoot(pkiPath, secret);
    const { bundle } = await rotateCommandRoot(pkiPath, secret);
    await startServer();
    await until(
      'the daemon to follow the rotation',
      async () => daemon!.err.some((line) => line.includes('followed the signed command-root rotation')),
      30_000,
    );
    expect(pinned().trim()).toBe(pem(bundle).trim());
    expect(await runCommand()).toMatchObject({ state: 'succeeded' });
  }, 120_000);

  it('keeps its pin against a server with an unrelated bundle, whose commands it refuses', async () => {
    await stopServer!();
    const before = pinned();
    await createPkiBundle({ path: pkiPath, secret, force: true });
    await startServer();
    await until(
      'the daemon to keep its pin',
      async () => daemon!.err.some((line) => line.includes('kept the pinned command root')),
      30_000,
    );
    expect(pinned()).toBe(before);
    const refused = await runCommand();
    expect(refused.state).toBe('failed');
    expect(refused.error).toMatch(/signature/);
  }, 120_000);
});

describe('decideCommandRoot', () => {
  it('adopts only a key the statements lead to from the pinned one', async () => {
    const path = join(scratch, 'unit.json');
    const first = await createPkiBundle({ path, secret });
    const one = await rotateCommandRoot(path, secret);
    const two = await rotateCommandRoot(path, secret);
    const chain = two.bundle.commandRootRotations;
    expect(decideCommandRoot(pem(first), pem(two.bundle), chain, two.bundle.trustDomain)).toMatchObject({
      kind: 'rotated',
    });
    expect(decideCommandRoot(pem(one.bundle), pem(two.bundle), chain, undefined)).toMatchObject({
      kind: 'rotated',
    });
    expect(decideCommandRoot(pem(two.bundle), pem(two.bundle), [], undefined)).toEqual({ kind: 'same' });
    // A chain with a step missing, none at all, or one for another trust domain.
    expect(decideCommandRoot(pem(first), pem(two.bundle), [chain[1]], undefined).kind).toBe('refused');
    expect(decideCommandRoot(pem(first), pem(two.bundle), [], undefined).kind).toBe('refused');
    expect(decideCommandRoot(pem(first), pem(two.bundle), chain, 'elsewhere.example').kind).toBe('refused');
    // A statement whose text was changed, or signed by a key that is not the pinned one.
    const edited = { ...chain[0]!, statement: chain[0]!.statement.replace('at: ', 'at: 1') };
    expect(decideCommandRoot(pem(first), pem(two.bundle), [edited, chain[1]], undefined).kind).toBe(
      'refused',
    );
    const stranger = generateKeyPairSync('ed25519')
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    expect(decideCommandRoot(stranger, pem(two.bundle), chain, undefined).kind).toBe('refused');
    // Statements that lead somewhere else than the announced key.
    expect(decideCommandRoot(pem(first), stranger, chain, undefined).kind).toBe('refused');
    // Malformed announcements never throw.
    for (const rotations of [null, 'x', [null], [{ from: 1 }], Array(10_000).fill(chain[0])])
      expect(decideCommandRoot(pem(first), pem(two.bundle), rotations, undefined).kind).toBe('refused');
    expect(decideCommandRoot(pem(first), 'not a key\u0000', chain, undefined).kind).toBe('refused');
  });
});
