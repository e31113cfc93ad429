/**
 * The pki commands and doctor's PKI checks through the real binary: `pki init` then `pki show`
 * (public material only), the refusals with their codes and hints, `issue-gateway` files, and
 * `doctor --strict` failing on a missing and on an expired bundle and passing on a good one.
 */
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '@better-compute/db/testing';
import { createPkiBundle } from '../src/pki/create.js';

const root = join(import.meta.dirname, '..', '..', '..');
const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const cwd = mkdtempSync(join(tmpdir(), 'bc-pki-cli-'));
const secret = 'the secret of this test deployment';
const env = { PATH: process.env.PATH ?? '', HOME: cwd, BETTER_IAM_HOME: join(cwd, 'iam') };

function run(args: string[], extra: Record<string, string> = {}, dir = cwd) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd: dir,
    env: { ...env, ...extra },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('pki through the binary', () => {
  it('init then show: pins and expiries, never a private key or a sealed blob', () => {
    const init = run(['pki', 'init', '--trust-domain', 'compute.example.com'], {
      BETTER_COMPUTE_SECRET: secret,
    });
    expect(init.stderr).toBe('');
    expect(init.status).toBe(0);
    const file = join(cwd, '.better-compute', 'pki.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const show = run(['pki', 'show']);
    expect(show.status).toBe(0);
    const shown = JSON.parse(show.stdout);
    expect(shown.trustDomain).toBe('compute.example.com');
    expect(shown.keys.map((key: { key: string }) => key.key)).toEqual([
      'machine-ca',
      'command-root',
      'exec-ticket',
      'break-glass-ssh-ca',
      'sandbox-ssh-ca',
      'audit',
    ]);
    for (const key of shown.keys) expect(key.pin).toMatch(/^sha256\/[A-Za-z0-9+/]{43}=$/);
    expect(shown.machineCas[0].notAfter).toMatch(/^\d{4}-/);
    // Nothing private: no PEM private key, and none of the sealed blobs of the file.
    const sealed = JSON.parse(readFileSync(file, 'utf8'));
    for (const output of [init.stdout, show.stdout]) {
      expect(output).not.toContain('PRIVATE');
      expect(output).not.toContain('sealedKey');
      for (const entry of [sealed.commandRoot, sealed.audit, sealed.execTicket, sealed.machineCas[0]])
        expect(output).not.toContain(entry.sealedKey.ct);
    }
    expect(run(['pki', 'show', '--query', 'auditPin']).stdout.trim()).toBe(sealed.audit.pin);
    const table = run(['pki', 'show', '--format', 'table']).stdout.trim().split('\n');
    expect(table[0]).toMatch(/^key\s+algorithm\s+pin\s+createdAt\s+status/);
    expect(table).toHaveLength(7);
  });

  it('refuses without the secret, over an existing bundle, and where there is none, each with a hint', () => {
    const noSecret = run(['pki', 'init', '--pki', 'other.json']);
    expect(noSecret.status).toBe(1);
    expect(noSecret.stderr).toMatch(/^MISSING_ENV: BETTER_COMPUTE_SECRET is not set/);
    expect(noSecret.stderr).toContain('hint: Export BETTER_COMPUTE_SECRET');
    const again = run(['pki', 'init'], { BETTER_COMPUTE_SECRET: secret });
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/^ALREADY_EXISTS: a PKI bundle already exists at /);
    expect(again.stderr).toContain('hint: Pass --force');
    const missing = run(['pki', 'show', '--pki', 'nowhere/pki.json']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(
      /^PKI_NOT_FOUND: no PKI bundle at .*nowhere\/pki\.json\nhint: Run "better-compute pki init"/,
    );
    const wrong = run(['pki', 'renew-ca'], { BETTER_COMPUTE_SECRET: 'not the right secret' });
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toMatch(/^PKI_UNSEAL_FAILED: /);
    expect(wrong.stderr).not.toContain('not the right secret');
    const sandbox = run(['pki', 'add-sandbox-ca'], { BETTER_COMPUTE_SECRET: secret });
    expect(sandbox.status).toBe(1);
    expect(sandbox.stderr).toMatch(/^ALREADY_EXISTS: the PKI bundle .* already has a sandbox SSH CA/);
  });

  it('issue-gateway writes a certificate the CA signed and a 0600 key, never over existing files', () => {
    const issued = run(['pki', 'issue-gateway', '--host', 'gw1.compute.example.com'], {
      BETTER_COMPUTE_SECRET: secret,
    });
    expect(issued.status).toBe(0);
    const result = JSON.parse(issued.stdout);
    expect(issued.stdout).not.toContain('PRIVATE');
    expect(statSync(result.key).mode & 0o777).toBe(0o600);
    const certificate = new X509Certificate(readFileSync(result.certificate));
    const ca = JSON.parse(run(['pki', 'show']).stdout).machineCas[0].certificate;
    expect(certificate.verify(new X509Certificate(ca).publicKey)).toBe(true);
    expect(certificate.checkHost('gw1.compute.example.com')).toBeDefined();
    expect(readFileSync(result.key, 'utf8')).toContain('BEGIN PRIVATE KEY');
    const again = run(['pki', 'issue-gateway', '--host', 'gw1.compute.example.com'], {
      BETTER_COMPUTE_SECRET: secret,
    });
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/^ALREADY_EXISTS: /);
  });

  it('rotate-command-root and reseal --new-secret-from-env', () => {
    const before = JSON.parse(run(['pki', 'show']).stdout).commandRoot.pin;
    const rotated = run(['pki', 'rotate-command-root'], { BETTER_COMPUTE_SECRET: secret });
    expect(rotated.status).toBe(0);
    const rotation = JSON.parse(rotated.stdout);
    expect(rotation.previous).toBe(before);
    expect(rotation.rotation.statement).toContain(`from: ${before}`);
    const next = 'the next secret of this deployment';
    const resealed = run(['pki', 'reseal', '--new-secret-from-env', 'NEXT_SECRET'], {
      BETTER_COMPUTE_SECRET: secret,
      NEXT_SECRET: next,
    });
    expect(resealed.status).toBe(0);
    expect(resealed.stdout).not.toContain(next);
    expect(run(['pki', 'renew-ca'], { BETTER_COMPUTE_SECRET: secret }).stderr).toMatch(/^PKI_UNSEAL_FAILED/);
    expect(run(['pki', 'renew-ca', '--query', 'keys[].status'], { BETTER_COMPUTE_SECRET: next }).status).toBe(
      0,
    );
    const noVar = run(['pki', 'reseal', '--new-secret-from-env', 'UNSET_VAR'], {
      BETTER_COMPUTE_SECRET: next,
    });
    expect(noVar.stderr).toMatch(/^MISSING_ENV: UNSET_VAR is not set/);
  });
});

