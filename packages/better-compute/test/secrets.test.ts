/**
 * Write-only secrets in process, on both databases: sealing (a tampered value, another row's or
 * version's associated data, a `plain.` row and a deployment without a secret never open); put by
 * name creates and adds versions, answers metadata only, and refuses what the value may not be
 * without quoting it; another tenant reads, resolves and deletes nothing; templates check their
 * references; a sandbox's start is queued with references only and the gateway's resolution opens
 * them as the sandbox's tenant's; and the value's bytes are in no table's text, event or audit entry.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createSecretSealer, openSecretEnv } from '../src/modules/secrets/index.js';
import { createCommandSecrets } from '../src/gateway/command-secrets.js';
import { createPkiBundle } from '../src/pki/create.js';
import { seedVpsPool } from './fleet-support.js';
import { call, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const SECRET = 'secrets-suite-deployment-secret-0123456789';
const OPS = 't-root-ops';
const ACME = 't-acme-alice';
const GLOBEX = 't-globex-bob';
/** The value's mark, searched for in every table afterwards. */
const MARK = `mark${'7f3a9c2e5d'.repeat(3)}`;
const VALUE = `sk-test it's ${MARK}\nsecond line\n`;

describe('sealing', () => {
  const sealer = createSecretSealer(SECRET);
  const bound = { tenantId: 'acme', id: 'sec_01k00000000000000000000000', version: 1 };

  it('opens what it sealed, under the same tenant, id and version only', () => {
    const sealed = sealer.seal(VALUE, bound);
    expect(sealed.startsWith('v1.')).toBe(true);
    expect(sealed).not.toContain(MARK);
    expect(sealer.open(sealed, bound)).toBe(VALUE);
    // Another row, a later version, another tenant: the associated data differs, nothing opens.
    for (const wrong of [
      { ...bound, id: 'sec_01k00000000000000000000001' },
      { ...bound, version: 2 },
      { ...bound, tenantId: 'globex' },
    ])
      expect(() => sealer.open(sealed, wrong)).toThrow(/does not open/);
  });

  it('refuses a tampered value, a plain row, another deployment secret, and seals nothing without one', () => {
    const sealed = sealer.seal(VALUE, bound);
    const parts = sealed.split('.');
    const body = Buffer.from(parts[2]!, 'base64url');
    body[0]! ^= 1;
    const tampered = [parts[0], parts[1], body.toString('base64url'), parts[3]].join('.');
    expect(() => sealer.open(tampered, bound)).toThrow(/does not open/);
    expect(() => sealer.open(`plain.${VALUE}`, bound)).toThrow(/does not open/);
    expect(() => createSecretSealer('another-secret-0123456789abcdef').open(sealed, bound)).toThrow(
      /does not open/,
    );
    const none = createSecretSealer(undefined);
    expect(none.available).toBe(false);
    expect(() => none.seal(VALUE, bound)).toThrow(/no secret to seal/);
  });
});

