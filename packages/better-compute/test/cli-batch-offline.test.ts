/**
 * The approver's offline tools through the real binary: `batch keygen` (0600, never over a file,
 * encrypted with the passphrase variable), `batch sign` (the root recomputed from the scope file's
 * leaves, the review's refusals, the approval the quorum check then counts) and `batch
 * sign-approvers` (signatures a set change at the next epoch accepts).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  readApproverSet,
  SCOPE_FORMAT,
  type ScopeLeaf,
  scopeTree,
  toHex,
  verifyApprovals,
  verifyApproverSetChange,
} from '@better-compute/core/quorum';

const bin = join(import.meta.dirname, '..', 'bin', 'better-compute.cjs');
const dir = mkdtempSync(join(tmpdir(), 'bc-batch-'));
const PASSPHRASE = 'correct horse battery staple 42';

function run(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOME: dir, ...env },
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}
const codeOf = (result: { stderr: string }) => /^([A-Z_]+):/m.exec(result.stderr)?.[1];

function keygen(name: string, env: Record<string, string> = {}) {
  const result = run(['batch', 'keygen', '--out', name], env);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as { kid: string; out: string; publicKey: string; encrypted: boolean };
}

const node = (n: number) => `node_01k5w${String(n).padStart(21, '0')}`;
const hour = 3_600_000;
let files = 0;
function scopeFile(leaves: ScopeLeaf[], over: Record<string, unknown> = {}): string {
  const tree = scopeTree(leaves);
  const now = Date.now();
  const path = `scope-${files++}.json`;
  const document = {
    format: SCOPE_FORMAT,
    batchId: 'batch_01k5w00000000000000000000a',
    trustDomain: 'compute.example.com',
    createdAt: new Date(now - hour).toISOString(),
    notAfter: new Date(now + 5 * hour).toISOString(),
    reason: 'power off rack 12 after the firmware recall',
    leaves,
    root: toHex(tree.root),
    size: tree.size,
    ...over,
  };
  writeFileSync(join(dir, path), JSON.stringify(document));
  return path;
}
const rack: ScopeLeaf[] = [1, 2, 3].map((n) => ({
  subject: node(n),
  kind: 'metal.power',
  payload: { action: 'off' },
}));

describe('batch keygen (real binary)', () => {
  it('writes a 0600 key and PATH.pub, prints the kid, and never writes over either', () => {
    const made = keygen('plain.pem');
    expect(made.kid).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(statSync(join(dir, 'plain.pem')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, 'plain.pem'), 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(readFileSync(join(dir, 'plain.pem.pub'), 'utf8')).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    expect(made.encrypted).toBe(false);
    const before = readFileSync(join(dir, 'plain.pem'), 'utf8');
    const again = run(['batch', 'keygen', '--out', 'plain.pem']);
    expect(again.status).toBe(1);
    expect(codeOf(again)).toBe('ALREADY_EXISTS');
    expect(readFileSync(join(dir, 'plain.pem'), 'utf8')).toBe(before);
    // A taken PATH.pub stops it too, and leaves no half key behind.
    writeFileSync(join(dir, 'taken.pem.pub'), 'x');
    expect(codeOf(run(['batch', 'keygen', '--out', 'taken.pem']))).toBe('ALREADY_EXISTS');
    expect(() => statSync(join(dir, 'taken.pem'))).toThrow();
  });

  it('encrypts the key with BETTER_COMPUTE_APPROVER_PASSPHRASE, which signing then needs', () => {
    const made = keygen('locked.pem', { BETTER_COMPUTE_APPROVER_PASSPHRASE: PASSPHRASE });
    expect(made.encrypted).toBe(true);
    const pem = readFileSync(join(dir, 'locked.pem'), 'utf8');
    expect(pem).toMatch(/^-----BEGIN ENCRYPTED PRIVATE KEY-----/);
    expect(pem).not.toContain(PASSPHRASE);
    const scope = scopeFile(rack);
    const without = run(['batch', 'sign', '--key', 'locked.pem', '--scope', scope]);
    expect(codeOf(without)).toBe('MISSING_ENV');
    const wrong = run(['batch', 'sign', '--key', 'locked.pem', '--scope', scope], {
      BETTER_COMPUTE_APPROVER_PASSPHRASE: 'zq9-not-the-passphrase',
    });
    expect(codeOf(wrong)).toBe('INVALID_ARGUMENT');
    expect(wrong.stderr).toMatch(/passphrase is wrong/);
    expect(wrong.stderr).not.toContain('zq9-not-the-passphrase');
    const signed = run(['batch', 'sign', '--key', 'locked.pem', '--scope', scope], {
      BETTER_COMPUTE_APPROVER_PASSPHRASE: PASSPHRASE,
    });
    expect(signed.status, signed.stderr).toBe(0);
    expect(JSON.parse(signed.stdout).kid).toBe(made.kid);
    expect(signed.stdout + signed.stderr).not.toContain(PASSPHRASE);
  });
});

describe('batch sign (real binary)', () => {
  const a = keygen('a.pem');
  const b = keygen('b.pem');
  const c = keygen('c.pem');
  const set = readApproverSet({
    trustDomain: 'compute.example.com',
    epoch: 1,
    threshold: 2,
    approvers: ['a.pem.pub', 'b.pem.pub', 'c.pem.pub'].map((pub) => ({
      publicKey: readFileSync(join(dir, pub), 'utf8'),
    })),
  });

  it('prints the review and an approval that, with a second approver’s, meets the quorum', () => {
    const scope = scopeFile(rack);
    const first = run(['batch', 'sign', '--key', 'a.pem', '--scope', scope]);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr).toContain(
      'Batch batch_01k5w00000000000000000000a: power off rack 12 after the firmware recall',
    );
    expect(first.stderr).toContain('3 command(s) on 3 subject(s): metal.power action=off ×3:');
    expect(first.stderr).toContain(`  metal.power action=off: ${node(1)}, ${node(2)}, ${node(3)}`);
    expect(first.stderr).toContain(`Signed as ${a.kid}.`);
    const approval = JSON.parse(first.stdout);
    expect(approval).toMatchObject({
      format: 'better-compute.batch-approval/v1',
      kid: a.kid,
      size: 3,
      root: toHex(scopeTree(rack).root),
    });
    const second = JSON.parse(
      run(['batch', 'sign', '--key', 'c.pem', '--scope', scope, '--out', 'approval-c.json']).stdout,
    );
    expect(second.out).toBe(join(dir, 'approval-c.json'));
    const fromFile = JSON.parse(readFileSync(join(dir, 'approval-c.json'), 'utf8'));
    const statement = {
      batchId: approval.batchId,
      trustDomain: approval.trustDomain,
      root: scopeTree(rack).root,
      size: 3,
      notAfter: Date.parse(approval.notAfter),
    };
    expect(verifyApprovals(set, statement, [approval], Date.now()).ok).toBe(false);
    expect(verifyApprovals(set, statement, [approval, fromFile], Date.now())).toMatchObject({
      ok: true,
      approvedBy: [a.kid, c.kid],
    });
    expect(
      codeOf(run(['batch', 'sign', '--key', 'c.pem', '--scope', scope, '--out', 'approval-c.json'])),
    ).toBe('ALREADY_EXISTS');
  });

  it('is SCOPE_MISMATCH when the leaves do not give the root the file claims', () => {
    const honest = scopeTree(rack);
    const changed = [{ ...rack[0]!, payload: { action: 'cycle' } }, rack[1]!, rack[2]!];
    const result = run([
      'batch',
      'sign',
      '--key',
      'a.pem',
      '--scope',
      scopeFile(changed, { root: toHex(honest.root) }),
    ]);
    expect(result.status).toBe(1);
    expect(codeOf(result)).toBe('SCOPE_MISMATCH');
    expect(result.stdout).toBe('');
  });

  it('is SCOPE_CHANGED when --root is not the scope’s', () => {
    const result = run([
      'batch',
      'sign',
      '--key',
      'a.pem',
      '--scope',
      scopeFile(rack),
      '--root',
      'ab'.repeat(32),
    ]);
    expect(codeOf(result)).toBe('SCOPE_CHANGED');
  });

  it('refuses unbound leaves unless --allow-unbound', () => {
    const scope = scopeFile([...rack, { subject: node(4), kind: 'node.reimage', payload: null }]);
    const refused = run(['batch', 'sign', '--key', 'a.pem', '--scope', scope]);
    expect(codeOf(refused)).toBe('UNBOUND_SCOPE');
    expect(refused.stderr).toContain(`node.reimage on ${node(4)}`);
    const allowed = run(['batch', 'sign', '--key', 'a.pem', '--scope', scope, '--allow-unbound']);
    expect(allowed.status, allowed.stderr).toBe(0);
    expect(allowed.stderr).toContain('node.reimage (any payload) ×1');
  });

  it('refuses a closed window, or one longer than --max-hours (INVALID_STATE)', () => {
    const now = Date.now();
    const expired = scopeFile(rack, {
      createdAt: new Date(now - 10 * hour).toISOString(),
      notAfter: new Date(now - hour).toISOString(),
    });
    expect(codeOf(run(['batch', 'sign', '--key', 'a.pem', '--scope', expired]))).toBe('INVALID_STATE');
    const long = scopeFile(rack, { notAfter: new Date(now + 100 * hour).toISOString() });
    const refused = run(['batch', 'sign', '--key', 'a.pem', '--scope', long]);
    expect(codeOf(refused)).toBe('INVALID_STATE');
    expect(refused.stderr).toMatch(/longer than --max-hours 72/);
    expect(run(['batch', 'sign', '--key', 'a.pem', '--scope', long, '--max-hours', '120']).status).toBe(0);
    const short = scopeFile(rack);
    expect(codeOf(run(['batch', 'sign', '--key', 'a.pem', '--scope', short, '--max-hours', '4']))).toBe(
      'INVALID_STATE',
    );
  });

  it('signs only what --expect lists (SCOPE_UNEXPECTED names the differences)', () => {
    const scope = scopeFile(rack);
    writeFileSync(join(dir, 'rack12.txt'), `# rack 12\n${node(1)}\n${node(2)}\n${node(3)}\n`);
    expect(run(['batch', 'sign', '--key', 'a.pem', '--scope', scope, '--expect', 'rack12.txt']).status).toBe(
      0,
    );
    writeFileSync(join(dir, 'rack12-short.txt'), `${node(1)}\n${node(2)}\n${node(9)}\n`);
    const refused = run([
      'batch',
      'sign',
      '--key',
      'a.pem',
      '--scope',
      scope,
      '--expect',
      'rack12-short.txt',
    ]);
    expect(codeOf(refused)).toBe('SCOPE_UNEXPECTED');
    expect(refused.stderr).toContain(`not expected: ${node(3)}`);
    expect(refused.stderr).toContain(`expected but absent: ${node(9)}`);
    writeFileSync(
      join(dir, 'rack12.json'),
      JSON.stringify(rack.map(({ subject }) => ({ subject, kind: 'node.delete' }))),
    );
    expect(
      codeOf(run(['batch', 'sign', '--key', 'a.pem', '--scope', scope, '--expect', 'rack12.json'])),
    ).toBe('SCOPE_UNEXPECTED');
  });

  it('refuses a key file others can read (INVALID_STATE), as ssh does', () => {
    keygen('open.pem');
    chmodSync(join(dir, 'open.pem'), 0o640);
    const result = run(['batch', 'sign', '--key', 'open.pem', '--scope', scopeFile(rack)]);
    expect(codeOf(result)).toBe('INVALID_STATE');
    expect(result.stderr).toContain('chmod 600 open.pem');
  });

  it('signs a bare --root and --size only with --unchecked', () => {
    const root = toHex(scopeTree(rack).root);
    const notAfter = new Date(Date.now() + 2 * hour).toISOString();
    const bare = ['batch', 'sign', '--key', 'b.pem', '--root', root, '--size', '3'];
    expect(codeOf(run(bare))).toBe('INVALID_ARGUMENT');
    const fields = [
      '--batch',
      'batch_01k5w00000000000000000000a',
      '--trust-domain',
      'compute.example.com',
      '--not-after',
      notAfter,
    ];
    expect(run([...bare, ...fields]).status).toBe(2);
    const unchecked = run([...bare, ...fields, '--unchecked']);
    expect(unchecked.status, unchecked.stderr).toBe(0);
    expect(unchecked.stderr).toContain('signing the root alone (--unchecked)');
    const approval = JSON.parse(unchecked.stdout);
    const statement = {
      batchId: approval.batchId,
      trustDomain: approval.trustDomain,
      root: scopeTree(rack).root,
      size: 3,
      notAfter: Date.parse(notAfter),
    };
    expect(verifyApprovals(set, statement, [approval], Date.now()).approvedBy).toEqual([b.kid]);
  });
});

describe('batch sign-approvers (real binary)', () => {
  it('makes signatures a change at the next epoch accepts with a threshold of the current set', () => {
    const keys = ['s1', 's2', 's3', 's4'].map((name) => ({ name, ...keygen(`${name}.pem`) }));
    const pubOf = (name: string) => ({ publicKey: readFileSync(join(dir, `${name}.pem.pub`), 'utf8') });
    const current = {
      trustDomain: 'compute.example.com',
      epoch: 3,
      threshold: 2,
      approvers: ['s1', 's2', 's3'].map(pubOf),
    };
    writeFileSync(join(dir, 'current.json'), JSON.stringify(current));
    writeFileSync(
      join(dir, 'next.json'),
      JSON.stringify({ trustDomain: 'compute.example.com', approvers: ['s1', 's2', 's4'].map(pubOf) }),
    );
    const signs = ['s1', 's3'].map((name) => {
      const result = run([
        'batch',
        'sign-approvers',
        '--key',
        `${name}.pem`,
        '--epoch',
        '4',
        '--approvers',
        'next.json',
        '--threshold',
        '2',
        '--current',
        'current.json',
      ]);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stderr).toContain('at epoch 4: 2 of 3 must sign a batch');
      return JSON.parse(result.stdout);
    });
    const next = readApproverSet(signs[0].set);
    expect(next.approvers.map((x) => x.kid)).toContain(keys[3]!.kid);
    const published = readApproverSet(current);
    expect(verifyApproverSetChange(published, next, [signs[0]]).ok).toBe(false);
    expect(verifyApproverSetChange(published, next, signs)).toMatchObject({ ok: true });
    // The incoming key cannot vouch for its own set.
    const self = run([
      'batch',
      'sign-approvers',
      '--key',
      's4.pem',
      '--epoch',
      '4',
      '--approvers',
      'next.json',
      '--threshold',
      '2',
    ]);
    expect(verifyApproverSetChange(published, next, [signs[0], JSON.parse(self.stdout)]).ok).toBe(false);
    expect(
      codeOf(
        run([
          'batch',
          'sign-approvers',
          '--key',
          's4.pem',
          '--epoch',
          '4',
          '--approvers',
          'next.json',
          '--threshold',
          '2',
          '--current',
          'current.json',
        ]),
      ),
    ).toBe('INVALID_STATE');
    const skip = run([
      'batch',
      'sign-approvers',
      '--key',
      's1.pem',
      '--epoch',
      '5',
      '--approvers',
      'next.json',
      '--threshold',
      '2',
      '--current',
      'current.json',
    ]);
    expect(codeOf(skip)).toBe('INVALID_STATE');
    expect(
      codeOf(run(['batch', 'sign-approvers', '--key', 's1.pem', '--epoch', '4', '--approvers', 'next.json'])),
    ).toBe('INVALID_ARGUMENT');
    expect(
      codeOf(
        run([
          'batch',
          'sign-approvers',
          '--key',
          's1.pem',
          '--epoch',
          '4',
          '--approvers',
          'next.json',
          '--threshold',
          '4',
        ]),
      ),
    ).toBe('INVALID_ARGUMENT');
  });
});
