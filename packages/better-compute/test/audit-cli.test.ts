/**
 * The audit commands through the real binary: `audit checkpoint` signs with the PKI bundle's audit
 * key (and says which of bundle, key or secret is missing), `audit verify` passes a clean log and
 * names tampering (AUDIT_TAMPERED, --query problems), `audit prove` writes a new file only, and
 * `audit check-proof` checks it in a directory with no configuration and no database.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { createPkiBundle } from '../src/pki/create.js';
import { auditFixture, writeEntries, type AuditFixture } from './audit-support.js';

const kinds = await testDatabaseKinds();
const bin = join(import.meta.dirname, '..', 'bin', 'better-compute.cjs');
const secret = 'audit cli test secret, long enough 0123';

function run(cwd: string, args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: cwd, ...env },
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe.runIf(kinds.includes('postgres'))('the audit commands (real binary, postgres)', () => {
  let f: AuditFixture;
  let cwd: string;
  let env: Record<string, string>;
  let pin: string;
  beforeAll(async () => {
    f = await auditFixture();
    cwd = mkdtempSync(join(tmpdir(), 'bc-audit-cli-'));
    env = { BETTER_COMPUTE_DATABASE_URL: f.database.url! };
    const bundle = await createPkiBundle({
      path: join(cwd, '.better-compute', 'pki.json'),
      secret,
      trustDomain: 'compute.example.com',
    });
    pin = bundle.audit!.pin;
    await writeEntries(f.db, 'acme', 5);
  }, 120_000);
  afterAll(async () => {
    await f?.close();
  });

  it('checkpoint needs the secret, the bundle and its audit key, and then seals', async () => {
    const noSecret = run(cwd, ['audit', 'checkpoint'], env);
    expect(noSecret.status).toBe(1);
    expect(noSecret.stderr).toMatch(/^MISSING_ENV: /);
    expect(noSecret.stderr).toContain('BETTER_COMPUTE_SECRET');
    expect(noSecret.stderr).not.toContain(secret);

    const elsewhere = mkdtempSync(join(tmpdir(), 'bc-audit-nopki-'));
    const noBundle = run(elsewhere, ['audit', 'checkpoint'], { ...env, BETTER_COMPUTE_SECRET: secret });
    expect(noBundle.stderr).toMatch(/^PKI_NOT_FOUND: /);

    const withoutAudit = JSON.parse(readFileSync(join(cwd, '.better-compute', 'pki.json'), 'utf8'));
    delete withoutAudit.audit;
    mkdirSync(join(elsewhere, 'x'));
    writeFileSync(join(elsewhere, 'x', 'pki.json'), JSON.stringify(withoutAudit), { mode: 0o600 });
    const noKey = run(elsewhere, ['audit', 'checkpoint', '--pki', 'x/pki.json'], {
      ...env,
      BETTER_COMPUTE_SECRET: secret,
    });
    expect(noKey.stderr).toMatch(/^AUDIT_KEY_MISSING: /);

    const wrong = run(cwd, ['audit', 'checkpoint'], {
      ...env,
      BETTER_COMPUTE_SECRET: 'not the secret at all 0123',
    });
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).not.toContain('not the secret at all');

    // Other suites' transactions on this server can hold the snapshot back: run it until all five are in.
    let sealed = 0;
    for (let attempt = 0; attempt < 40 && sealed < 5; attempt++) {
      const ok = run(cwd, ['audit', 'checkpoint', '--tenant', 'acme'], {
        ...env,
        BETTER_COMPUTE_SECRET: secret,
      });
      expect(ok.stderr).toBe('');
      expect(ok.status).toBe(0);
      const result = JSON.parse(ok.stdout);
      expect(result.pin).toBe(pin);
      sealed += result.sealed;
      if (sealed < 5) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(sealed).toBe(5);
    const verified = run(cwd, ['audit', 'verify', '--tenant', 'acme'], env);
    expect(verified.stderr).toBe('');
    expect(verified.status).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, entries: 5, problems: [], pin });
  }, 120_000);

  it('prove writes a new file that check-proof accepts offline, and refuses any changed byte', async () => {
    const entry = await f.db
      .selectFrom('compute.audit_events')
      .select('id')
      .where('tenant_id', '=', 'acme')
      .where('leaf_index', '=', 3)
      .executeTakeFirstOrThrow();
    const proved = run(cwd, ['audit', 'prove', entry.id, '--tenant', 'acme', '--out', 'proof.json'], env);
    expect(proved.stderr).toBe('');
    expect(JSON.parse(proved.stdout)).toMatchObject({ entryId: entry.id, leafIndex: 3, treeSize: 5 });
    const again = run(cwd, ['audit', 'prove', entry.id, '--tenant', 'acme', '--out', 'proof.json'], env);
    expect(again.stderr).toMatch(/^ALREADY_EXISTS: /);
    const otherTenant = run(
      cwd,
      ['audit', 'prove', entry.id, '--tenant', 'globex', '--out', 'other.json'],
      env,
    );
    expect(otherTenant.stderr).toMatch(/^NOT_FOUND: /);

    // Another machine: only the file and the pin; no configuration, no database, no bundle.
    const offline = mkdtempSync(join(tmpdir(), 'bc-audit-offline-'));
    const text = readFileSync(join(cwd, 'proof.json'), 'utf8');
    writeFileSync(join(offline, 'proof.json'), text);
    const checked = run(offline, ['audit', 'check-proof', 'proof.json', '--pin', pin]);
    expect(checked.stderr).toBe('');
    expect(checked.status).toBe(0);
    expect(JSON.parse(checked.stdout)).toMatchObject({
      ok: true,
      entryId: entry.id,
      leafIndex: 3,
      treeSize: 5,
    });
    expect(
      run(offline, ['audit', 'check-proof', 'proof.json'], { BETTER_COMPUTE_AUDIT_PIN: pin }).status,
    ).toBe(0);

    const noPin = run(offline, ['audit', 'check-proof', 'proof.json']);
    expect(noPin.stderr).toMatch(/^AUDIT_KEY_MISSING: /);
    const badPin = run(offline, ['audit', 'check-proof', 'proof.json', '--pin', 'sha256/nope']);
    expect(badPin.status).toBe(2);

    // One byte changed anywhere that matters: in the entry, the proof, the note or its signature.
    const proof = JSON.parse(text);
    const flips = [
      text.replace(`"requestId": "${proof.entry.requestId}"`, `"requestId": "${proof.entry.requestId}x"`),
      text.replace(
        proof.inclusion[0],
        proof.inclusion[0].startsWith('A')
          ? `B${proof.inclusion[0].slice(1)}`
          : `A${proof.inclusion[0].slice(1)}`,
      ),
      text.replace('compute.example.com/audit/acme\\n5', 'compute.example.com/audit/acme\\n6'),
      text.replace(/— (\S+) (.)/, (_m, name: string, c: string) => `— ${name} ${c === 'A' ? 'B' : 'A'}`),
    ];
    for (const [i, flipped] of flips.entries()) {
      expect(flipped).not.toBe(text);
      writeFileSync(join(offline, `bent-${i}.json`), flipped);
      const refused = run(offline, ['audit', 'check-proof', `bent-${i}.json`, '--pin', pin]);
      expect(refused.status).toBe(1);
      expect(refused.stderr).toMatch(/^INVALID_PROOF: /);
    }
  }, 120_000);

  it('verify names a changed entry: AUDIT_TAMPERED, and --query problems prints them', async () => {
    const entry = await f.db
      .selectFrom('compute.audit_events')
      .select('id')
      .where('tenant_id', '=', 'acme')
      .where('leaf_index', '=', 1)
      .executeTakeFirstOrThrow();
    await sql`update compute.audit_events set actor = 'prn_someone_else' where id = ${entry.id}`.execute(
      f.db,
    );
    const tampered = run(cwd, ['audit', 'verify', '--tenant', 'acme', '--query', 'problems'], env);
    expect(tampered.status).toBe(1);
    expect(tampered.stderr).toMatch(/^AUDIT_TAMPERED: /);
    const problems = JSON.parse(tampered.stdout);
    expect(problems).toContainEqual(expect.objectContaining({ kind: 'entry_modified', entryId: entry.id }));
    expect(problems).toContainEqual(expect.objectContaining({ kind: 'root_mismatch' }));
  }, 120_000);

  it('verify never passes a log with nothing to verify for a verified one (issue 31)', async () => {
    // Better IAM's tables, so the command can ask whether a tenant exists: root does, nobody does not.
    const migrated = run(cwd, ['migrate'], env);
    expect(migrated.status, migrated.stderr).toBe(0);

    const unknown = run(cwd, ['audit', 'verify', '--tenant', 'nobody'], env);
    expect(unknown.status).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr.split('\n')[0]).toBe(
      'NOT_FOUND: no tenant nobody: Better IAM knows none, and no audit entry names it',
    );
    const malformed = run(cwd, ['audit', 'verify', '--tenant', 'Not A Tenant'], env);
    expect(malformed.status).toBe(2);

    // A tenant that exists with an empty log: the report says so, and so does the exit status.
    const empty = run(cwd, ['audit', 'verify', '--tenant', 'root'], env);
    expect(empty.status).toBe(1);
    expect(JSON.parse(empty.stdout)).toMatchObject({
      ok: false,
      nothingToVerify: 'empty',
      checkpoints: 0,
      entries: 0,
      unsealed: 0,
      problems: [],
    });
    expect(empty.stderr.split('\n')[0]).toBe(
      'NOT_FOUND: tenant root has no audit entry: there is nothing to verify',
    );

    // Entries no checkpoint seals yet (of a tenant IAM does not know: its log is still its log).
    await writeEntries(f.db, 'initech', 2);
    const unsealed = run(cwd, ['audit', 'verify', '--tenant', 'initech'], env);
    expect(unsealed.status).toBe(1);
    expect(JSON.parse(unsealed.stdout)).toMatchObject({
      ok: false,
      nothingToVerify: 'unsealed',
      unsealed: 2,
    });
    expect(unsealed.stderr.trimEnd().split('\n')).toEqual([
      "INVALID_STATE: tenant initech's 2 audit entries are not sealed by any checkpoint yet: nothing was verified",
      'hint: Seal them now with "better-compute audit checkpoint --tenant initech" (the controllers role does it every hour), then verify again.',
    ]);
    let sealed = 0;
    for (let attempt = 0; attempt < 40 && sealed < 2; attempt++) {
      const ok = run(cwd, ['audit', 'checkpoint', '--tenant', 'initech'], {
        ...env,
        BETTER_COMPUTE_SECRET: secret,
      });
      expect(ok.status, ok.stderr).toBe(0);
      sealed += JSON.parse(ok.stdout).sealed;
      if (sealed < 2) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const verified = run(cwd, ['audit', 'verify', '--tenant', 'initech'], env);
    expect(verified.status, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, nothingToVerify: null, entries: 2 });

    // Its checkpoints removed, the sealed leaves remain: tampering, never an unsealed log.
    await sql`delete from compute.audit_checkpoints where tenant_id = 'initech'`.execute(f.db);
    const stripped = run(cwd, ['audit', 'verify', '--tenant', 'initech', '--query', 'problems'], env);
    expect(stripped.status).toBe(1);
    expect(stripped.stderr).toMatch(/^AUDIT_TAMPERED: .*checkpoint_missing/);
    expect(JSON.parse(stripped.stdout)).toEqual([
      expect.objectContaining({
        kind: 'checkpoint_missing',
        message: expect.stringContaining('every checkpoint was removed'),
      }),
    ]);
  }, 120_000);
});
