/**
 * `pki approvers` (issue 34): the destructive-batch quorum's approver sets in the PKI bundle,
 * through the real binary. The first set from `batch keygen`'s public keys, a change at the next
 * epoch only with a threshold of the current set's `batch sign-approvers` signatures, each refusal
 * with its code and nothing written; reading a bundle refuses a chain a daemon would refuse; `pki
 * show` and doctor report the quorum.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type ApproverSet,
  followApproverChain,
  generateApproverKey,
  readApproverKey,
  readApproverSet,
  signApproverSet,
} from '@better-compute/core/quorum';
import { readPkiBundle } from '../src/pki/bundle.js';
import { createPkiBundle } from '../src/pki/create.js';
import { pkiFindings } from '../src/pki/doctor.js';

const root = join(import.meta.dirname, '..', '..', '..');
const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const dir = mkdtempSync(join(tmpdir(), 'bc-pki-approvers-'));
const env = { PATH: process.env.PATH ?? '', HOME: dir, BETTER_IAM_HOME: join(dir, 'iam') };
const secret = 'the secret of this test deployment';
const TRUST_DOMAIN = 'compute.example.com';

function run(args: string[]) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd: dir,
    env,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}
const codeOf = (result: { stderr: string }) => /^([A-Z_]+):/.exec(result.stderr)?.[1];
const digestOf = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** A new bundle of its own for a case, so the cases do not depend on each other. */
async function bundle(name: string): Promise<string> {
  const path = join(dir, `${name}.json`);
  await createPkiBundle({ path, secret, trustDomain: TRUST_DOMAIN });
  return path;
}

const keys: Record<string, { kid: string }> = {};
function keygen(name: string) {
  const made = run(['batch', 'keygen', '--out', `${name}.pem`]);
  expect(made.status, made.stderr).toBe(0);
  keys[name] = JSON.parse(made.stdout);
}

beforeAll(() => {
  for (const name of ['a', 'b', 'c', 'd']) keygen(name);
});

