/**
 * Secrets from mounted files (cli/env-files.ts, docs/deploy.md), through the real binary: NAME_FILE
 * gives NAME the file's value for every command (the pki commands, migrate, doctor), BETTER_COMPUTE_PKI
 * names the bundle, and a variable set both ways, a missing, empty or oversized file is refused
 * with the variable and the path, never a byte of the value.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';

const root = join(import.meta.dirname, '..', '..', '..');
const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const dir = mkdtempSync(join(tmpdir(), 'bc-env-files-'));
const secret = 'env-files-test-secret-0123456789';

function run(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOME: dir, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function file(name: string, contents: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, contents, { mode: 0o600 });
  return path;
}

// As an editor or `echo` leaves it: with a final line break, which is not part of the value.
const secretFile = file('secret', `${secret}\n`);
const pki = join(dir, 'keys', 'pki.json');

describe('secrets from files', () => {
  it('a pki command reads the secret from BETTER_COMPUTE_SECRET_FILE and the bundle from BETTER_COMPUTE_PKI', () => {
    const init = run(['pki', 'init', '--trust-domain', 'files.example', '--format', 'compact'], {
      BETTER_COMPUTE_SECRET_FILE: secretFile,
      BETTER_COMPUTE_PKI: pki,
    });
    expect(init.stderr).toBe('');
    expect(init.status).toBe(0);
    expect(existsSync(pki)).toBe(true);
    expect(init.stdout).not.toContain(secret);
    // The same value given directly opens the keys the file's value sealed (the line break was dropped)…
    const direct = run(['pki', 'renew-ca', '--format', 'compact'], {
      BETTER_COMPUTE_SECRET: secret,
      BETTER_COMPUTE_PKI: pki,
    });
    expect(direct.stderr).toBe('');
    expect(direct.status).toBe(0);
    // …and another file's value does not: the file is what the command used.
    const other = run(['pki', 'renew-ca'], {
      BETTER_COMPUTE_SECRET_FILE: file('other-secret', 'another-secret-of-enough-length'),
      BETTER_COMPUTE_PKI: pki,
    });
    expect(other.status).toBe(1);
    expect(other.stderr).toMatch(/^PKI_UNSEAL_FAILED: /);
    // --pki still wins over the environment.
    const elsewhere = run(['pki', 'show', '--pki', join(dir, 'nowhere.json')], { BETTER_COMPUTE_PKI: pki });
    expect(elsewhere.stderr).toMatch(/^PKI_NOT_FOUND: .*nowhere\.json/);
  });

  it('refuses a variable set both ways, naming neither value', () => {
    const result = run(['pki', 'show'], {
      BETTER_COMPUTE_PKI: pki,
      BETTER_COMPUTE_SECRET: 'the-direct-value-never-printed',
      BETTER_COMPUTE_SECRET_FILE: secretFile,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toBe(
      'INVALID_CONFIG: BETTER_COMPUTE_SECRET and BETTER_COMPUTE_SECRET_FILE are both set\n' +
        'hint: Set one of them: BETTER_COMPUTE_SECRET_FILE for a mounted file, or BETTER_COMPUTE_SECRET itself.\n',
    );
  });

  it('refuses a missing, empty, oversized or NUL-holding file, naming the path and never its contents', () => {
    const missing = run(['pki', 'show'], {
      BETTER_COMPUTE_PKI: pki,
      BETTER_COMPUTE_ADMIN_PASSWORD_FILE: join(dir, 'not-there'),
    });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(
      /^INVALID_CONFIG: BETTER_COMPUTE_ADMIN_PASSWORD_FILE is \/.*\/not-there, which cannot be read \(ENOENT\)\nhint: Mount the file there/,
    );
    const empty = run(['pki', 'show'], {
      BETTER_COMPUTE_PKI: pki,
      BETTER_COMPUTE_TOKEN_FILE: file('empty', '\n'),
    });
    expect(empty.stderr).toMatch(/^INVALID_CONFIG: BETTER_COMPUTE_TOKEN_FILE is .*\/empty, which is empty\n/);
    const big = 'x'.repeat(70 * 1024);
    const oversized = run(['pki', 'show'], {
      BETTER_COMPUTE_PKI: pki,
      BETTER_COMPUTE_SECRET_FILE: file('big', big),
    });
    expect(oversized.stderr).toMatch(
      /^INVALID_CONFIG: BETTER_COMPUTE_SECRET_FILE is .*\/big, which is over 64 KiB\n/,
    );
    expect(oversized.stderr).not.toContain('xxxx');
    const nul = run(['pki', 'show'], {
      BETTER_COMPUTE_PKI: pki,
      BETTER_COMPUTE_SECRET_FILE: file('nul', 'value-before\0value-after'),
    });
    expect(nul.stderr).toMatch(
      /^INVALID_CONFIG: BETTER_COMPUTE_SECRET_FILE is .*\/nul, which holds a NUL byte\n/,
    );
    expect(nul.stderr).not.toContain('value-');
    // A directory is not a file either.
    const directory = run(['pki', 'show'], {
      BETTER_COMPUTE_PKI: pki,
      BETTER_COMPUTE_SECRET_FILE: dir,
    });
    expect(directory.stderr).toMatch(/^INVALID_CONFIG: .*which cannot be read \(EISDIR\)/);
  });

  // The files are read when a command first reads its environment (pki show does, for
  // BETTER_COMPUTE_PKI), so a command that reads none never fails on them.
  it('help and version need none of the files', () => {
    const broken = { BETTER_COMPUTE_SECRET_FILE: join(dir, 'not-there') };
    expect(run(['version'], broken).status).toBe(0);
    expect(run(['help', 'serve'], broken).status).toBe(0);
    expect(run(['serve', '--help'], broken).status).toBe(0);
  });
});

describe.each(await testDatabaseKinds())(
  'a config command with its database URL from a file on %s',
  (kind) => {
    let database: TestDatabase | undefined;
    afterAll(async () => {
      await database?.close();
    });

    it('migrate and doctor find the database, the secret and the bundle through the environment alone', async () => {
      let url: string;
      if (kind === 'postgres') {
        database = await createTestDatabase('postgres', 1);
        url = database.url!;
      } else url = `pglite:${mkdtempSync(join(dir, 'pglite-'))}`;
      const env = {
        BETTER_COMPUTE_DATABASE_URL_FILE: file(`database-url-${kind}`, `${url}\n`),
        BETTER_COMPUTE_SECRET_FILE: secretFile,
        BETTER_COMPUTE_PKI: pki,
      };
      const migrate = run(['migrate', '--format', 'compact'], env);
      expect(migrate.stderr).toBe('');
      expect(migrate.status).toBe(0);
      expect(JSON.parse(migrate.stdout).applied).toContainEqual({
        module: 'compute',
        name: '0001_foundation',
      });
      const doctor = run(['doctor', '--query', 'findings', '--format', 'compact'], env);
      const findings = JSON.parse(doctor.stdout) as { check: string; severity: string }[];
      const severity = (check: string) => findings.find((finding) => finding.check === check)?.severity;
      expect(severity('database.reachable')).toBe('ok');
      expect(severity('schema.current')).toBe('ok');
      expect(severity('secrets.sealed')).toBe('ok');
      expect(severity('pki.present')).toBe('ok');
      expect(severity('pki.unsealable')).toBe('ok');
      expect(doctor.stdout + doctor.stderr).not.toContain(secret);
    }, 120_000);
  },
);
