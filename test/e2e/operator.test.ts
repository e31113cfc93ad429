/**
 * The operator's path on the machine's PostgreSQL, through the real binary: init, migrate (twice),
 * doctor --strict, serve (refusing without a first administrator, then serving), a sign-in as that
 * administrator, token commands over --url, and a clean stop on SIGTERM.
 */
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '@better-compute/db/testing';
import { computeBin, freePort, runBin, startBin } from './support.js';

const postgres = await isPostgresReachable();

describe.runIf(postgres)('an operator on PostgreSQL', () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  const cwd = mkdtempSync(join(tmpdir(), 'bc-operator-'));
  beforeAll(async () => {
    database = await createTestDatabase('postgres', 2);
    env = { HOME: cwd, BETTER_IAM_HOME: join(cwd, 'iam'), BETTER_COMPUTE_DATABASE_URL: database.url! };
  });
  afterAll(async () => {
    await database?.close();
  });
  const compute = (args: string[], extra: Record<string, string> = {}, input?: string) =>
    runBin(computeBin, args, { cwd, env: { ...env, ...extra }, ...(input === undefined ? {} : { input }) });

  it('init writes a starter configuration once and never over it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bc-init-'));
    const first = runBin(computeBin, ['init'], { cwd: dir, env: { HOME: dir } });
    expect(first.status).toBe(0);
    expect(readFileSync(join(dir, 'better-compute.config.ts'), 'utf8')).toContain("from 'better-compute'");
    const second = runBin(computeBin, ['init'], { cwd: dir, env: { HOME: dir } });
    expect(second.status).toBe(1);
    expect(second.stderr).toMatch(/^ALREADY_EXISTS: /);
    // It prints what it did, not a result: the output flags are not offered.
    const formatted = runBin(computeBin, ['init', '--format', 'json'], { cwd: dir, env: { HOME: dir } });
    expect(formatted.status).toBe(2);
    expect(formatted.stderr).toMatch(/^INVALID_ARGUMENT: unknown flag --format for "init"/);
  });

  it('without any configuration a config command is CONFIG_NOT_FOUND', () => {
    const result = runBin(computeBin, ['migrate'], { cwd, env: { HOME: cwd } });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^CONFIG_NOT_FOUND: no configuration found\nhint: /);
  });

  it('doctor --strict fails before migrate, naming the schema check', () => {
    const result = compute(['doctor', '--strict', '--format', 'json']);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^DOCTOR_FINDINGS: .*schema\.current \(error\)/);
    expect(JSON.parse(result.stdout).findings.map((f: { check: string }) => f.check)).toContain(
      'schema.current',
    );
  });

  it('migrate applies every module’s migrations, then nothing on a second run', () => {
    const first = compute(['migrate']);
    expect(first.status).toBe(0);
    const applied = JSON.parse(first.stdout).applied.map(
      (m: { module: string; name: string }) => `${m.module}/${m.name}`,
    );
    expect(applied).toEqual(expect.arrayContaining(['compute/0001_foundation', 'iam/0001_init']));
    const second = compute(['migrate']);
    expect(JSON.parse(second.stdout)).toMatchObject({ applied: [], alreadyApplied: applied.length });
  });

  it('doctor --strict passes once migrated, with the deployment’s secret set', () => {
    // Without BETTER_COMPUTE_SECRET, TOTP seeds would be stored unsealed: a warning, which --strict fails on.
    const unsealed = compute(['doctor', '--strict', '--query', 'findings', '--format', 'compact']);
    expect(unsealed.status).toBe(1);
    expect(JSON.parse(unsealed.stdout)).toContainEqual(
      expect.objectContaining({ check: 'secrets.sealed', severity: 'warning' }),
    );
    // A deployment's keys: without the PKI bundle doctor reports an error; pki init makes it.
    const secret = { BETTER_COMPUTE_SECRET: 'operator-test-secret-not-a-real-one' };
    const missing = compute(['doctor', '--strict', '--query', 'findings', '--format', 'compact'], secret);
    expect(missing.status).toBe(1);
    expect(JSON.parse(missing.stdout)).toContainEqual(
      expect.objectContaining({ check: 'pki.present', severity: 'error' }),
    );
    expect(compute(['pki', 'init'], secret).status).toBe(0);
    const result = compute(
      ['doctor', '--strict', '--query', 'findings[].check', '--format', 'compact'],
      secret,
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([
      'database.reachable',
      'clock.skew',
      'schema.current',
      'audit.sealed',
      'registry.consistent',
      'iam.wired',
      'secrets.sealed',
      'cookies.origins',
      'pki.present',
      'pki.permissions',
      'pki.unsealable',
      'pki.complete',
      'pki.quorum',
      'pki.expiry',
      'pki.pins',
    ]);
  });

  it('serve refuses to start an empty deployment without its first administrator', () => {
    const result = compute(['serve', '--port', '0']);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(
      /^MISSING_ENV: this deployment has no administrator yet\nhint: Set BETTER_COMPUTE_ADMIN_EMAIL and BETTER_COMPUTE_ADMIN_PASSWORD/,
    );
  });

  it('serve creates the administrator from the environment, serves token commands, and stops cleanly', async () => {
    const port = await freePort();
    const password = 'correct horse battery staple';
    const server = await startBin(computeBin, ['serve', '--port', String(port)], {
      cwd,
      // The deployment has a PKI bundle (made above), so serve needs the secret that unseals it.
      env: {
        ...env,
        BETTER_COMPUTE_SECRET: 'operator-test-secret-not-a-real-one',
        BETTER_COMPUTE_ADMIN_EMAIL: 'ops@root.example',
        BETTER_COMPUTE_ADMIN_PASSWORD: password,
      },
      ready: /better-compute serving http:\/\/127\.0\.0\.1:\d+\/api\/compute/,
    });
    try {
      const url = `http://127.0.0.1:${port}`;
      const version = compute(['api', 'system.version', '--url', url, '--query', 'product']);
      expect(version.stdout).toBe('better-compute\n');
      const signIn = await fetch(`${url}/api/iam/sessions/signIn`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'ops@root.example', password, tenantId: 'root' }),
      });
      expect(signIn.status).toBe(200);
      const token = ((await signIn.json()) as { data: { token: string } }).data.token;
      expect(token).toMatch(/^biam_ses_/);
      const whoami = compute(['api', 'system.whoami', '--url', url, '--format', 'json'], {
        BETTER_COMPUTE_TOKEN: token,
      });
      expect(whoami.status).toBe(0);
      expect(JSON.parse(whoami.stdout)).toMatchObject({
        tenantId: 'root',
        platformOperator: true,
        credentialKind: 'session',
      });
      const events = compute(['api', 'events.list', 'tenantId=root', '--url', url], {
        BETTER_COMPUTE_TOKEN: token,
      });
      expect(events.status).toBe(0);
      expect(server.output()).not.toContain(password);
      expect(server.output()).not.toContain(token);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    // A second start finds the administrator and needs no password.
    const again = await startBin(computeBin, ['serve', '--port', String(port)], {
      cwd,
      env: { ...env, BETTER_COMPUTE_SECRET: 'operator-test-secret-not-a-real-one' },
      ready: /better-compute serving/,
    });
    expect(await again.stop()).toBe(0);
  });

  it('serve says why it cannot start: a port in use, an address not of this machine, no role', async () => {
    const { createServer } = await import('node:net');
    const taken = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve));
    try {
      const inUse = compute(['serve', '--port', String(port), '--roles', 'api']);
      expect(inUse.status).toBe(1);
      expect(inUse.stderr).toBe(
        `UNAVAILABLE: 127.0.0.1:${port} is in use by another program\nhint: Stop what listens there, or pass another --port.\n`,
      );
    } finally {
      taken.close();
    }
    const badHost = compute(['serve', '--port', '0', '--host', '999.1.1.1', '--roles', 'api']);
    expect(badHost.status).toBe(2);
    expect(badHost.stderr).toMatch(
      /^INVALID_ARGUMENT: --host 999\.1\.1\.1 is not an address of this machine\n/,
    );
    const noRole = compute(['serve', '--roles', '']);
    expect(noRole.status).toBe(2);
    expect(noRole.stderr).toMatch(/^INVALID_ARGUMENT: --roles names no role\nhint: /);
  });

  it('a database that does not answer is UNAVAILABLE, and its password is never shown', async () => {
    const port = await freePort();
    const result = compute(['migrate'], {
      BETTER_COMPUTE_DATABASE_URL: `postgres://postgres:pw-never-shown@127.0.0.1:${port}/compute`,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toBe(
      `UNAVAILABLE: the database postgres://postgres:***@127.0.0.1:${port}/compute cannot be used: nothing listens there (ECONNREFUSED)\n` +
        'hint: Check BETTER_COMPUTE_DATABASE_URL (or the configuration’s database) and that PostgreSQL is running.\n',
    );
  });

  it('auth login saves a profile file only its owner can read', () => {
    const credentials = join(cwd, 'credentials.json');
    const result = compute(
      ['auth', 'login', '--no-verify', '--profile', 'ci'],
      { BETTER_COMPUTE_CREDENTIALS: credentials },
      'biam_key_example\n',
    );
    expect(result.status).toBe(0);
    expect(statSync(credentials).mode & 0o777).toBe(0o600);
    expect(result.stdout + result.stderr).not.toContain('biam_key_example');
  });
});