describe('pki approvers --pub (real binary)', () => {
  it('installs epoch 1 of the bundle’s trust domain; pki show and a second install then see it', async () => {
    const path = await bundle('first');
    const result = run([
      'pki',
      'approvers',
      '--pki',
      path,
      '--pub',
      'a.pem.pub',
      '--pub',
      'b.pem.pub',
      '--pub',
      'c.pem.pub',
      '--threshold',
      '2',
    ]);
    expect(result.status, result.stderr).toBe(0);
    const kids = [keys.a!.kid, keys.b!.kid, keys.c!.kid].sort();
    expect(JSON.parse(result.stdout)).toMatchObject({
      path,
      trustDomain: TRUST_DOMAIN,
      epoch: 1,
      threshold: 2,
      kids,
      signedBy: [],
    });
    expect(result.stderr).toBe(
      `Approver set of ${TRUST_DOMAIN} at epoch 1: 2 of 3 must sign a destructive batch.\n` +
        'Servers read it when they start: restart serve (or dev). Each node daemon pins it at its next session.\n',
    );
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const read = await readPkiBundle(path);
    expect(read.approvers).toHaveLength(1);
    expect(read.approvers[0]!.set).toMatchObject({ trustDomain: TRUST_DOMAIN, epoch: 1, threshold: 2 });
    // What every daemon would pin from nothing.
    expect(followApproverChain(null, read.approvers)).toEqual({ ok: true, set: read.approvers[0]!.set });

    const show = JSON.parse(run(['pki', 'show', '--pki', path]).stdout);
    expect(show.approvers).toMatchObject({
      epoch: 1,
      threshold: 2,
      kids,
      history: [{ epoch: 1, threshold: 2, kids, signedBy: [] }],
    });
    // `pki show --query approvers.set` is the published set `batch sign-approvers --current` reads.
    expect(readApproverSet(show.approvers.set)).toEqual(read.approvers[0]!.set);
    expect(run(['pki', 'show', '--pki', path, '--query', 'approvers.threshold']).stdout.trim()).toBe('2');

    const before = digestOf(path);
    const again = run(['pki', 'approvers', '--pki', path, '--pub', 'd.pem.pub', '--threshold', '1']);
    expect(codeOf(again)).toBe('INVALID_STATE');
    expect(again.status).toBe(1);
    expect(again.stderr).toContain('already has an approver set (epoch 1, 2 of 3); nothing was changed');
    expect(again.stderr).toContain('hint: Change it with a threshold of the current approvers');
    expect(again.stderr).toContain('--epoch 2');
    expect(digestOf(path)).toBe(before);
  });

  it('a bundle without approvers shows the quorum off', async () => {
    const path = await bundle('off');
    expect(JSON.parse(run(['pki', 'show', '--pki', path]).stdout).approvers).toBeNull();
    expect((await readPkiBundle(path)).approvers).toEqual([]);
  });

  it('refuses a key given twice, a threshold out of range, a file that is no public key, and writes nothing', async () => {
    const path = await bundle('refusals');
    const before = digestOf(path);
    copyFileSync(join(dir, 'a.pem.pub'), join(dir, 'a-copy.pub'));
    writeFileSync(
      join(dir, 'nul.pub'),
      `-----BEGIN PUBLIC KEY-----\n\u0000\u0000\n-----END PUBLIC KEY-----\n`,
    );
    writeFileSync(join(dir, 'huge.pub'), 'A'.repeat(2 * 1024 * 1024));
    const base = ['pki', 'approvers', '--pki', path];
    const cases: [string[], string, string][] = [
      [
        ['--pub', 'a.pem.pub', '--pub', 'a-copy.pub', '--threshold', '1'],
        'INVALID_ARGUMENT',
        `a.pem.pub and a-copy.pub hold the same key (${keys.a!.kid})`,
      ],
      [
        ['--pub', 'a.pem.pub', '--pub', 'b.pem.pub', '--threshold', '3'],
        'INVALID_ARGUMENT',
        '--threshold 3 is not a number from 1 to 2',
      ],
      [['--pub', 'a.pem.pub', '--threshold', '0'], 'INVALID_ARGUMENT', ''],
      [['--pub', 'a.pem.pub'], 'INVALID_ARGUMENT', '--threshold is required'],
      [['--pub', 'a.pem', '--threshold', '1'], 'INVALID_ARGUMENT', 'a.pem (--pub) is not a P-256 public key'],
      [
        ['--pub', 'nul.pub', '--threshold', '1'],
        'INVALID_ARGUMENT',
        'nul.pub (--pub) is not a P-256 public key',
      ],
      [['--pub', 'huge.pub', '--threshold', '1'], 'INVALID_ARGUMENT', 'huge.pub (--pub) is over 1 MiB'],
      [['--pub', 'missing.pub', '--threshold', '1'], 'NOT_FOUND', 'missing.pub (--pub) is not a file'],
      [
        Array.from({ length: 65 }, () => ['--pub', 'a.pem.pub'])
          .flat()
          .concat('--threshold', '1'),
        'INVALID_ARGUMENT',
        'at most 64 approvers',
      ],
      [
        ['--pub', 'a.pem.pub', '--set', 'x.json', '--threshold', '1'],
        'INVALID_ARGUMENT',
        'give one or the other',
      ],
      [[], 'INVALID_ARGUMENT', 'give the approvers’ keys'],
    ];
    for (const [args, code, message] of cases) {
      const result = run([...base, ...args]);
      expect(codeOf(result), `${args.join(' ')}: ${result.stderr}`).toBe(code);
      expect(result.stderr).toContain(message);
      expect(result.status).toBe(code === 'INVALID_ARGUMENT' ? 2 : 1);
    }
    expect(digestOf(path)).toBe(before);
    // The private key's file is never echoed back.
    const leaked = run([...base, '--pub', 'a.pem', '--threshold', '1']);
    expect(leaked.stdout + leaked.stderr).not.toContain('PRIVATE KEY');
    const missing = run([
      'pki',
      'approvers',
      '--pki',
      join(dir, 'nowhere.json'),
      '--pub',
      'a.pem.pub',
      '--threshold',
      '1',
    ]);
    expect(codeOf(missing)).toBe('PKI_NOT_FOUND');
  });
});

