/**
 * Fleet configuration through the API (issue 35 item 3), with the real embedded Better IAM on both
 * databases: a fleet built with the methods, exported, edited, planned and applied; a document
 * applied once plans nothing the second time; a change between plan and apply is CONFIG_DRIFT; a
 * denial or a module's refusal of one call applies none; blocked changes, unknown fields, other
 * tenants and agents are refused; the drift job sees what moved since the apply.
 */
import { fleetConfigJsonSchema, type FleetConfig, type FleetPlan } from '@better-compute/core/methods';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventTypes, isEventType } from '@better-compute/events';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import type { ComputeTables } from '../src/db/tables.js';
import { checkFleetDrift } from '../src/modules/fleet-config/drift.js';
import { agentWithKey } from './iam-support.js';
import { call } from './support.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('fleet configuration on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const keys = { root: '', acmeAdmin: '', operator: '', sitesOnly: '', agent: '' };
  const ids = {
    fra: '',
    ams: '',
    gpuPool: '',
    vpsPool: '',
    small: '',
    gpuFlavor: '',
    image: '',
    template: '',
  };
  const db = () => compute.database.db as Kysely<ComputeTables>;

  async function api<T = any>(method: string, body: Record<string, unknown>, token = keys.root): Promise<T> {
    const { body: answer } = await call(compute, method, body, { token });
    if (answer.error)
      throw Object.assign(new Error(`${method}: ${answer.error.code} ${answer.error.message}`), answer.error);
    return answer.data as T;
  }
  async function fails(method: string, body: Record<string, unknown>, token = keys.root) {
    const { status, body: answer } = await call(compute, method, body, { token });
    expect(answer.error, `${method} succeeded`).toBeDefined();
    expect(status).toBeLessThan(500);
    return answer.error! as { code: string; message: string; details?: any; hint?: string };
  }
  const exported = () => api<FleetConfig>('fleet.export', {});
  const plan = (document: unknown, prune = false, token = keys.root) =>
    api<FleetPlan>('fleet.plan', { document, prune }, token);
  const apply = (document: unknown, planHash: string, prune = false, token = keys.root) =>
    api('fleet.apply', { document, prune, planHash }, token);
  const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value));

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute(
      { database, trustedOrigins: [], rateLimit: false, secret: 'fleet-config-suite-deployment-secret-0123' },
      { log: () => {} },
    );
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.root = dev.rootAdmin.apiKey;
    keys.acmeAdmin = dev.acmeAdmin.apiKey;
    await iam.createTenant({ id: 'globex', name: 'Globex' });
    const operator = await iam.createPerson({ tenantId: 'root', email: 'ops@root.test' });
    await iam.createBinding({ tenantId: 'root', role: 'operator', principalId: operator.id });
    keys.operator = (await iam.createApiKey(operator.id, { name: 'ops' })).key;
    // Fleet admin, but of the objects only sites: a plan touching a pool is denied as a whole.
    await iam.createRole({
      tenantId: 'root',
      name: 'fleet-sites',
      actions: ['compute:fleet:admin', 'compute:sites:*', 'compute:*:read'],
    });
    const sitesOnly = await iam.createPerson({ tenantId: 'root', email: 'sites@root.test' });
    await iam.createBinding({ tenantId: 'root', role: 'fleet-sites', principalId: sitesOnly.id });
    keys.sitesOnly = (await iam.createApiKey(sitesOnly.id, { name: 'sites' })).key;
    keys.agent = (
      await agentWithKey(iam, {
        tenantId: 'root',
        displayName: 'fleet-helper',
        actingFor: dev.rootAdmin.principalId,
        role: 'platform-admin',
      })
    ).key;

    ids.fra = (
      await api('sites.create', { name: 'fra-1', region: 'eu-central', labels: { tier: 'gold' } })
    ).id;
    ids.ams = (await api('sites.create', { name: 'ams-1', region: 'eu-west' })).id;
    ids.gpuPool = (await api('pools.create', { siteId: ids.fra, name: 'gpu-a', class: 'gpu' })).id;
    for (const tenant of ['acme', 'globex'])
      await api('pools.offer', { poolId: ids.gpuPool, offerTenantId: tenant });
    await api('quotas.set', { poolId: ids.gpuPool, subjectTenantId: 'acme', limit: 8 });
    await api('quotas.set', {
      poolId: ids.gpuPool,
      subjectTenantId: 'acme',
      resource: 'reservations',
      limit: 4,
    });
    ids.vpsPool = (
      await api('pools.create', { siteId: ids.ams, name: 'vps-a', class: 'vps', driver: 'sim' })
    ).id;
    const { token } = await api('joinTokens.create', { poolId: ids.vpsPool, preApproved: true });
    const joined = await api(
      'nodes.join',
      { joinToken: token, hostname: 'vps-0', inventory: { cpuCores: 16, memoryGiB: 64, gpus: [] } },
      '',
    );
    await api('nodes.heartbeat', { nodeCredential: joined.nodeCredential }, '');
    ids.small = (
      await api('flavors.create', {
        poolId: ids.vpsPool,
        name: 'small',
        vcpus: 1,
        memoryMiB: 512,
        diskGiB: 2,
      })
    ).id;
    ids.gpuFlavor = (
      await api('flavors.create', {
        poolId: ids.vpsPool,
        name: 'g1',
        vcpus: 4,
        memoryMiB: 4096,
        diskGiB: 20,
        gpus: 1,
        gpuModel: 'H100',
      })
    ).id;
    ids.image = (
      await api('images.register', {
        name: 'tiny',
        source: '/var/lib/images/tiny.raw',
        diskFormat: 'raw',
        sha256: 'a'.repeat(64),
        sizeBytes: 4096,
        os: 'debian-12',
        channel: 'stable',
      })
    ).id;
    ids.template = (
      await api('sandboxTemplates.create', {
        name: 'sbx-a',
        poolId: ids.vpsPool,
        flavorId: ids.small,
        imageId: ids.image,
      })
    ).id;
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('exports every object keyed by id, and the export plans nothing', async () => {
    const document = await exported();
    expect(Object.keys(document.sites).sort()).toEqual([ids.fra, ids.ams].sort());
    expect(document.sites[ids.fra]).toEqual({
      name: 'fra-1',
      region: 'eu-central',
      description: '',
      labels: { tier: 'gold' },
    });
    expect(document.pools[ids.gpuPool]).toMatchObject({
      site: ids.fra,
      class: 'gpu',
      driver: 'bcd',
      offers: ['acme', 'globex'],
      quotas: { acme: { gpus: 8, reservations: 4 } },
    });
    expect(document.flavors[ids.small]).toMatchObject({
      pool: ids.vpsPool,
      name: 'small',
      vcpus: 1,
      gpuModel: null,
    });
    expect(document.sandboxTemplates[ids.template]).toMatchObject({
      pool: ids.vpsPool,
      flavor: ids.small,
      image: ids.image,
      warmMin: 0,
      warmMax: 0,
    });
    expect(document.providerAccounts).toEqual({});
    const planned = await plan(document, true);
    expect(planned).toMatchObject({ empty: true, changes: [], calls: [] });
    expect((await plan(document, true)).planHash).toBe(planned.planHash);
  });

  it('an edited document plans + ~ and, only with --prune, -; the apply makes it so in one go', async () => {
    const before = await exported();
    const edited = copy(before);
    edited.sites[ids.fra]!.name = 'fra-one';
    edited.pools[ids.gpuPool]!.quotas.acme!.gpus = 16;
    edited.pools[ids.gpuPool]!.offers = ['acme'];
    edited.flavors['medium'] = {
      pool: ids.vpsPool,
      name: 'medium',
      vcpus: 2,
      memoryMiB: 2048,
      diskGiB: 10,
      gpus: 0,
      gpuModel: null,
      description: 'two cores',
      image: null,
    };
    delete edited.sandboxTemplates[ids.template];

    const kept = await plan(edited);
    expect(kept.changes.map((c) => `${c.op} ${c.kind} ${c.name}`)).toEqual([
      '~ site fra-one',
      '~ pool gpu-a',
      '+ flavor medium',
    ]);
    expect(kept.changes[1]!.fields).toEqual([
      { field: 'offers', from: ['acme', 'globex'], to: ['acme'] },
      { field: 'quotas.acme.gpus', from: 8, to: 16 },
    ]);
    const pruned = await plan(edited, true);
    expect(pruned.changes.map((c) => `${c.op} ${c.kind}`)).toEqual([
      '~ site',
      '~ pool',
      '+ flavor',
      '- sandboxTemplate',
    ]);
    expect(pruned.calls.map((c) => c.method)).toEqual([
      'sandboxTemplates.delete',
      'sites.update',
      'pools.unoffer',
      'quotas.set',
      'flavors.create',
    ]);
    expect(pruned.calls[1]!.input).toMatchObject({ siteId: ids.fra, ifVersion: 1, name: 'fra-one' });
    expect(pruned.planHash).not.toBe(kept.planHash);

    // Without --prune the template stays.
    const applied = await apply(edited, kept.planHash);
    expect(applied).toMatchObject({ counts: { create: 1, update: 2, delete: 0, blocked: 0 }, calls: 4 });
    const after = await exported();
    expect(after.sandboxTemplates[ids.template]).toBeDefined();
    const medium = Object.entries(after.flavors).find(([, f]) => f.name === 'medium')!;
    expect(medium[0]).toMatch(/^flv_/);
    const expected = copy(edited);
    delete expected.flavors['medium'];
    expected.flavors[medium[0]] = edited.flavors['medium']!;
    expected.sandboxTemplates[ids.template] = before.sandboxTemplates[ids.template]!;
    expect(after).toEqual(expected);
    // The document applied, its own key and all, plans nothing the second time.
    expect((await plan(edited)).empty).toBe(true);

    // With --prune the template goes.
    const second = await plan(edited, true);
    expect(second.changes.map((c) => `${c.op} ${c.kind} ${c.id}`)).toEqual([
      `- sandboxTemplate ${ids.template}`,
    ]);
    await apply(edited, second.planHash, true);
    expect((await exported()).sandboxTemplates).toEqual({});
    // Every call wrote its own audit entry, beside the apply's.
    const audited = await db()
      .selectFrom('compute.audit_events')
      .select(['method', 'outcome'])
      .where('method', 'in', ['fleet.apply', 'sandboxTemplates.delete', 'flavors.create'])
      .execute();
    expect(audited.filter((a) => a.method === 'fleet.apply')).toHaveLength(2);
    expect(audited.filter((a) => a.method === 'sandboxTemplates.delete')).toEqual([
      { method: 'sandboxTemplates.delete', outcome: 'allowed' },
    ]);
  });

  it('new objects refer to one another by their keys, and the apply gives them ids', async () => {
    const document = await exported();
    document.sites['lis-1'] = { name: 'lis-1', region: 'eu-south', description: '', labels: {} };
    document.pools['vps-lis'] = {
      site: 'lis-1',
      name: 'vps-lis',
      class: 'vps',
      driver: 'sim',
      description: '',
      labels: {},
      offers: ['acme'],
      quotas: { acme: { gpus: 0 } },
    };
    document.flavors['lis-small'] = {
      pool: 'vps-lis',
      name: 'small',
      vcpus: 1,
      memoryMiB: 512,
      diskGiB: 2,
      gpus: 0,
      gpuModel: null,
      description: '',
      image: { os: 'debian-12', channel: 'stable' },
    };
    const planned = await plan(document);
    expect(planned.calls.map((c) => [c.method, c.refs, c.creates])).toEqual([
      ['sites.create', {}, 'sites/lis-1'],
      ['pools.create', { siteId: 'sites/lis-1' }, 'pools/vps-lis'],
      ['pools.offer', { poolId: 'pools/vps-lis' }, null],
      ['quotas.set', { poolId: 'pools/vps-lis' }, null],
      ['flavors.create', { poolId: 'pools/vps-lis' }, 'flavors/lis-small'],
    ]);
    await apply(document, planned.planHash);
    const after = await exported();
    const [siteId] = Object.entries(after.sites).find(([, site]) => site.name === 'lis-1')!;
    const [poolId, pool] = Object.entries(after.pools).find(([, p]) => p.name === 'vps-lis')!;
    expect(pool).toMatchObject({ site: siteId, offers: ['acme'], quotas: { acme: { gpus: 0 } } });
    expect(Object.values(after.flavors)).toContainEqual(
      expect.objectContaining({ pool: poolId, name: 'small' }),
    );
    expect((await plan(document)).empty).toBe(true);
  });

  it('a name another object holds is blocked: a swap takes two applies, and archived pools keep theirs', async () => {
    const document = await exported();
    document.sites[ids.fra]!.name = 'ams-1';
    document.sites[ids.ams]!.name = 'fra-one';
    const swap = await plan(document);
    expect(swap.counts.blocked).toBe(2);
    expect(swap.changes[0]!.blocked).toContain(`site ${ids.ams} is named ams-1 now`);
    const archived = await api('pools.create', { siteId: ids.ams, name: 'old-pool', class: 'gpu' });
    await api('pools.archive', { poolId: archived.id });
    const reuse = await exported();
    expect(reuse.pools[archived.id]).toBeUndefined();
    reuse.pools['again'] = { ...reuse.pools[ids.gpuPool]!, name: 'old-pool' };
    const blocked = await plan(reuse);
    expect(blocked.changes).toEqual([
      expect.objectContaining({
        op: '+',
        key: 'again',
        blocked: expect.stringContaining(`archived pool ${archived.id}`),
      }),
    ]);
    reuse.pools[archived.id] = reuse.pools['again']!;
    delete reuse.pools['again'];
    expect((await plan(reuse)).changes[0]!.blocked).toContain(
      'an archived pool is never changed or unarchived',
    );
  });

  it('a change between plan and apply is CONFIG_DRIFT, and nothing is applied', async () => {
    const document = await exported();
    document.sites[ids.ams]!.description = 'amsterdam';
    const planned = await plan(document);
    await api('sites.update', { siteId: ids.fra, labels: { tier: 'silver' } });
    const drift = await fails('fleet.apply', { document, planHash: planned.planHash });
    expect(drift.code).toBe('CONFIG_DRIFT');
    expect(drift.hint).toContain('Nothing was applied');
    expect((await api('sites.get', { siteId: ids.ams })).description).toBe('');
    await api('sites.update', { siteId: ids.fra, labels: { tier: 'gold' } });
  });

  it('a denied call, or one its module refuses, applies none of the plan', async () => {
    const document = await exported();
    document.sites[ids.ams]!.description = 'denied with the rest';
    document.pools[ids.gpuPool]!.description = 'a pool change';
    const planned = await plan(document);
    // No compute:fleet:admin: refused before the fleet is read.
    const operator = await fails('fleet.apply', { document, planHash: planned.planHash }, keys.operator);
    expect(operator).toMatchObject({ code: 'ACCESS_DENIED', details: { action: 'compute:fleet:admin' } });
    expect((await fails('fleet.plan', { document }, keys.operator)).code).toBe('ACCESS_DENIED');
    // Fleet admin, and sites, but not pools: the pool's call is denied, so the site's does not run.
    const sitesOnly = await fails('fleet.apply', { document, planHash: planned.planHash }, keys.sitesOnly);
    expect(sitesOnly).toMatchObject({ code: 'ACCESS_DENIED', details: { action: 'compute:pools:update' } });
    expect((await api('sites.get', { siteId: ids.ams })).description).toBe('');

    // The sandboxes module refuses a GPU flavor for a template: the site change before it is undone.
    const refused = await exported();
    refused.sites[ids.ams]!.description = 'undone';
    refused.sandboxTemplates['gpu-box'] = {
      pool: ids.vpsPool,
      name: 'gpu-box',
      runtime: 'bwrap',
      flavor: ids.gpuFlavor,
      image: ids.image,
      userData: null,
      defaultTtlSeconds: 3600,
      maxTtlSeconds: 7200,
      warmMin: 0,
      env: [],
      network: 'egress',
      volumes: [],
    };
    const risky = await plan(refused);
    expect(risky.counts).toMatchObject({ create: 1, update: 1, blocked: 0 });
    const module = await fails('fleet.apply', { document: refused, planHash: risky.planHash });
    expect(module.code).toBe('INVALID_ARGUMENT');
    expect(module.message).toMatch(
      /^call 2 of 2 \(sandboxTemplates\.create\) was refused, so nothing was applied: .*GPUs/,
    );
    expect((await api('sites.get', { siteId: ids.ams })).description).toBe('');
    expect((await exported()).sandboxTemplates).toEqual({});
  });

  it('a blocked change is in the plan and apply refuses it with PLAN_BLOCKED', async () => {
    const document = await exported();
    document.sites[ids.fra]!.region = 'us-east';
    document.pools[ids.gpuPool]!.class = 'vps';
    document.pools['orphan'] = {
      ...document.pools[ids.gpuPool]!,
      name: 'orphan',
      site: 'nowhere',
      class: 'gpu',
    };
    const planned = await plan(document);
    expect(planned.counts.blocked).toBe(3);
    const reasons = planned.changes.map((c) => c.blocked);
    expect(reasons[0]).toContain('a site’s region never changes in place');
    expect(reasons.join('\n')).toContain('a pool’s class never changes in place');
    expect(reasons.join('\n')).toContain('a dangling name');
    const refused = await fails('fleet.apply', { document, planHash: planned.planHash });
    expect(refused.code).toBe('PLAN_BLOCKED');
  });

  it('the published JSON Schema takes the export and refuses what the API refuses', async () => {
    const validate = new Ajv2020({ strict: false, allErrors: true }).compile(fleetConfigJsonSchema());
    const document = (await exported()) as any;
    expect(validate(document), JSON.stringify(validate.errors)).toBe(true);
    document.pools[ids.gpuPool].colour = 'blue';
    expect(validate(document)).toBe(false);
    expect(validate.errors).toContainEqual(
      expect.objectContaining({ instancePath: `/pools/${ids.gpuPool}`, keyword: 'additionalProperties' }),
    );
    delete document.pools[ids.gpuPool].colour;
    document.providerAccounts = { pacct_x: {} };
    expect(validate(document)).toBe(false);
  });

  it('an unknown field or another tenant’s document is refused clearly', async () => {
    const document = (await exported()) as any;
    document.pools[ids.gpuPool].colour = 'blue';
    const unknown = await fails('fleet.plan', { document });
    expect(unknown.code).toBe('INVALID_ARGUMENT');
    expect(unknown.message).toBe(`document.pools.${ids.gpuPool}: Unrecognized key: "colour"`);
    const other = { ...(await exported()), tenantId: 'acme' };
    expect((await fails('fleet.plan', { document: other })).code).toBe('INVALID_ARGUMENT');
  });

  it('provider accounts are keyed by id with credentials as references: + ~ and, with --prune, -', async () => {
    const privateKey =
      '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAfleetconfigsuite\n-----END OPENSSH PRIVATE KEY-----\n';
    const hostKey = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBr0S7JUZiD1ijqIdu2S5gMYFr2LSf4VfeZuYUyQmO7x';
    const { reference } = await api('secrets.put', { name: 'rack-key', value: privateKey });
    const account = await api('providerAccounts.create', {
      config: {
        name: 'rack-1',
        driver: 'ssh',
        settings: {
          joinUrl: 'https://compute.example.com',
          hosts: [{ address: 'root@10.0.0.5:22', hostKey }],
        },
        credentials: { privateKey: reference },
      },
    });
    const document = copy(await exported()) as any;
    expect(document.providerAccounts).toEqual({ [account.id]: account.config });
    expect((await plan(document)).empty).toBe(true);
    document.providerAccounts[account.id].name = 'rack-one';
    document.providerAccounts[account.id].settings.hosts.push({ address: 'root@10.0.0.6:22', hostKey });
    document.providerAccounts['rack-2'] = { ...copy(account.config), name: 'rack-2' };
    const planned = await plan(document);
    expect(
      planned.changes
        .filter((c) => c.kind === 'providerAccount')
        .map((c) => [c.op, c.name, c.fields.map((f) => f.field), c.blocked]),
    ).toEqual([
      ['~', 'rack-one', ['name', 'settings'], null],
      ['+', 'rack-2', [], null],
    ]);
    expect(
      planned.calls.filter((c) => c.method.startsWith('providerAccounts.')).map((c) => c.method),
    ).toEqual(['providerAccounts.update', 'providerAccounts.create']);
    await apply(document, planned.planHash);
    const after = copy(await exported()) as any;
    expect(
      Object.values(after.providerAccounts)
        .map((a: any) => a.name)
        .sort(),
    ).toEqual(['rack-2', 'rack-one']);
    expect((await plan(after)).empty).toBe(true);
    // A key pasted into the document is refused, and never echoed.
    const literal = copy(after);
    (Object.values(literal.providerAccounts)[0] as any).credentials.privateKey = privateKey;
    const refused = await fails('fleet.plan', { document: literal });
    expect(refused.code).toBe('INVALID_ARGUMENT');
    expect(refused.message).toContain('secret reference');
    expect(JSON.stringify(refused)).not.toContain('fleetconfigsuite');
    // Left out: nothing without --prune; deleted with it.
    const second = Object.entries(after.providerAccounts).find(([, a]: any) => a.name === 'rack-2')![0];
    delete after.providerAccounts[second];
    expect((await plan(after)).empty).toBe(true);
    const pruning = await plan(after, true);
    expect(pruning.changes.map((c) => [c.op, c.kind, c.id])).toEqual([['-', 'providerAccount', second]]);
    await apply(after, pruning.planHash, true);
    expect((await api('providerAccounts.list', {})).items.map((a: any) => a.name)).toEqual(['rack-one']);
    const events = await db().selectFrom('compute.events').select(['data']).execute();
    expect(JSON.stringify(events)).not.toContain('fleetconfigsuite');
  });

  it('no fleet method answers a tenant other than root, and an agent plans but never applies', async () => {
    const document = await exported();
    const bodies: Record<string, Record<string, unknown>> = {
      'fleet.export': {},
      'fleet.status': {},
      'fleet.plan': { document },
      'fleet.apply': { document, planHash: 'a'.repeat(64) },
    };
    for (const [method, body] of Object.entries(bodies)) {
      const acme = await fails(method, body, keys.acmeAdmin);
      expect(acme.code, method).toBe('ACCESS_DENIED');
      const actingForAcme = await fails(method, { tenantId: 'acme', ...body }, keys.root);
      expect(actingForAcme, method).toMatchObject({
        code: 'ACCESS_DENIED',
        details: { reason: 'platform-only' },
      });
    }
    const planned = await plan(document, false, keys.agent);
    expect(planned.empty).toBe(true);
    const agent = await fails('fleet.apply', { document, planHash: planned.planHash }, keys.agent);
    expect(agent).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'agent' } });
  });

  it('a document over 64 KiB is taken from a credential, and refused unread without one', async () => {
    const document = await exported();
    const big = { ...document, $schema: 'x'.repeat(1000) } as FleetConfig;
    for (let i = 0; i < 400; i++)
      big.sites[`bulk-${i}`] = { name: `bulk-${i}`, region: 'eu', description: 'y'.repeat(200), labels: {} };
    expect(JSON.stringify(big).length).toBeGreaterThan(64 * 1024);
    const planned = await plan(big);
    expect(planned.counts.create).toBe(400);
    const anonymous = await call(compute, 'fleet.plan', { document: big });
    expect(anonymous.body.error?.code).toBe('UNAUTHENTICATED');
  });

  it('the drift job sees a change since the apply, tells it once, and sees it undone', async () => {
    const document = await exported();
    const planned = await plan(document);
    await apply(document, planned.planHash);
    expect((await api('fleet.status', {})).drift).toMatchObject({ state: 'converged', changes: [] });
    await api('quotas.set', { poolId: ids.gpuPool, subjectTenantId: 'acme', limit: 2 });
    await checkFleetDrift(db(), new Date());
    await checkFleetDrift(db(), new Date());
    const status = await api('fleet.status', {});
    expect(status.drift.state).toBe('drifted');
    expect(status.drift.changes).toEqual([
      expect.objectContaining({
        op: '~',
        kind: 'pool',
        id: ids.gpuPool,
        fields: [{ field: 'quotas.acme.gpus', from: 16, to: 2 }],
      }),
    ]);
    await api('quotas.set', { poolId: ids.gpuPool, subjectTenantId: 'acme', limit: 16 });
    await checkFleetDrift(db(), new Date());
    expect((await api('fleet.status', {})).drift.state).toBe('converged');
    const events = await db()
      .selectFrom('compute.events')
      .select(['type', 'subject_type', 'subject_id', 'data'])
      .where('type', 'like', 'fleet.%')
      .orderBy('tx_id')
      .orderBy('tx_index')
      .execute();
    expect(events.map((e) => e.type).slice(-3)).toEqual([
      'fleet.applied',
      'fleet.drifted',
      'fleet.converged',
    ]);
    // Each as the catalog declares it: its subject the apply, its payload whole.
    for (const event of events) {
      expect(isEventType(event.type)).toBe(true);
      const spec = eventTypes[event.type as keyof typeof eventTypes];
      expect([event.subject_type, event.subject_id]).toEqual(['fleet', expect.stringMatching(/^fapl_/)]);
      expect(spec.data.parse(event.data)).toEqual(event.data);
    }
    expect(events.at(-2)!.data).toEqual({ changes: 1 });
  });
});
