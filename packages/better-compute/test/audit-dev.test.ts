/**
 * The "done when", with real processes: `dev` (on PostgreSQL, its bundle made on start)
 * seals checkpoints as it runs; after a few reserves, `audit prove` writes a proof that
 * `audit check-proof --pin` accepts in a directory with no configuration or database, and the same
 * file with one byte changed is refused.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import type { Kysely } from 'kysely';
import { readPkiBundle } from '../src/pki/bundle.js';
import type { ComputeTables } from '../src/db/tables.js';
import { computeBin, startBin, type RunningServer } from '../../../test/e2e/support.js';

const kinds = await testDatabaseKinds();
const secret = 'audit dev test secret, long enough 0123456';

function cli(cwd: string, args: string[], env: Record<string, string>) {
  const result = spawnSync(process.execPath, [computeBin, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: cwd, BETTER_IAM_HOME: join(cwd, 'iam'), ...env },
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe.runIf(kinds.includes('postgres'))('dev seals the audit log as it runs (real binaries)', () => {
  let database: TestDatabase;
  let server: RunningServer | undefined;
  const work = mkdtempSync(join(tmpdir(), 'bc-audit-dev-'));
  let env: Record<string, string>;
  let url = '';
  let poolId = '';

  beforeAll(async () => {
    database = await createTestDatabase('postgres', 2);
    env = { BETTER_COMPUTE_DATABASE_URL: database.url!, BETTER_COMPUTE_SECRET: secret };
    writeFileSync(
      join(work, 'better-compute.config.mjs'),
      'export default { database: process.env.BETTER_COMPUTE_DATABASE_URL, audit: { checkpointEverySeconds: 1 } };\n',
    );
    server = await startBin(computeBin, ['dev', '--port', '0', '--sim', '2'], {
      cwd: work,
      env: { HOME: work, ...env },
      ready: /\ntry: BETTER_COMPUTE_URL=\S+/,
      timeoutMs: 50_000,
    });
    const startup = server.output();
    url = /better-compute dev: (http:\/\/127\.0\.0\.1:\d+)\/api\/compute\n/.exec(startup)![1]!;
    poolId = /in pool (pool_\w+)/.exec(startup)![1]!;
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await database?.close();
  });

  it('seals the reserves, and their proof checks offline', async () => {
    const dev = JSON.parse(readFileSync(join(work, '.better-compute', 'dev.json'), 'utf8'));
    const caller = { BETTER_COMPUTE_URL: url, BETTER_COMPUTE_TOKEN: dev.acmeAdmin.apiKey };
    for (let i = 0; i < 3; i++) {
      const reserved = cli(work, ['reserve', '--pool', poolId, '--gpus', '1', '--for', '1h'], caller);
      expect(reserved.status, reserved.stderr).toBe(0);
    }
    const db = database.db as Kysely<ComputeTables>;
    const entries = await db
      .selectFrom('compute.audit_events')
      .select(['id', 'method'])
      .where('tenant_id', '=', 'acme')
      .where('method', '=', 'reservations.create')
      .execute();
    expect(entries).toHaveLength(3);
    // dev's job seals every second: wait until every acme entry is in a checkpoint.
    let unsealed = -1;
    for (let i = 0; i < 200 && unsealed !== 0; i++) {
      const rows = await db
        .selectFrom('compute.audit_events')
        .select('id')
        .where('tenant_id', '=', 'acme')
        .where('leaf_index', 'is', null)
        .execute();
      unsealed = rows.length;
      if (unsealed) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(unsealed, server!.output()).toBe(0);
    const bundle = await readPkiBundle(join(work, '.better-compute', 'pki.json'));
    const pin = bundle.audit!.pin;
    expect(bundle.trustDomain).toBe('dev.localhost');

    const verified = cli(work, ['audit', 'verify', '--tenant', 'acme'], env);
    expect(verified.stderr).toBe('');
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, pin, problems: [] });

    const proved = cli(
      work,
      ['audit', 'prove', entries[1]!.id, '--tenant', 'acme', '--out', 'proof.json'],
      env,
    );
    expect(proved.stderr).toBe('');
    const offline = mkdtempSync(join(tmpdir(), 'bc-audit-elsewhere-'));
    const text = readFileSync(join(work, 'proof.json'), 'utf8');
    expect(JSON.parse(text).checkpoint).toMatch(/^dev\.localhost\/audit\/acme\n\d+\n/);
    writeFileSync(join(offline, 'proof.json'), text);
    const checked = cli(offline, ['audit', 'check-proof', 'proof.json', '--pin', pin], {});
    expect(checked.stderr).toBe('');
    expect(JSON.parse(checked.stdout)).toMatchObject({ ok: true, entryId: entries[1]!.id, tenant: 'acme' });

    const bent = text.replace('"reservations.create"', '"reservations.delete"');
    expect(bent).not.toBe(text);
    writeFileSync(join(offline, 'bent.json'), bent);
    const refused = cli(offline, ['audit', 'check-proof', 'bent.json', '--pin', pin], {});
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^INVALID_PROOF: the entry is not included/);
  }, 120_000);
});
