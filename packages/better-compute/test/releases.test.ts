/**
 * Signed bcd releases (issue 33 items 1 and 2) through the real binary: the offline tools `release
 * keygen`, `sign`, `cosign` and `verify` (0600 keys never written over, a threshold of distinct
 * pinned keys, a tampered manifest, an unknown field, a key file others can read), `release RSV`
 * still reaching reservations, and `releases register`, `list` and `get` against a real server on
 * each database, whose configuration pins two release keys with a threshold of two: refused below
 * the threshold, stored once, the platform's only (another tenant is ACCESS_DENIED), and no hostile
 * input answered with a 5xx.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import { closeServer, listen } from '../src/host/serve.js';

const kinds = await testDatabaseKinds();
const bin = join(import.meta.dirname, '..', 'bin', 'better-compute.cjs');
const dir = mkdtempSync(join(tmpdir(), 'bc-release-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** The real binary, asynchronously: a server in this process keeps answering while it runs. */
function run(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', HOME: dir, BETTER_IAM_HOME: join(dir, 'iam'), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
}
const codeOf = (result: Run) => /^([A-Z_]+):/m.exec(result.stderr)?.[1];
const json = (result: Run) => {
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
};

const artifact = new TextEncoder().encode('#!/bin/sh\nexec bcd-1.1.0 "$@"\n');
const manifest = {
  version: '1.1.0',
  artifacts: [
    {
      platform: 'linux-x64',
      size: artifact.length,
      sha256: (await import('node:crypto')).createHash('sha256').update(artifact).digest('hex'),
      url: 'https://releases.example.com/bcd/1.1.0/linux-x64',
    },
  ],
  minimumVersion: '1.0.0',
  notes: 'Faster joins; the heartbeat race is fixed.',
  createdAt: '2026-05-01T12:00:00.000Z',
};
writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));

const keys: Record<'first' | 'second' | 'stranger', string> = { first: '', second: '', stranger: '' };

beforeAll(async () => {
  for (const name of Object.keys(keys) as (keyof typeof keys)[]) {
    keys[name] = json(await run(['release', 'keygen', '--out', `${name}.pem`])).keyId;
  }
  // 2 of 2, and one signed only by the first key.
  json(await run(['release', 'sign', '--key', 'first.pem', 'manifest.json', '--out', 'one.json']));
  json(await run(['release', 'cosign', '--key', 'second.pem', 'one.json', '--out', 'two.json']));
}, 120_000);

const read = (name: string) => readFileSync(join(dir, name), 'utf8');

/** Writes `document` as NAME.json and signs it with each key in turn (sign, then cosign), through the binary. */
async function signedFile(name: string, document: unknown, signers: string[]): Promise<string> {
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(document));
  let file = `${name}.json`;
  for (const [i, signer] of signers.entries()) {
    const out = `${name}-${i + 1}.json`;
    json(await run(['release', i === 0 ? 'sign' : 'cosign', '--key', `${signer}.pem`, file, '--out', out]));
    file = out;
  }
  return file;
}