describe.each(kinds)('secrets on %s', (kind) => {
  const work = mkdtempSync(join(tmpdir(), 'bc-secrets-suite-'));
  let database: TestDatabase;
  let compute: ComputeInstance;
  let poolId = '';
  let flavorId = '';
  let imageId = '';
  let secretId = '';
  let workers: { stop(): Promise<void> } | undefined;

  async function api(method: string, body: Record<string, unknown>, token = ACME) {
    const { body: answer } = await call(compute, method, body, { token });
    if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
    return answer.data as any;
  }
  async function fails(method: string, body: Record<string, unknown>, token = ACME) {
    const { status, body: answer } = await call(compute, method, body, { token });
    if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
    expect(status).toBeLessThan(500);
    // The value is never quoted back, whatever was wrong.
    expect(JSON.stringify(answer)).not.toContain(MARK);
    return answer.error as { code: string; message: string; details?: Record<string, unknown> };
  }

  beforeAll(async () => {
    const pki = join(work, 'pki.json');
    await createPkiBundle({ path: pki, secret: SECRET });
    database = await createTestDatabase(kind, 4);
    compute = await betterCompute(
      { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false, pki, secret: SECRET },
      { log: () => {} },
    );
    await compute.migrate();
    ({ poolId, flavorId, imageId } = await seedVpsPool((method, body) => api(method, body, OPS), 'sec', [
      'acme',
      'globex',
    ]));
    workers = compute.startWorkers(['controllers']);
  }, 120_000);

  afterAll(async () => {
    await workers?.stop();
    await compute?.close();
    await database?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('put by name creates version 1 and each put adds one; answers are metadata only', async () => {
    const created = await api('secrets.put', {
      name: 'openai',
      value: VALUE,
      idempotencyKey: 'put-openai-1',
    });
    secretId = created.id;
    expect(created).toEqual({
      id: expect.stringMatching(/^sec_/),
      tenantId: 'acme',
      name: 'openai',
      version: 1,
      reference: `secret://acme/${created.id}`,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    // The same key and value replays the first answer; the same key with another value conflicts.
    expect(
      await api('secrets.put', { name: 'openai', value: VALUE, idempotencyKey: 'put-openai-1' }),
    ).toEqual(created);
    expect(
      (await fails('secrets.put', { name: 'openai', value: 'other', idempotencyKey: 'put-openai-1' })).code,
    ).toBe('CONFLICT');
    const second = await api('secrets.put', { secretId, value: `${VALUE}v2` });
    expect(second).toMatchObject({ id: secretId, version: 2 });
    expect((await fails('secrets.put', { name: 'openai', value: 'x', ifVersion: 1 })).code).toBe('CONFLICT');
    const third = await api('secrets.put', { name: 'openai', value: VALUE, ifVersion: 2 });
    expect(third.version).toBe(3);
    expect(await api('secrets.get', { name: 'openai' })).toEqual(third);
    const listed = await api('secrets.list', {});
    expect(listed.items).toEqual([third]);
    expect(JSON.stringify(listed)).not.toContain(MARK);
  });

  it('refuses an empty value, a NUL, an oversized one, both or neither name, without quoting the value', async () => {
    expect((await fails('secrets.put', { name: 'empty', value: '' })).code).toBe('INVALID_ARGUMENT');
    expect((await fails('secrets.put', { name: 'nul', value: `${MARK}\0x` })).message).toContain('NUL');
    const huge = await fails('secrets.put', { name: 'huge', value: MARK.repeat(1000) });
    expect(huge.code).toBe('INVALID_ARGUMENT');
    expect((await fails('secrets.put', { value: MARK })).code).toBe('INVALID_ARGUMENT');
    expect((await fails('secrets.put', { name: 'a', secretId, value: MARK })).code).toBe('INVALID_ARGUMENT');
    expect(
      (await fails('secrets.put', { secretId: 'sec_01k00000000000000000000000', value: MARK })).code,
    ).toBe('NOT_FOUND');
  });

  it('another tenant reads, puts over and deletes nothing of it, and its template cannot name it', async () => {
    for (const [method, body] of [
      ['secrets.get', { secretId }],
      ['secrets.delete', { secretId }],
      ['secrets.put', { secretId, value: 'hijack' }],
    ] as const)
      expect((await fails(method, body, GLOBEX)).code).toBe('NOT_FOUND');
    expect((await api('secrets.list', {}, GLOBEX)).items).toEqual([]);
    // Naming acme's tenant in another tenant's call is refused before anything is read.
    expect((await fails('secrets.get', { tenantId: 'acme', secretId }, GLOBEX)).code).toBe('ACCESS_DENIED');
    const refused = await fails(
      'sandboxTemplates.create',
      {
        name: 'steal',
        poolId,
        flavorId,
        imageId,
        env: [{ name: 'KEY', secretRef: `secret://acme/${secretId}` }],
      },
      GLOBEX,
    );
    expect(refused.code).toBe('INVALID_ARGUMENT');
    expect((await api('secrets.get', { secretId })).version).toBe(3);
  });

  it('a template names existing secrets of its tenant only; a sandbox is queued with references, opened only as its tenant’s', async () => {
    const base = { poolId, flavorId, imageId, warmMin: 0, warmMax: 0 };
    const missing = await fails('sandboxTemplates.create', {
      ...base,
      name: 'missing',
      env: [{ name: 'KEY', secretRef: `secret://acme/sec_${'1'.repeat(26)}` }],
    });
    expect(missing).toMatchObject({ code: 'NOT_FOUND', details: { field: 'env' } });
    // A qemu template takes variables as a bwrap one does (its guest gets them with its identity).
    const qemu = await api('sandboxTemplates.create', {
      ...base,
      name: 'vm',
      runtime: 'qemu',
      env: [{ name: 'KEY', secretRef: `secret://acme/${secretId}` }],
    });
    expect(qemu).toMatchObject({ runtime: 'qemu', env: [{ name: 'KEY', secretRef: `secret://acme/${secretId}` }] }); // prettier-ignore
    const template = await api('sandboxTemplates.create', {
      ...base,
      name: 'python',
      env: [{ name: 'OPENAI_API_KEY', secretRef: `secret://acme/${secretId}` }],
    });
    const sandbox = await api('sandboxes.create', { templateId: template.id, waitSeconds: 0 });
    const db = compute.database.db as unknown as Kysely<any>;
    // Queued by the sandbox's workflow once the controller runs it.
    let command: any;
    for (let i = 0; i < 300 && !command; i++) {
      command = await db
        .selectFrom('compute.commands')
        .selectAll()
        .where('kind', '=', 'sandbox.create')
        .where(sql`payload->>'sandboxId'`, '=', sandbox.id)
        .executeTakeFirst();
      if (!command) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(command.payload.env).toEqual([{ name: 'OPENAI_API_KEY', secretRef: `secret://acme/${secretId}` }]);
    // The gateway's resolution: the value, in the payload it signs, and nowhere it stores.
    const secrets = createCommandSecrets(SECRET);
    expect(secrets.needs(command)).toBe(true);
    const resolved = await secrets.resolve(compute.database.db as never, command);
    expect(resolved).toEqual({
      payload: { ...command.payload, env: [{ name: 'OPENAI_API_KEY', value: VALUE }] },
    });
    // A reference to another tenant's secret never opens, whatever the stored command says.
    const foreign = {
      ...command,
      payload: { ...command.payload, env: [{ name: 'K', secretRef: `secret://globex/${secretId}` }] },
    };
    expect(await secrets.resolve(compute.database.db as never, foreign)).toEqual({
      error: expect.stringContaining('another tenant'),
    });
    await expect(
      openSecretEnv(compute.database.db as never, createSecretSealer(SECRET), 'globex', [
        { name: 'K', secretRef: `secret://acme/${secretId}` },
      ]),
    ).rejects.toThrow(/another tenant/);
    // A sealed value moved onto another row does not open there.
    const other = await api('secrets.put', { name: 'other', value: 'other-value' });
    const row = await db
      .selectFrom('compute.secrets')
      .select('sealed')
      .where('id', '=', secretId)
      .executeTakeFirstOrThrow();
    await db.updateTable('compute.secrets').set({ sealed: row.sealed }).where('id', '=', other.id).execute();
    await expect(
      openSecretEnv(compute.database.db as never, createSecretSealer(SECRET), 'acme', [
        { name: 'K', secretRef: other.reference },
      ]),
    ).rejects.toThrow(/does not open/);
    // Deleted: the next start is refused, and the queued one is not sent.
    await api('secrets.delete', { name: 'other' });
    const deleted = await api('secrets.delete', { secretId, ifVersion: 3 });
    expect(deleted).toEqual({ id: secretId, name: 'openai', deleted: true });
    expect((await fails('sandboxes.create', { templateId: template.id, waitSeconds: 0 })).code).toBe(
      'INVALID_STATE',
    );
    expect(await secrets.resolve(compute.database.db as never, command)).toEqual({
      error: expect.stringContaining('does not exist'),
    });
  });

  it('a warm pool fills from a template with secrets; after a put, the old warm sandboxes are not claimed but replaced', async () => {
    const key = await api('secrets.put', { name: 'warmkey', value: 'warm-value-1' });
    const template = await api('sandboxTemplates.create', {
      poolId,
      flavorId,
      imageId,
      name: 'warm',
      warmMin: 1,
      warmMax: 1,
      env: [{ name: 'KEY', secretRef: key.reference }],
    });
    const ready = async () =>
      (compute.database.db as unknown as Kysely<any>)
        .selectFrom('compute.sandboxes')
        .select(['id', 'state', 'created_at'])
        .where('template_id', '=', template.id)
        .where('state', '=', 'warm')
        .execute();
    let warm: any[] = [];
    for (let i = 0; i < 300 && warm.length === 0; i++) {
      warm = await ready();
      if (warm.length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(warm).toHaveLength(1);
    const first = warm[0].id;
    await api('secrets.put', { name: 'warmkey', value: 'warm-value-2' });
    // The warm one holds the old value: a create starts a new sandbox instead.
    const created = await api('sandboxes.create', { templateId: template.id, waitSeconds: 0 });
    expect(created.warm).toBe(false);
    expect(created.id).not.toBe(first);
    // The pool retires it and starts one with the new value.
    let replaced: any[] = [];
    for (let i = 0; i < 300; i++) {
      replaced = await ready();
      if (replaced.length === 1 && replaced[0].id !== first) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(replaced.map((r) => r.id)).not.toContain(first);
    expect(replaced).toHaveLength(1);
    const claimed = await api('sandboxes.create', { templateId: template.id, waitSeconds: 0 });
    expect(claimed).toMatchObject({ warm: true, id: replaced[0].id });
    await api('sandboxTemplates.update', { templateId: template.id, warmMin: 0, warmMax: 0 });
    for (const id of [created.id, claimed.id]) await api('sandboxes.delete', { sandboxId: id });
  });

  it('the value’s bytes are in no table: not the outbox, the audit log, commands, workflows or kept answers', async () => {
    const db = compute.database.db as unknown as Kysely<any>;
    await api('secrets.put', { name: 'kept', value: VALUE, idempotencyKey: 'put-kept-0001' });
    const tables = await sql<{ schema: string; name: string }>`
      select table_schema as schema, table_name as name from information_schema.tables
      where table_schema in ('compute', 'iam') and table_type = 'BASE TABLE'`.execute(db);
    expect(tables.rows.length).toBeGreaterThan(20);
    let rows = 0;
    for (const table of tables.rows) {
      const found = await sql<{ text: string }>`
        select row_to_json(t)::text as text from ${sql.table(`${table.schema}.${table.name}`)} t`.execute(db);
      rows += found.rows.length;
      for (const row of found.rows) expect(row.text, `${table.schema}.${table.name}`).not.toContain(MARK);
    }
    expect(rows).toBeGreaterThan(50);
    // What the outbox and the audit log say of secrets: names, ids and versions.
    const events = await api('events.list', { type: 'secret.' });
    expect(events.items.map((e: any) => e.type)).toEqual(
      expect.arrayContaining(['secret.put', 'secret.deleted']),
    );
    expect(events.items.find((e: any) => e.type === 'secret.put').data).toEqual({
      name: 'openai',
      version: 1,
      created: true,
    });
    const audit = await db
      .selectFrom('compute.audit_events')
      .select(['action', 'resource_type', 'resource_id', 'outcome'])
      .where('method', '=', 'secrets.put')
      .execute();
    expect(audit).toContainEqual({
      action: 'compute:secrets:write',
      resource_type: 'compute-secret',
      resource_id: 'openai',
      outcome: 'allowed',
    });
  });
});
