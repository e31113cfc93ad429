/**
 * Issue 41 item 3 and issue 31 item 7, as the CLI prints them: a refusal names the flag the person
 * gave (`webhooks create --secret-out`, not `--out`), `audit check-proof` prints a key pin whole
 * since it is public, and a secret-looking value in a message is hidden whole, never up to a `+`.
 */
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_SHOWN } from '@better-compute/core';
import { formatCheckpoint } from '../src/audit/checkpoint.js';
import { entryLeafHash, type AuditEntry } from '../src/audit/entry.js';
import { publicKeyPinOf, signNote, verifierKey } from '../src/audit/note.js';
import { PROOF_FORMAT } from '../src/audit/prove.js';
import { createCli, main } from '../src/cli/index.js';
import { captureIO, fakeServer, type FakeServer, scratchDirectory } from './cli-support.js';

const scratch = scratchDirectory('.bc-refusal-text-');
let server: FakeServer;

/** The binary's way, in process: the exit status and what it printed on stderr, line by line. */
async function run(argv: string[], env: Record<string, string> = {}) {
  const { io, err, out } = captureIO({ HOME: scratch, ...env }, { cwd: scratch });
  const code = await main(argv, createCli({ projectCommands: false }), io);
  return { code, err, out };
}

beforeAll(async () => {
  server = await fakeServer({});
});

afterAll(async () => {
  await server?.close();
});

describe('webhooks create and rotate-secret name --secret-out', () => {
  const token = { BETTER_COMPUTE_TOKEN: 'biam_test_token', BETTER_COMPUTE_TENANT: 'acme' };

  it.each([
    [['webhooks', 'create', '--endpoint', 'https://hooks.example.com/x', '--events', 'reservation.*']],
    [['webhooks', 'rotate-secret', 'wh_01k5w000000000000000000000']],
  ])('%j over an existing file: ALREADY_EXISTS naming --secret-out, and nothing is sent', async (argv) => {
    writeFileSync(join(scratch, 'hook.secret'), 'keep me\n');
    const refused = await run([...argv, '--secret-out', 'hook.secret'], {
      ...token,
      BETTER_COMPUTE_URL: server.url,
    });
    expect(refused.code).toBe(1);
    expect(refused.err).toEqual([
      'ALREADY_EXISTS: hook.secret already exists; a signing secret is never written over a file',
      'hint: Pass --secret-out the name of a file that does not exist yet, or move the existing one away.',
    ]);
    expect(readFileSync(join(scratch, 'hook.secret'), 'utf8')).toBe('keep me\n');
    expect(server.calls).toEqual([]);
  });

  it('a --secret-out in a missing directory names --secret-out too', async () => {
    const refused = await run(
      [
        'webhooks', 'create', '--endpoint', 'https://hooks.example.com/x', '--events', 'node.*',
        '--secret-out', 'no-such-dir/hook.secret',
      ],
      { ...token, BETTER_COMPUTE_URL: server.url },
    ); // prettier-ignore
    expect(refused.code).toBe(2);
    expect(refused.err[0]).toMatch(
      /^INVALID_ARGUMENT: the directory of --secret-out no-such-dir\/hook\.secret does not exist: /,
    );
    expect(refused.err[1]).toBe(
      'hint: Create the directory first, or pass --secret-out a path in an existing one.',
    );
    expect(server.calls).toEqual([]);
  });
});

describe('audit check-proof prints a key pin whole', () => {
  /** A one-entry log's proof, signed by a fresh audit key: the proof and that key's pin. */
  function proof(): { file: string; pin: string } {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const entry: AuditEntry = {
      id: 'aud_01k5w000000000000000000000',
      tenant: 'acme',
      actor: 'prn_someone',
      actorKind: 'person',
      action: 'compute:pools.create',
      method: 'pools.create',
      resourceType: 'pool',
      resourceId: null,
      outcome: 'allowed',
      errorCode: null,
      requestId: 'req_1',
      occurredAt: '2026-01-02T03:04:05.123456Z',
    };
    const origin = 'compute.example.com/audit/acme';
    const body = formatCheckpoint({ origin, size: 1, root: entryLeafHash(entry) });
    const file = join(scratch, 'proof.json');
    writeFileSync(
      file,
      JSON.stringify({
        format: PROOF_FORMAT,
        entry,
        leafIndex: 0,
        treeSize: 1,
        inclusion: [],
        checkpoint: signNote(body, origin, privateKey, publicKey),
        signer: verifierKey(origin, publicKey),
      }),
    );
    return { file, pin: publicKeyPinOf(publicKey) };
  }

  it('accepts its own proof, and names the other pin in full when it does not match', async () => {
    const { file, pin } = proof();
    const checked = await run(['audit', 'check-proof', file, '--pin', pin]);
    expect(checked.err).toEqual([]);
    expect(JSON.parse(checked.out[0]!)).toMatchObject({ ok: true, pin });
    // A pin with a stretch of 32 characters between its + and / signs, which a mask would take.
    let other = '';
    while (!/[A-Za-z0-9_-]{32,}/.test(other.slice('sha256/'.length)) || !/[+/]/.test(other.slice(7)))
      other = publicKeyPinOf(generateKeyPairSync('ed25519').publicKey);
    const refused = await run(['audit', 'check-proof', file, '--pin', other]);
    expect(refused.code).toBe(1);
    expect(refused.err[0]).toBe(`INVALID_PROOF: the checkpoint is signed by a key whose pin is not ${other}`);
  });
});

describe('a secret-looking value in a message is hidden whole', () => {
  it('a key pasted as a file name is not shown, not even after its + or /', async () => {
    const pasted = 'Zq3xW8vN2kLp5RtY7uB0cD4eF6gH9jKm+A1sT/u4XyZ=';
    const refused = await run(['audit', 'check-proof', pasted, '--pin', `sha256/${'A'.repeat(43)}=`]);
    expect(refused.code).toBe(1);
    expect(refused.err[0]).toBe(`NOT_FOUND: cannot read ${SECRET_SHOWN} (ENOENT)`);
    for (const piece of ['Zq3x', 'A1sT', 'u4XyZ', '+', '/u'])
      expect(refused.err.join('\n')).not.toContain(piece);
  });
});