describe('pki approvers --set (real binary)', () => {
  let path: string;
  let epoch1: ApproverSet;
  const sign = (key: string, epoch: number, out: string, threshold = 2, approvers = 'next.json') => {
    const result = run([
      'batch',
      'sign-approvers',
      '--key',
      `${key}.pem`,
      '--epoch',
      String(epoch),
      '--approvers',
      approvers,
      '--threshold',
      String(threshold),
      '--out',
      out,
    ]);
    expect(result.status, result.stderr).toBe(0);
  };

  beforeAll(async () => {
    path = await bundle('change');
    const installed = run([
      'pki',
      'approvers',
      '--pki',
      path,
      '--pub',
      'a.pem.pub',
      '--pub',
      'b.pem.pub',
      '--pub',
      'c.pem.pub',
      '--threshold',
      '2',
    ]);
    expect(installed.status, installed.stderr).toBe(0);
    epoch1 = (await readPkiBundle(path)).approvers[0]!.set;
    // The new set as `batch sign-approvers --approvers` takes it: d replaces c.
    writeFileSync(
      join(dir, 'next.json'),
      JSON.stringify({
        trustDomain: TRUST_DOMAIN,
        approvers: ['a', 'b', 'd'].map((k) => ({
          publicKey: readFileSync(join(dir, `${k}.pem.pub`), 'utf8'),
        })),
      }),
    );
    sign('a', 2, 'a2.json');
    sign('b', 2, 'b2.json');
    sign('d', 2, 'd2.json');
    sign('a', 3, 'a3.json');
    sign('b', 3, 'b3.json');
    sign('a', 2, 'a2-t3.json', 3);
  });

  it('refuses too few current approvers, another epoch or another set, and writes nothing', () => {
    const before = digestOf(path);
    const change = (...signatures: string[]) => [
      'pki',
      'approvers',
      '--pki',
      path,
      '--set',
      'next.json',
      ...signatures.flatMap((s) => ['--signature', s]),
    ];
    const one = run(change('a2.json'));
    expect(codeOf(one)).toBe('INVALID_STATE');
    expect(one.stderr).toContain(
      "the approver set was not changed: 1 of the current set's approvers signed the new set; 2 must",
    );
    // The incoming key's own signature counts for nothing until its set is trusted.
    expect(codeOf(run(change('a2.json', 'd2.json')))).toBe('INVALID_STATE');
    // The same approver twice is one approver.
    expect(codeOf(run(change('a2.json', 'a2.json')))).toBe('INVALID_STATE');
    const skipped = run(change('a3.json', 'b3.json'));
    expect(codeOf(skipped)).toBe('INVALID_STATE');
    expect(skipped.stderr).toContain("the new set's epoch is 3; only 2 follows 1");
    const other = run(change('a2-t3.json', 'b2.json'));
    expect(codeOf(other)).toBe('INVALID_ARGUMENT');
    expect(other.stderr).toContain('b2.json signs another set than next.json: threshold 2, not 3');
    const mismatch = run([...change('a2.json', 'b2.json'), '--threshold', '3']);
    expect(mismatch.stderr).toContain('a2.json signs another set than next.json: threshold 2, not 3');
    expect(codeOf(run(change('next.json')))).toBe('INVALID_ARGUMENT'); // not a signature file
    expect(codeOf(run(['pki', 'approvers', '--pki', path, '--signature', 'a2.json']))).toBe(
      'INVALID_ARGUMENT',
    ); // no --set
    expect(codeOf(run(['pki', 'approvers', '--pki', path, '--set', 'next.json']))).toBe('INVALID_ARGUMENT'); // no signature
    expect(digestOf(path)).toBe(before);
    // A bundle with no set has nothing to change.
    const empty = join(dir, 'off.json');
    expect(
      codeOf(run(['pki', 'approvers', '--pki', empty, '--set', 'next.json', '--signature', 'a2.json'])),
    ).toBe('INVALID_STATE');
  });

  it('appends the set a threshold of the current approvers signed; a daemon pinned at epoch 1 follows it', async () => {
    const result = run([
      'pki',
      'approvers',
      '--pki',
      path,
      '--set',
      'next.json',
      '--signature',
      'b2.json',
      '--signature',
      'a2.json',
      '--signature',
      'b2.json',
      '--signature',
      'd2.json',
    ]);
    expect(result.status, result.stderr).toBe(0);
    const kids = [keys.a!.kid, keys.b!.kid, keys.d!.kid].sort();
    const printed = JSON.parse(result.stdout);
    expect(printed).toMatchObject({ epoch: 2, threshold: 2, kids });
    // Only the signatures that count are kept, once per key.
    expect([...printed.signedBy].sort()).toEqual([keys.a!.kid, keys.b!.kid].sort());
    expect(result.stderr).toContain(
      `Approver set of ${TRUST_DOMAIN} at epoch 2: 2 of 3 must sign a destructive batch.`,
    );
    const read = await readPkiBundle(path);
    expect(read.approvers.map((entry) => entry.set.epoch)).toEqual([1, 2]);
    expect(followApproverChain(epoch1, read.approvers)).toEqual({ ok: true, set: read.approvers[1]!.set });
    expect(JSON.parse(run(['pki', 'show', '--pki', path]).stdout).approvers).toMatchObject({
      epoch: 2,
      kids,
    });

    // c left the set at epoch 2: its signature no longer counts toward epoch 3.
    writeFileSync(
      join(dir, 'next3.json'),
      JSON.stringify({
        trustDomain: TRUST_DOMAIN,
        threshold: 1,
        approvers: [{ publicKey: readFileSync(join(dir, 'c.pem.pub'), 'utf8') }],
      }),
    );
    sign('c', 3, 'c3.json', 1, 'next3.json');
    sign('a', 3, 'a3-only-c.json', 1, 'next3.json');
    const stale = run([
      'pki',
      'approvers',
      '--pki',
      path,
      '--set',
      'next3.json',
      '--signature',
      'c3.json',
      '--signature',
      'a3-only-c.json',
    ]);
    expect(codeOf(stale)).toBe('INVALID_STATE');
    expect(stale.stderr).toContain('1 of the current set');
  });
});

