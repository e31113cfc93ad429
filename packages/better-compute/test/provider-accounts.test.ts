/**
 * Provider accounts in process, on both databases: create, get, list, update with ifVersion and
 * delete, each with its event and audit entry; credentials only as secret references (a literal key
 * is refused with the field named, another tenant's reference too) and bad input (an unknown field,
 * a host that is not user@host:port, a host key that is not one, NUL bytes, a huge document)
 * changes nothing; another tenant sees none of it; offers with real OpenSSH to a port where nothing
 * listens answers the host unreachable, never a 5xx; bootstrap checks its pool and hosts and starts
 * one at a time per account. With the real embedded Better IAM: who writes, who asks for offers and
 * who bootstraps, and an agent acting for a person gets no more than the person.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:net';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { call, eventually, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const SECRET = 'provider-accounts-suite-deployment-secret-0123';
const ACME = 't-acme-alice';
const GLOBEX = 't-globex-bob';
/** A real private key: its bytes must be in no answer, event or audit entry. */
const PRIVATE_KEY = generateKeyPairSync('ed25519')
  .privateKey.export({ format: 'pem', type: 'pkcs8' })
  .toString();
const KEY_BODY = PRIVATE_KEY.split('\n')[1]!;
const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBr0S7JUZiD1ijqIdu2S5gMYFr2LSf4VfeZuYUyQmO7x';