describe.runIf(await isPostgresReachable())(
  'doctor --strict and the PKI bundle (real binary, PostgreSQL)',
  () => {
    let database: TestDatabase;
    const dir = join(cwd, 'deployment');
    let deployEnv: Record<string, string>;

    beforeAll(async () => {
      database = await createTestDatabase('postgres', 2);
      mkdirSync(dir, { recursive: true });
      deployEnv = { BETTER_COMPUTE_DATABASE_URL: database.url!, BETTER_COMPUTE_SECRET: secret };
      const migrated = run(['migrate'], deployEnv, dir);
      expect(migrated.status).toBe(0);
    });
    afterAll(async () => {
      await database?.close();
    });

    const pkiChecks = (stdout: string) =>
      JSON.parse(stdout).findings.filter((finding: { check: string }) => finding.check.startsWith('pki.'));

    it('fails on a missing bundle', () => {
      const result = run(['doctor', '--strict'], deployEnv, dir);
      expect(result.status).toBe(1);
      expect(result.stderr).toMatch(/^DOCTOR_FINDINGS: .*pki\.present \(error\)/);
      expect(pkiChecks(result.stdout)).toEqual([
        expect.objectContaining({
          check: 'pki.present',
          severity: 'error',
          message: expect.stringContaining('pki init'),
        }),
      ]);
    });

    it('passes on a good bundle, and fails when the secret does not open it', async () => {
      await createPkiBundle({ path: join(dir, '.better-compute', 'pki.json'), secret });
      const result = run(['doctor', '--strict'], deployEnv, dir);
      expect(
        pkiChecks(result.stdout).map((f: { check: string; severity: string }) => [f.check, f.severity]),
      ).toEqual([
        ['pki.present', 'ok'],
        ['pki.permissions', 'ok'],
        ['pki.unsealable', 'ok'],
        ['pki.complete', 'ok'],
        ['pki.quorum', 'ok'],
        ['pki.expiry', 'ok'],
        ['pki.pins', 'ok'],
      ]);
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      chmodSync(join(dir, '.better-compute', 'pki.json'), 0o644);
      const loose = run(['doctor', '--strict'], deployEnv, dir);
      expect(loose.status).toBe(1);
      expect(loose.stderr).toContain('pki.permissions (warning)');
      chmodSync(join(dir, '.better-compute', 'pki.json'), 0o600);
      const wrong = run(
        ['doctor', '--strict'],
        { ...deployEnv, BETTER_COMPUTE_SECRET: 'some other secret value' },
        dir,
      );
      expect(wrong.status).toBe(1);
      expect(wrong.stderr).toContain('pki.unsealable (error)');
    });

    it('fails on an expired bundle, and warns on one that expires within 30 days', async () => {
      const day = 24 * 60 * 60 * 1000;
      await createPkiBundle({
        path: join(dir, 'expired.json'),
        secret,
        caValidity: { notBefore: new Date(Date.now() - 400 * day), notAfter: new Date(Date.now() - day) },
      });
      const expired = run(['doctor', '--strict', '--pki', 'expired.json'], deployEnv, dir);
      expect(expired.status).toBe(1);
      expect(expired.stderr).toContain('pki.expiry (error)');
      expect(
        pkiChecks(expired.stdout).find((f: { check: string }) => f.check === 'pki.expiry').message,
      ).toContain('renew-ca');
      await createPkiBundle({
        path: join(dir, 'soon.json'),
        secret,
        caValidity: { notBefore: new Date(Date.now() - day), notAfter: new Date(Date.now() + 10 * day) },
      });
      const soon = run(['doctor', '--strict', '--pki', 'soon.json'], deployEnv, dir);
      expect(soon.status).toBe(1);
      expect(soon.stderr).toContain('pki.expiry (warning)');
    });
  },
);