describe('reading a bundle’s approver chain', () => {
  const pem = (name: string) => readFileSync(join(dir, `${name}.pem.pub`), 'utf8');
  async function withApprovers(name: string, approvers: unknown): Promise<string> {
    const path = await bundle(name);
    const document = JSON.parse(readFileSync(path, 'utf8'));
    writeFileSync(path, JSON.stringify({ ...document, approvers }), { mode: 0o600 });
    return path;
  }
  const set = (epoch: number, threshold: number, names: string[], trustDomain = TRUST_DOMAIN) =>
    readApproverSet({ trustDomain, epoch, threshold, approvers: names.map((n) => ({ publicKey: pem(n) })) });

  it('refuses, as PKI_INVALID, a chain a daemon would refuse', async () => {
    const first = set(1, 2, ['a', 'b', 'c']);
    const second = set(2, 2, ['a', 'b', 'd']);
    const one = generateApproverKey();
    const forged = {
      set: second,
      signatures: [signApproverSet(readApproverKey(one.privatePem, 'outsider').privateKey, one.kid, second)],
    };
    const cases: [string, unknown, string][] = [
      ['list', { set: first }, 'approvers must be a list'],
      [
        'foreign',
        [{ set: set(1, 1, ['a'], 'other.example.com'), signatures: [] }],
        "approvers[0].set.trustDomain must be the bundle's trust domain compute.example.com",
      ],
      ['epoch', [{ set: set(2, 1, ['a']), signatures: [] }], 'the approver chain does not start at epoch 1'],
      [
        'signed-first',
        [{ set: first, signatures: [{ kid: 'x', signature: 'y' }] }],
        'approvers[0].signatures must be empty',
      ],
      ['forged', [{ set: first, signatures: [] }, forged], 'epoch 2: 0 of the current set'],
      [
        'threshold',
        [{ set: { ...first, threshold: 4 }, signatures: [] }],
        '"threshold" is not a whole number from 1 to 3',
      ],
    ];
    for (const [name, approvers, message] of cases) {
      const path = await withApprovers(name, approvers);
      await expect(readPkiBundle(path), name).rejects.toMatchObject({
        code: 'PKI_INVALID',
        message: expect.stringContaining(message),
      });
    }
    const shown = run(['pki', 'show', '--pki', join(dir, 'forged.json')]);
    expect(codeOf(shown)).toBe('PKI_INVALID');
    expect(shown.status).toBe(1);
  });

  it('refuses one of the bundle’s own keys as an approver: the server holds it', async () => {
    const path = await bundle('own-key');
    const document = JSON.parse(readFileSync(path, 'utf8'));
    const own = readApproverSet({
      trustDomain: TRUST_DOMAIN,
      epoch: 1,
      threshold: 1,
      approvers: [{ publicKey: document.machineCas[0].publicKey }],
    });
    writeFileSync(path, JSON.stringify({ ...document, approvers: [{ set: own, signatures: [] }] }));
    await expect(readPkiBundle(path)).rejects.toMatchObject({
      code: 'PKI_INVALID',
      message: expect.stringContaining(
        'a key of the bundle itself: an approver key is held by a person, never by the server',
      ),
    });
  });

  it('answers a valid chain in its canonical form (kids, base64url keys in kid order)', async () => {
    const path = await withApprovers('pem', [
      {
        set: {
          trustDomain: TRUST_DOMAIN,
          epoch: 1,
          threshold: 2,
          approvers: ['c', 'a', 'b'].map((n) => ({ publicKey: pem(n) })),
        },
        signatures: [],
      },
    ]);
    expect((await readPkiBundle(path)).approvers).toEqual([
      { set: set(1, 2, ['a', 'b', 'c']), signatures: [] },
    ]);
  });
});

describe('doctor', () => {
  it('says whether the quorum is on', async () => {
    const check = async (path: string) =>
      (await pkiFindings({ path, secret: undefined })).find((finding) => finding.check === 'pki.quorum');
    expect(await check(join(dir, 'off.json'))).toEqual({
      check: 'pki.quorum',
      severity: 'ok',
      message:
        'the destructive-batch quorum is off (no approver set): better-compute pki approvers turns it on',
    });
    expect(await check(join(dir, 'first.json'))).toEqual({
      check: 'pki.quorum',
      severity: 'ok',
      message: 'the destructive-batch quorum is on: approver set epoch 1, 2 of 3 approvers sign each batch',
    });
  });
});