describe('release keygen, sign, cosign and verify (real binary, offline)', () => {
  it('keygen writes a 0600 key and PATH.pub, prints the key id in the pin form, and never writes over either', async () => {
    expect(keys.first).toMatch(/^sha256\/[A-Za-z0-9+/]{43}=$/);
    expect(statSync(join(dir, 'first.pem')).mode & 0o777).toBe(0o600);
    expect(read('first.pem')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(read('first.pem.pub')).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    const before = read('first.pem');
    const again = await run(['release', 'keygen', '--out', 'first.pem']);
    expect([again.status, codeOf(again)]).toEqual([1, 'ALREADY_EXISTS']);
    expect(read('first.pem')).toBe(before);
    writeFileSync(join(dir, 'taken.pem.pub'), 'x');
    expect(codeOf(await run(['release', 'keygen', '--out', 'taken.pem']))).toBe('ALREADY_EXISTS');
    expect(existsSync(join(dir, 'taken.pem'))).toBe(false);
  });

  it('sign then cosign make an envelope that verifies 2 of 2, offline', async () => {
    const envelope = JSON.parse(read('two.json'));
    expect(envelope.manifest).toEqual(manifest);
    expect(envelope.signatures.map((s: { keyId: string }) => s.keyId)).toEqual([keys.first, keys.second]);
    const verified = json(
      await run([
        'release',
        'verify',
        '--pin',
        keys.first,
        '--pin',
        keys.second,
        '--threshold',
        '2',
        'two.json',
      ]),
    );
    expect(verified).toMatchObject({
      verified: true,
      version: '1.1.0',
      signers: [keys.first, keys.second],
      threshold: 2,
    });
    // Without --out the envelope goes to stdout.
    const printed = json(
      await run(['release', 'sign', '--key', 'second.pem', 'manifest.json', '--format', 'compact']),
    );
    expect(printed.signatures[0].keyId).toBe(keys.second);
  });

  it('one signature where 2 of 2 are pinned is RELEASE_UNVERIFIED; a key that signed already cannot cosign', async () => {
    const one = await run(['release', 'verify', '--pin', keys.first, '--pin', keys.second, 'one.json']);
    expect([one.status, codeOf(one)]).toEqual([1, 'RELEASE_UNVERIFIED']);
    expect(one.stderr).toContain('release 1.1.0 has 1 valid signature by pinned keys; 2 are needed');
    // A signer nobody pinned does not count towards the threshold.
    json(await run(['release', 'cosign', '--key', 'stranger.pem', 'one.json', '--out', 'stranger.json']));
    const stranger = await run([
      'release',
      'verify',
      '--pin',
      keys.first,
      '--pin',
      keys.second,
      'stranger.json',
    ]);
    expect(codeOf(stranger)).toBe('RELEASE_UNVERIFIED');
    const twice = await run(['release', 'cosign', '--key', 'first.pem', 'one.json']);
    expect([twice.status, codeOf(twice)]).toEqual([1, 'ALREADY_EXISTS']);
  });

  it('a manifest changed after signing is refused by verify and by cosign', async () => {
    const tampered = JSON.parse(read('two.json'));
    tampered.manifest.minimumVersion = '0.1.0';
    writeFileSync(join(dir, 'tampered.json'), JSON.stringify(tampered));
    const verify = await run([
      'release',
      'verify',
      '--pin',
      keys.first,
      '--pin',
      keys.second,
      'tampered.json',
    ]);
    expect(codeOf(verify)).toBe('RELEASE_UNVERIFIED');
    expect(verify.stderr).toContain('signed something else');
    const cosign = await run([
      'release',
      'cosign',
      '--key',
      'stranger.pem',
      'tampered.json',
      '--out',
      'never.json',
    ]);
    expect(codeOf(cosign)).toBe('RELEASE_UNVERIFIED');
    expect(existsSync(join(dir, 'never.json'))).toBe(false);
  });

  it('a manifest with an unknown field is INVALID_ARGUMENT naming it, and nothing is written', async () => {
    writeFileSync(join(dir, 'extra.json'), JSON.stringify({ ...manifest, channel: 'beta' }));
    const result = await run([
      'release',
      'sign',
      '--key',
      'first.pem',
      'extra.json',
      '--out',
      'extra-signed.json',
    ]);
    expect([result.status, codeOf(result)]).toEqual([2, 'INVALID_ARGUMENT']);
    expect(result.stderr).toContain(
      'extra.json is not a release manifest: manifest has a field the format does not know: channel',
    );
    expect(existsSync(join(dir, 'extra-signed.json'))).toBe(false);
  });

  it('an existing --out is ALREADY_EXISTS and left as it was', async () => {
    writeFileSync(join(dir, 'taken.json'), 'mine');
    const result = await run([
      'release',
      'sign',
      '--key',
      'first.pem',
      'manifest.json',
      '--out',
      'taken.json',
    ]);
    expect([result.status, codeOf(result)]).toEqual([1, 'ALREADY_EXISTS']);
    expect(read('taken.json')).toBe('mine');
  });

  it('a key file other users can read is INVALID_STATE, before anything is signed', async () => {
    chmodSync(join(dir, 'stranger.pem'), 0o644);
    try {
      const result = await run([
        'release',
        'sign',
        '--key',
        'stranger.pem',
        'manifest.json',
        '--out',
        'open.json',
      ]);
      expect([result.status, codeOf(result)]).toEqual([1, 'INVALID_STATE']);
      expect(result.stderr).toContain('stranger.pem can be read by other users (mode 644)');
      expect(existsSync(join(dir, 'open.json'))).toBe(false);
    } finally {
      chmodSync(join(dir, 'stranger.pem'), 0o600);
    }
  });

  it('help release says both: the reservation and the release tools; a mistyped tool word is not taken for an id', async () => {
    const help = await run(['help', 'release']);
    expect(help.stdout).toContain('Usage: better-compute release RESERVATION [flags]');
    expect(help.stdout).toMatch(
      /Also under "release":\n {2}release keygen .*\n {2}release sign .*\n {2}release cosign .*\n {2}release verify /,
    );
    expect((await run(['help', 'release', 'keygen'])).stdout).toMatch(/^better-compute release keygen: /);
    const typo = await run(['release', 'cosing', '--key', 'first.pem', 'one.json']);
    expect([typo.status, codeOf(typo)]).toEqual([2, 'INVALID_COMMAND']);
    expect(typo.stderr).toContain('did you mean "release cosign"?');
  });

  it('sign-pins: a key file others can read is INVALID_STATE, an existing --out ALREADY_EXISTS, and nothing is written', async () => {
    const newPins = ['--pins', keys.stranger, '--threshold', '1', '--epoch', '1'];
    chmodSync(join(dir, 'second.pem'), 0o640);
    try {
      const open = await run([
        'release',
        'sign-pins',
        '--key',
        'second.pem',
        ...newPins,
        '--out',
        'p-open.json',
      ]);
      expect([open.status, codeOf(open)]).toEqual([1, 'INVALID_STATE']);
      expect(open.stderr).toContain('second.pem can be read by other users (mode 640)');
      expect(open.stdout).toBe('');
      expect(existsSync(join(dir, 'p-open.json'))).toBe(false);
    } finally {
      chmodSync(join(dir, 'second.pem'), 0o600);
    }
    writeFileSync(join(dir, 'p-taken.json'), 'mine');
    const taken = await run([
      'release',
      'sign-pins',
      '--key',
      'first.pem',
      ...newPins,
      '--out',
      'p-taken.json',
    ]);
    expect([taken.status, codeOf(taken)]).toEqual([1, 'ALREADY_EXISTS']);
    expect(read('p-taken.json')).toBe('mine');
    // Bad input is the guide's usage code, before any key is read.
    const noEpoch = await run(['release', 'sign-pins', '--key', 'first.pem', '--pins', keys.stranger]);
    expect([noEpoch.status, codeOf(noEpoch)]).toEqual([2, 'INVALID_ARGUMENT']);
    const badPin = await run([
      'release',
      'sign-pins',
      '--key',
      'first.pem',
      '--pins',
      'sha256/x',
      '--epoch',
      '1',
      '--out',
      'p-bad.json',
    ]);
    expect([badPin.status, codeOf(badPin)]).toEqual([2, 'INVALID_ARGUMENT']);
    expect(existsSync(join(dir, 'p-bad.json'))).toBe(false);
    // The first current key signs, the second adds to it; the same key twice is ALREADY_EXISTS.
    const first = json(
      await run(['release', 'sign-pins', '--key', 'first.pem', ...newPins, '--out', 'p-1.json']),
    );
    expect(first).toMatchObject({ epoch: 1, pins: [keys.stranger], threshold: 1, signatures: [keys.first] });
    const both = json(
      await run([
        'release',
        'sign-pins',
        '--key',
        'second.pem',
        '--statement',
        'p-1.json',
        '--out',
        'p-2.json',
      ]),
    );
    expect(both.signatures).toEqual([keys.first, keys.second]);
    const twice = await run([
      'release',
      'sign-pins',
      '--key',
      'second.pem',
      '--statement',
      'p-2.json',
      '--out',
      'p-3.json',
    ]);
    expect([twice.status, codeOf(twice)]).toEqual([1, 'ALREADY_EXISTS']);
    expect(existsSync(join(dir, 'p-3.json'))).toBe(false);
    // The statement file carries no private key material.
    expect(read('p-2.json')).not.toContain('PRIVATE KEY');
  });
});

describe.each(kinds)('releases register, list and get against a real server on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let server: Server;
  let url = '';
  const tokens = { root: '', operator: '', acmeAdmin: '', acmeMember: '' };

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute(
      { database, rateLimit: false, release: { pins: [keys.first, keys.second], threshold: 2 } },
      { log: () => {} },
    );
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    const operator = await iam.createPerson({ tenantId: 'root', email: 'operator@root.test' });
    await iam.createBinding({ tenantId: 'root', role: 'operator', principalId: operator.id });
    Object.assign(tokens, {
      root: dev.rootAdmin.apiKey,
      operator: (await iam.createApiKey(operator.id, { name: 'operator' })).key,
      acmeAdmin: dev.acmeAdmin.apiKey,
      acmeMember: dev.acmeMember.apiKey,
    });
    server = createNodeServer(compute);
    url = await listen(server, 0, '127.0.0.1');
  }, 120_000);

  afterAll(async () => {
    if (server) await closeServer(server);
    await compute?.close();
    await database?.close();
  });

  const as = (token: string, args: string[]) =>
    run(args, { BETTER_COMPUTE_URL: url, BETTER_COMPUTE_TOKEN: token });

  async function post(path: string, body: string, token?: string) {
    const response = await fetch(`${url}/api/compute/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body,
    });
    return {
      status: response.status,
      body: (await response.json()) as { error?: { code: string }; data?: any },
    };
  }

  it('refuses an envelope below the threshold, registers one that meets it, and lists it', async () => {
    const below = await as(tokens.root, ['releases', 'register', 'one.json']);
    expect([below.status, codeOf(below)]).toEqual([1, 'RELEASE_UNVERIFIED']);
    const signedByStranger = await as(tokens.root, ['releases', 'register', 'stranger.json']);
    expect(codeOf(signedByStranger)).toBe('RELEASE_UNVERIFIED');
    expect(json(await as(tokens.root, ['releases', 'list', '--format', 'json'])).items).toEqual([]);

    const registered = json(await as(tokens.root, ['releases', 'register', 'two.json']));
    expect(registered).toMatchObject({
      version: '1.1.0',
      minimumVersion: '1.0.0',
      created: true,
      signers: [keys.first, keys.second],
      artifacts: [{ ...manifest.artifacts[0] }],
      manifest,
    });
    expect(registered.id).toMatch(/^rel_/);
    const table = await as(tokens.root, ['releases', 'list']);
    expect(table.stdout).toMatch(/1\.1\.0\s+1\.0\.0\s+linux-x64\s+2\s/);
    const got = json(await as(tokens.root, ['releases', 'get', '1.1.0']));
    expect(got).toMatchObject({ id: registered.id, digest: registered.digest });
    // What the server hands back verifies offline against the same pins.
    writeFileSync(
      join(dir, `got-${kind}.json`),
      JSON.stringify({ manifest: got.manifest, signatures: got.signatures }),
    );
    json(await run(['release', 'verify', '--pin', keys.first, '--pin', keys.second, `got-${kind}.json`]));

    const events = await database.db
      .selectFrom('compute.events' as never)
      .select(['type', 'tenant_id', 'subject_id', 'data'] as never)
      .where('type' as never, '=', 'release.registered' as never)
      .execute();
    expect(events).toMatchObject([
      {
        type: 'release.registered',
        tenant_id: 'root',
        subject_id: registered.id,
        data: { version: '1.1.0', signers: [keys.first, keys.second] },
      },
    ]);
  });

  it('the same manifest again changes nothing; another manifest under the version is ALREADY_EXISTS', async () => {
    const again = json(await as(tokens.root, ['releases', 'register', 'two.json']));
    expect(again.created).toBe(false);
    const other = { ...manifest, notes: 'A different build under the same version.' };
    const envelope = await signedFile(`other-${kind}`, other, ['first', 'second']);
    const taken = await as(tokens.root, ['releases', 'register', envelope]);
    expect([taken.status, codeOf(taken)]).toEqual([1, 'ALREADY_EXISTS']);
    expect(json(await as(tokens.root, ['releases', 'list', '--format', 'json'])).items).toHaveLength(1);
  });

  it('an operator of the platform registers; a tenant’s administrator and member are ACCESS_DENIED', async () => {
    const next = { ...manifest, version: '1.2.0', minimumVersion: '1.1.0' };
    const envelope = await signedFile(`next-${kind}`, next, ['second', 'first']);
    for (const token of [tokens.acmeAdmin, tokens.acmeMember]) {
      for (const args of [
        ['releases', 'register', envelope],
        ['releases', 'list'],
      ]) {
        const refused = await as(token, args);
        expect([refused.status, codeOf(refused)], args.join(' ')).toEqual([1, 'ACCESS_DENIED']);
        expect(refused.stderr).toContain("is the platform's: only the root tenant calls it");
      }
    }
    expect(json(await as(tokens.operator, ['releases', 'register', envelope])).version).toBe('1.2.0');
    const versions = json(await as(tokens.root, ['releases', 'list', '--format', 'json'])).items.map(
      (release: { version: string }) => release.version,
    );
    expect(versions).toEqual(['1.2.0', '1.1.0']);
  });

  it('without a credential the API is UNAUTHENTICATED, and the CLI says so before calling', async () => {
    const bare = await post('releases/register', read('two.json'));
    expect([bare.status, bare.body.error?.code]).toEqual([401, 'UNAUTHENTICATED']);
    const wrong = await as('biam_key_not-a-real-key-0000000000000000', ['releases', 'list']);
    expect(codeOf(wrong)).toBe('UNAUTHENTICATED');
    const none = await run(['releases', 'list'], { BETTER_COMPUTE_URL: url });
    expect(codeOf(none)).toBe('MISSING_ENV');
  });

  it('release RSV still reaches reservations.release through the same word', async () => {
    const result = await as(tokens.acmeAdmin, ['release', 'rsv_01k5w000000000000000000000']);
    expect([result.status, codeOf(result)]).toEqual([1, 'NOT_FOUND']);
  });

  it('hostile input gets a coded 4xx, never a 5xx', async () => {
    const two = JSON.parse(read('two.json'));
    const bodies: [string, string][] = [
      ['a NUL in the notes', JSON.stringify({ ...two, manifest: { ...two.manifest, notes: 'a\u0000b' } })],
      ['a NUL in a field name', JSON.stringify({ ...two, manifest: { ...two.manifest, 'x\u0000': 1 } })],
      ['an unknown field', JSON.stringify({ ...two, manifest: { ...two.manifest, channel: 'beta' } })],
      ['a tampered manifest', JSON.stringify({ ...two, manifest: { ...two.manifest, version: '9.9.9' } })],
      ['too many signatures', JSON.stringify({ ...two, signatures: Array(33).fill(two.signatures[0]) })],
      [
        'a huge version',
        JSON.stringify({ ...two, manifest: { ...two.manifest, version: `1.0.0-${'a'.repeat(10_000)}` } }),
      ],
      [
        'a body over the limit',
        JSON.stringify({ ...two, manifest: { ...two.manifest, notes: 'n'.repeat(70_000) } }),
      ],
      [
        'a signature that is not base64',
        JSON.stringify({ ...two, signatures: [{ ...two.signatures[0], sig: '\u0000'.repeat(88) }] }),
      ],
      ['not JSON', '{"manifest":'],
    ];
    for (const [what, body] of bodies) {
      const answer = await post('releases/register', body, tokens.root);
      expect(answer.status, what).toBeGreaterThanOrEqual(400);
      expect(answer.status, what).toBeLessThan(500);
      expect(typeof answer.body.error?.code, what).toBe('string');
    }
    const get = await post('releases/get', JSON.stringify({ version: 'x\u0000' }), tokens.root);
    expect(get.status).toBe(400);
  });

  it('a deployment that pins no release key registers none; a malformed pin stops the start', async () => {
    const unpinned = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    try {
      const response = await unpinned.handler(
        new Request('http://localhost/api/compute/releases/register', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.root}` },
          body: read('two.json'),
        }),
      );
      expect(response.status).toBe(409);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('INVALID_STATE');
    } finally {
      await unpinned.close();
    }
    await expect(
      betterCompute({ database, release: { pins: ['sha256/not-a-key'] } }, { log: () => {} }),
    ).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    await expect(
      betterCompute({ database, release: { pins: [keys.first], threshold: 2 } }, { log: () => {} }),
    ).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
  });

  it('rotate-pins: a statement 2 of 2 signed moves the keys, once; below the threshold, a wrong epoch or another tenant is refused', async () => {
    const statementOf = async (name: string, signers: string[], epoch: number, pins = [keys.stranger]) => {
      let file = '';
      for (const [i, signer] of signers.entries()) {
        const out = `${name}-${kind}-${i}.json`;
        json(
          await run([
            'release',
            'sign-pins',
            '--key',
            `${signer}.pem`,
            ...(i === 0
              ? ['--pins', pins.join(','), '--threshold', '1', '--epoch', String(epoch)]
              : ['--statement', file]),
            '--out',
            out,
          ]),
        );
        file = out;
      }
      return file;
    };
    const below = await as(tokens.root, [
      'releases',
      'rotate-pins',
      await statementOf('rp-one', ['first'], 1),
    ]);
    expect([below.status, codeOf(below)]).toEqual([1, 'RELEASE_UNVERIFIED']);
    const skipping = await as(tokens.root, [
      'releases',
      'rotate-pins',
      await statementOf('rp-skip', ['first', 'second'], 2),
    ]);
    expect([skipping.status, codeOf(skipping)]).toEqual([1, 'INVALID_STATE']);
    expect(skipping.stderr).toContain("the statement's epoch is 2; the next one is 1");
    const good = await statementOf('rp-good', ['first', 'second'], 1);
    for (const token of [tokens.acmeAdmin, tokens.acmeMember]) {
      const denied = await run(['releases', 'rotate-pins', good, '--tenant', 'acme'], {
        BETTER_COMPUTE_URL: url,
        BETTER_COMPUTE_TOKEN: token,
      });
      expect(codeOf(denied)).toBe('ACCESS_DENIED');
    }
    const stored = await database.db
      .selectFrom('compute.release_pin_statements' as never)
      .select('epoch' as never)
      .execute();
    expect(stored).toEqual([]);

    const rotated = json(await as(tokens.root, ['releases', 'rotate-pins', good]));
    expect(rotated).toMatchObject({
      epoch: 1,
      pins: [keys.stranger],
      threshold: 1,
      signers: [keys.first, keys.second],
      created: true,
    });
    expect(json(await as(tokens.root, ['releases', 'rotate-pins', good])).created).toBe(false);
    // The same epoch naming other keys is taken.
    const other = await as(tokens.root, [
      'releases',
      'rotate-pins',
      await statementOf('rp-other', ['first', 'second'], 1, [keys.first]),
    ]);
    expect(codeOf(other)).toBe('ALREADY_EXISTS');

    // From now on the new key signs releases, and the old ones do not count.
    const later = { ...manifest, version: '1.3.0', minimumVersion: '1.0.0' };
    const byOld = await as(tokens.root, [
      'releases',
      'register',
      await signedFile(`old-${kind}`, later, ['first', 'second']),
    ]);
    expect(codeOf(byOld)).toBe('RELEASE_UNVERIFIED');
    const byNew = json(
      await as(tokens.root, ['releases', 'register', await signedFile(`new-${kind}`, later, ['stranger'])]),
    );
    expect(byNew).toMatchObject({ version: '1.3.0', signers: [keys.stranger] });
    const events = await database.db
      .selectFrom('compute.events' as never)
      .select(['type', 'tenant_id', 'data'] as never)
      .where('type' as never, '=', 'release.pins-rotated' as never)
      .execute();
    expect(events).toMatchObject([
      {
        type: 'release.pins-rotated',
        tenant_id: 'root',
        data: { epoch: 1, pins: [keys.stranger], threshold: 1 },
      },
    ]);
  });
});