/** A port on 127.0.0.1 where nothing listens: real ssh is refused there at once. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe.each(kinds)('provider accounts on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let keyRef = '';
  let globexKeyRef = '';
  let poolId = '';
  let globexPoolId = '';
  let port = 0;

  async function api(method: string, body: Record<string, unknown>, token = ACME) {
    const { body: answer } = await call(compute, method, body, { token });
    if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
    return answer.data as any;
  }
  async function fails(method: string, body: unknown, token = ACME, rawBody?: string) {
    const { status, body: answer } = await call(compute, method, body, {
      token,
      ...(rawBody ? { rawBody } : {}),
    });
    if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
    expect(status).toBeLessThan(500);
    return answer.error as { code: string; message: string; details?: Record<string, any>; hint?: string };
  }
  function config(change: (c: any) => void = () => {}): any {
    const c: any = {
      name: 'rack-12',
      description: 'Dedicated servers of rack 12',
      driver: 'ssh',
      settings: {
        joinUrl: 'http://127.0.0.1:9',
        hosts: [
          { address: `root@127.0.0.1:${port}`, hostKey: HOST_KEY },
          { address: 'ops@[::1]:2222', hostKey: HOST_KEY },
        ],
      },
      credentials: { privateKey: keyRef },
    };
    change(c);
    return c;
  }
  async function counts() {
    const { rows } = await sql<{ a: string; b: string }>`
      select (select count(*) from compute.provider_accounts) as a,
             (select count(*) from compute.provider_bootstraps) as b`.execute(database.db);
    return { accounts: Number(rows[0]!.a), bootstraps: Number(rows[0]!.b) };
  }

  beforeAll(async () => {
    database = await createTestDatabase(kind, 4);
    compute = await betterCompute(
      { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false, secret: SECRET },
      { log: () => {} },
    );
    await compute.migrate();
    port = await closedPort();
    const site = await api('sites.create', { name: 'rack-12' });
    poolId = (await api('pools.create', { siteId: site.id, name: 'rented', class: 'gpu', driver: 'sim' })).id;
    const globexSite = await api('sites.create', { name: 'gx' }, GLOBEX);
    globexPoolId = (
      await api('pools.create', { siteId: globexSite.id, name: 'gx', class: 'gpu', driver: 'sim' }, GLOBEX)
    ).id;
    keyRef = (await api('secrets.put', { name: 'rack-key', value: PRIVATE_KEY })).reference;
    globexKeyRef = (await api('secrets.put', { name: 'gx-key', value: PRIVATE_KEY }, GLOBEX)).reference;
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  let accountId = '';

  it('create stores version 1 with its event and audit entry; get and list show it', async () => {
    const created = await api('providerAccounts.create', {
      config: config(),
      idempotencyKey: 'create-rack-12',
    });
    accountId = created.id;
    expect(created).toEqual({
      id: expect.stringMatching(/^pacct_[0-9a-z]{26}$/),
      tenantId: 'acme',
      name: 'rack-12',
      driver: 'ssh',
      version: 1,
      config: config(),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(
      await api('providerAccounts.create', { config: config(), idempotencyKey: 'create-rack-12' }),
    ).toEqual(created);
    expect((await fails('providerAccounts.create', { config: config() })).code).toBe('ALREADY_EXISTS');
    expect(await api('providerAccounts.get', { accountId })).toEqual({ ...created, bootstraps: [] });
    expect(await api('providerAccounts.list', {})).toEqual({
      items: [
        {
          id: accountId,
          tenantId: 'acme',
          name: 'rack-12',
          driver: 'ssh',
          version: 1,
          hosts: 2,
          updatedAt: created.updatedAt,
        },
      ],
      nextCursor: null,
    });
    const events = await eventually(
      () => api('events.list', { type: 'providerAccount.' }),
      (page) => page.items.length > 0,
    );
    expect(events.items.map((e: any) => [e.type, e.subject.id, e.data])).toEqual([
      ['providerAccount.created', accountId, { name: 'rack-12', driver: 'ssh', version: 1, hosts: 2 }],
    ]);
    const audit = await database.db
      .selectFrom('compute.audit_events')
      .select(['method', 'outcome', 'action'])
      .where('method', '=', 'providerAccounts.create')
      .execute();
    expect(audit).toContainEqual({
      method: 'providerAccounts.create',
      outcome: 'allowed',
      action: 'compute:provider-accounts:write',
    });
  });

  it('a literal credential is refused with the field named, and nothing is stored', async () => {
    const before = await counts();
    for (const literal of [PRIVATE_KEY, 'hunter2', `secret://acme/${'x'.repeat(26)}`]) {
      const refused = await fails('providerAccounts.create', {
        config: config((c) => {
          c.name = 'literal';
          c.credentials.privateKey = literal;
        }),
      });
      expect(refused.code).toBe('INVALID_ARGUMENT');
      expect(refused.message).toContain('config.credentials.privateKey');
      expect(refused.message).toContain('secret reference');
      expect(JSON.stringify(refused)).not.toContain(KEY_BODY);
    }
    // A key pasted in as a field of its own is no field the document has.
    const extra = await fails('providerAccounts.create', {
      config: config((c) => {
        c.name = 'extra';
        c.settings.privateKey = PRIVATE_KEY;
      }),
    });
    expect(extra.code).toBe('INVALID_ARGUMENT');
    expect(JSON.stringify(extra)).not.toContain(KEY_BODY);
    expect(await counts()).toEqual(before);
  });

  it('bad input is refused with its path, never a 5xx, and changes nothing', async () => {
    const before = await counts();
    const bad: [string, (c: any) => void, string][] = [
      ['unknown driver', (c) => (c.driver = 'aws'), 'driver'],
      ['option as host', (c) => (c.settings.hosts[0].address = 'root@-oProxyCommand=sh:22'), 'address'],
      ['no port', (c) => (c.settings.hosts[0].address = 'root@10.0.0.5'), 'address'],
      ['port too big', (c) => (c.settings.hosts[0].address = 'root@10.0.0.5:70000'), 'port'],
      ['host key', (c) => (c.settings.hosts[0].hostKey = 'not a key'), 'hostKey'],
      ['twice', (c) => (c.settings.hosts[1] = c.settings.hosts[0]), 'twice'],
      ['no hosts', (c) => (c.settings.hosts = []), 'at least one host'],
      ['join url', (c) => (c.settings.joinUrl = "http://x'; rm -rf /"), 'joinUrl'],
      ['NUL', (c) => (c.name = 'a\u0000b'), 'name'],
      ['unknown field', (c) => (c.region = 'eu'), 'region'],
      ['another tenant’s secret', (c) => (c.credentials.privateKey = globexKeyRef), 'another tenant'],
      [
        'missing secret',
        (c) => (c.credentials.privateKey = `secret://acme/sec_${'0'.repeat(26)}`),
        'does not exist',
      ],
    ];
    for (const [what, change, words] of bad) {
      const refused = await fails('providerAccounts.create', {
        config: config((c) => ((c.name = 'bad'), change(c))),
      });
      expect([refused.code, what]).toEqual([expect.stringMatching(/INVALID_ARGUMENT|NOT_FOUND/), what]);
      expect(JSON.stringify(refused), what).toContain(words);
    }
    const huge = await fails('providerAccounts.create', {
      config: config((c) => (c.description = 'x'.repeat(70_000))),
    });
    expect(huge.code).toMatch(/PAYLOAD_TOO_LARGE|INVALID_ARGUMENT/);
    const malformed = await fails('providerAccounts.create', {}, ACME, '{"config": ');
    expect(malformed.code).toBe('INVALID_ARGUMENT');
    expect(await counts()).toEqual(before);
  });

  it('update replaces the document as a new version, only at the version asked for; the driver stays', async () => {
    const changed = config((c) => c.settings.hosts.pop());
    expect((await fails('providerAccounts.update', { accountId, config: changed, ifVersion: 2 })).code).toBe(
      'CONFLICT',
    );
    const updated = await api('providerAccounts.update', { accountId, config: changed, ifVersion: 1 });
    expect(updated).toMatchObject({ id: accountId, version: 2, config: changed });
    expect((await fails('providerAccounts.update', { accountId, config: changed, ifVersion: 1 })).code).toBe(
      'CONFLICT',
    );
    await api('providerAccounts.create', { config: config((c) => (c.name = 'spare')) });
    expect(
      (await fails('providerAccounts.update', { accountId, config: config((c) => (c.name = 'spare')) })).code,
    ).toBe('ALREADY_EXISTS');
    expect((await api('providerAccounts.get', { accountId })).version).toBe(2);
  });

  it('another tenant sees none of it and changes none of it', async () => {
    expect((await api('providerAccounts.list', {}, GLOBEX)).items).toEqual([]);
    for (const [method, body] of [
      ['providerAccounts.get', { accountId }],
      [
        'providerAccounts.update',
        { accountId, config: config((c) => (c.credentials.privateKey = globexKeyRef)) },
      ],
      ['providerAccounts.delete', { accountId }],
      ['providerAccounts.offers', { accountId }],
      ['providerAccounts.bootstrap', { accountId, poolId: globexPoolId }],
    ] as const) {
      const refused = await fails(method, body, GLOBEX);
      expect([method, refused.code]).toEqual([method, 'NOT_FOUND']);
    }
    // Naming acme explicitly as globex is refused before anything is read.
    expect((await fails('providerAccounts.get', { tenantId: 'acme', accountId }, GLOBEX)).code).toBe(
      'ACCESS_DENIED',
    );
    expect((await api('providerAccounts.get', { accountId })).version).toBe(2);
  });

  it('offers asks each host with real OpenSSH: a host where nothing listens is unreachable, with the reason', async () => {
    const answer = await api('providerAccounts.offers', { accountId });
    expect(answer).toEqual({
      accountId,
      driver: 'ssh',
      offers: [
        {
          host: `root@127.0.0.1:${port}`,
          reachable: false,
          error: expect.stringContaining(`could not reach root@127.0.0.1:${port}`),
          hostname: null,
          cores: null,
          memoryMiB: null,
          gpus: [],
          nodeId: null,
        },
      ],
    });
    const unknown = await fails('providerAccounts.offers', { accountId, hosts: ['root@10.9.9.9:22'] });
    expect(unknown.code).toBe('INVALID_ARGUMENT');
    expect(unknown.message).toContain('not a host of the account');
  });

  it('bootstrap checks its pool and hosts, runs as a job with events, and one at a time per account', async () => {
    const before = await counts();
    // Another tenant's pool is none this tenant can see.
    expect((await fails('providerAccounts.bootstrap', { accountId, poolId: globexPoolId })).code).toBe(
      'NOT_FOUND',
    );
    expect(
      (await fails('providerAccounts.bootstrap', { accountId, poolId, hosts: ['root@10.9.9.9:22'] })).code,
    ).toBe('INVALID_ARGUMENT');
    expect(await counts()).toEqual(before);
    const started = await api('providerAccounts.bootstrap', { accountId, poolId });
    expect(started).toMatchObject({
      id: expect.stringMatching(/^pboot_/),
      accountId,
      poolId,
      state: 'running',
      hosts: [{ host: `root@127.0.0.1:${port}`, state: 'pending', nodeId: null, error: null }],
    });
    const again = await fails('providerAccounts.bootstrap', { accountId, poolId });
    expect(again.code).toBe('INVALID_STATE');
    expect((await fails('providerAccounts.delete', { accountId })).code).toBe('INVALID_STATE');
    // The job runs on the deployment's worker: the host cannot be reached, so the bootstrap fails.
    await compute.runDueJobs(['provider-account.bootstrap']);
    const ended = await eventually(
      async () => (await api('providerAccounts.get', { accountId })).bootstraps[0],
      (bootstrap: any) => bootstrap.state !== 'running',
    );
    expect(ended).toMatchObject({
      id: started.id,
      state: 'failed',
      hosts: [{ state: 'failed', error: expect.stringContaining('could not reach') }],
      finishedAt: expect.any(String),
    });
    const events = await eventually(
      () => api('events.list', { type: 'providerAccount.' }),
      (page) => page.items.some((e: any) => e.type === 'providerAccount.bootstrap-finished'),
    );
    expect(events.items.map((e: any) => e.type)).toEqual(
      expect.arrayContaining([
        'providerAccount.bootstrap-started',
        'providerAccount.host-failed',
        'providerAccount.bootstrap-finished',
      ]),
    );
  });

  it('delete removes the account with its event; the key’s bytes are in no answer, event or audit entry', async () => {
    expect((await fails('providerAccounts.delete', { accountId, ifVersion: 1 })).code).toBe('CONFLICT');
    expect(await api('providerAccounts.delete', { accountId, ifVersion: 2 })).toEqual({
      id: accountId,
      name: 'rack-12',
      deleted: true,
    });
    expect((await fails('providerAccounts.get', { accountId })).code).toBe('NOT_FOUND');
    const events = await database.db.selectFrom('compute.events').selectAll().execute();
    const audit = await database.db.selectFrom('compute.audit_events').selectAll().execute();
    const jobs = await database.db.selectFrom('compute.jobs').selectAll().execute();
    for (const rows of [events, audit, jobs]) expect(JSON.stringify(rows)).not.toContain(KEY_BODY);
    expect(events.map((e: any) => e.type)).toContain('providerAccount.deleted');
  });
});

describe('who may use provider accounts, decided by the real embedded Better IAM', () => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const keys = {} as Record<'admin' | 'member' | 'operator' | 'agentForAdmin' | 'agentForMember', string>;
  let document: Record<string, unknown>;
  let poolId = '';

  async function as(token: string, method: string, body: Record<string, unknown>) {
    const { status, body: answer } = await call(compute, method, body, { token });
    expect(status).toBeLessThan(500);
    return answer;
  }

  beforeAll(async () => {
    database = await createTestDatabase(kinds.at(-1)!, 4);
    compute = await betterCompute(
      { database, trustedOrigins: [], rateLimit: false, secret: SECRET },
      { log: () => {} },
    );
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.admin = dev.acmeAdmin.apiKey;
    keys.member = dev.acmeMember.apiKey;
    const person = async (email: string, role: string) => {
      const principal = await iam.createPerson({ tenantId: 'acme', email });
      await iam.createBinding({ tenantId: 'acme', role, principalId: principal.id });
      return { id: principal.id, key: (await iam.createApiKey(principal.id, { name: email })).key };
    };
    keys.operator = (await person('ops@acme.test', 'operator')).key;
    // An agent bound as tenant administrator, acting for a member: it gets no more than the member.
    const member = await person('member2@acme.test', 'member');
    const forMember = await iam.createAgent({
      tenantId: 'acme',
      displayName: 'helper',
      actingFor: member.id,
    });
    await iam.createBinding({ tenantId: 'acme', role: 'tenant-admin', principalId: forMember.id });
    keys.agentForMember = (await iam.createApiKey(forMember.id, { name: 'agent' })).key;
    // An agent acting for an administrator with no binding of its own: nothing.
    const admin = await person('admin2@acme.test', 'tenant-admin');
    const forAdmin = await iam.createAgent({ tenantId: 'acme', displayName: 'helper2', actingFor: admin.id });
    keys.agentForAdmin = (await iam.createApiKey(forAdmin.id, { name: 'agent2' })).key;
    const data = async (method: string, body: Record<string, unknown>) => {
      const answer = await as(keys.admin, method, body);
      if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
      return answer.data as any;
    };
    const site = await data('sites.create', { name: 'iam-site' });
    poolId = (await data('pools.create', { siteId: site.id, name: 'iam-pool', class: 'gpu', driver: 'sim' }))
      .id;
    const secret = await data('secrets.put', { name: 'key', value: PRIVATE_KEY });
    document = {
      name: 'iam-account',
      driver: 'ssh',
      settings: {
        joinUrl: 'http://127.0.0.1:9',
        hosts: [{ address: 'root@127.0.0.1:9', hostKey: HOST_KEY }],
      },
      credentials: { privateKey: secret.reference },
    };
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('administrators write; members, operators and agents beyond their person do not; every role reads', async () => {
    for (const key of [keys.member, keys.operator, keys.agentForMember, keys.agentForAdmin])
      expect((await as(key, 'providerAccounts.create', { config: document })).error?.code).toBe(
        'ACCESS_DENIED',
      );
    const created = await as(keys.admin, 'providerAccounts.create', { config: document });
    expect(created.data).toMatchObject({ name: 'iam-account', version: 1 });
    const accountId = (created.data as { id: string }).id;
    for (const key of [keys.member, keys.operator])
      expect((await as(key, 'providerAccounts.get', { accountId })).data).toMatchObject({ id: accountId });
    for (const key of [keys.member, keys.operator, keys.agentForMember]) {
      expect((await as(key, 'providerAccounts.offers', { accountId })).error?.code).toBe('ACCESS_DENIED');
      expect((await as(key, 'providerAccounts.bootstrap', { accountId, poolId })).error?.code).toBe(
        'ACCESS_DENIED',
      );
      expect((await as(key, 'providerAccounts.delete', { accountId })).error?.code).toBe('ACCESS_DENIED');
    }
    expect((await as(keys.admin, 'providerAccounts.delete', { accountId })).data).toMatchObject({
      deleted: true,
    });
  });
});
