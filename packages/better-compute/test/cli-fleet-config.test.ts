/**
 * The guide's Fleet configuration loop through the real binary against a real server, on both
 * databases (issue 35 item 3): a fleet built with the CLI is exported (never over a file), edited
 * (a rename, a quota resized, a flavor added, a template removed with and without --prune),
 * planned in words, applied with the planHash, and exported again; apply without a hash only plans;
 * a change between plan and apply is CONFIG_DRIFT, a blocked change PLAN_BLOCKED, a drifted fleet
 * FLEET_DRIFTED; an unknown field, a caller without compute:fleet:admin and another tenant are refused.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FleetConfig } from '@better-compute/core/methods';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import type { ComputeTables } from '../src/db/tables.js';
import { checkFleetDrift } from '../src/modules/fleet-config/drift.js';
import {
  callServer,
  failureCode,
  runBinary,
  scratchDirectory,
  serveLive,
  type LiveServer,
} from './cli-support.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 180_000 });

const kinds = await testDatabaseKinds();
const root = join(import.meta.dirname, '..', '..', '..');

describe.each(kinds)('fleet configuration through the binary on %s', (kind) => {
  const scratch = scratchDirectory(`.bc-fleet-${kind}-`);
  let database: TestDatabase;
  let compute: ComputeInstance;
  let url = '';
  let server: LiveServer;
  const keys = { root: '', operator: '', acme: '' };
  const ids = { fra: '', ams: '', gpu: '', vps: '', small: '', image: '', template: '' };

  /** The real binary as `token` (the root administrator unless given), in scratch. */
  const run = (args: string[], token = keys.root) =>
    runBinary(args, scratch, { BETTER_COMPUTE_URL: url, BETTER_COMPUTE_TOKEN: token });
  async function json<T = any>(args: string[]): Promise<T> {
    const result = await run([...args, '--format', 'compact']);
    expect(result.status, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as T;
  }
  const file = (name: string) => join(scratch, name);
  const read = (name: string) => JSON.parse(readFileSync(file(name), 'utf8')) as FleetConfig;
  const write = (name: string, document: unknown) =>
    writeFileSync(file(name), JSON.stringify(document, null, 2));
  const planHashOf = (stdout: string) => /^planHash: ([0-9a-f]{64})$/m.exec(stdout)?.[1] ?? '';
  const api = <T = any>(method: string, body: Record<string, unknown>) =>
    callServer<T>(url, method, body, keys.root);

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, trustedOrigins: [], rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.root = dev.rootAdmin.apiKey;
    keys.acme = dev.acmeAdmin.apiKey;
    const operator = await iam.createPerson({ tenantId: 'root', email: 'ops@root.test' });
    await iam.createBinding({ tenantId: 'root', role: 'operator', principalId: operator.id });
    keys.operator = (await iam.createApiKey(operator.id, { name: 'ops' })).key;
    server = await serveLive(compute);
    url = server.url;
  });

  afterAll(async () => {
    await server.close();
    await compute?.close();
    await database?.close();
  });

  it('exports a fleet built with the CLI, never over a file; the export plans nothing', async () => {
    ids.fra = (await json(['sites', 'create', 'fra-1', '--region', 'eu-central', '--label', 'tier=gold'])).id;
    ids.ams = (await json(['sites', 'create', 'ams-1', '--region', 'eu-west'])).id;
    ids.gpu = (await json(['pools', 'create', '--site', ids.fra, '--name', 'gpu-a', '--class', 'gpu'])).id;
    await json(['pools', 'offer', ids.gpu, '--to', 'acme']);
    await json(['quotas', 'set', '--pool', ids.gpu, '--subject', 'acme', '--limit', '8']);
    ids.vps = (
      await json([
        'pools',
        'create',
        '--site',
        ids.ams,
        '--name',
        'vps-a',
        '--class',
        'vps',
        '--driver',
        'sim',
      ])
    ).id;
    // One simulated machine joins (the machine's side is the API's public join), so templates can run there.
    const token = (
      await run(['join-tokens', 'create', '--pool', ids.vps, '--pre-approved', '--query', 'token'])
    ).stdout.trim();
    const joined = await fetch(`${url}/api/compute/nodes/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        joinToken: token,
        hostname: 'vps-0',
        inventory: { cpuCores: 8, memoryGiB: 32, gpus: [] },
      }),
    }).then((r) => r.json() as Promise<{ data: { nodeCredential: string } }>);
    expect(joined.data?.nodeCredential).toBeTruthy();
    ids.small = (
      await json([
        'flavors',
        'create',
        '--pool',
        ids.vps,
        '--name',
        'small',
        '--vcpus',
        '1',
        '--memory',
        '512',
        '--disk',
        '2',
      ])
    ).id;
    ids.image = (
      await json([
        'images',
        'register',
        '--name',
        'tiny',
        '--source',
        '/var/lib/images/tiny.raw',
        '--disk-format',
        'raw',
        '--sha256',
        'a'.repeat(64),
        '--size',
        '4096',
        '--os',
        'debian-12',
        '--channel',
        'stable',
      ])
    ).id;
    ids.template = (
      await json([
        'sandbox-template',
        'create',
        '--name',
        'sbx-a',
        '--pool',
        ids.vps,
        '--flavor',
        'small',
        '--image',
        ids.image,
      ])
    ).id;

    const exported = await run(['fleet', 'export', '--out', 'fleet.json']);
    expect(exported.status, exported.stderr).toBe(0);
    expect(JSON.parse(exported.stdout)).toMatchObject({
      sites: 2,
      pools: 2,
      flavors: 1,
      sandboxTemplates: 1,
    });
    const document = read('fleet.json');
    expect(document.pools[ids.gpu]).toMatchObject({
      name: 'gpu-a',
      offers: ['acme'],
      quotas: { acme: { gpus: 8 } },
    });
    expect(document.sandboxTemplates[ids.template]).toMatchObject({ flavor: ids.small, image: ids.image });
    const again = await run(['fleet', 'export', '--out', 'fleet.json']);
    expect([again.status, failureCode(again)]).toEqual([1, 'ALREADY_EXISTS']);
    expect(read('fleet.json')).toEqual(document);

    const planned = await run(['fleet', 'plan', 'fleet.json', '--fail-on-drift']);
    expect(planned.status, planned.stderr).toBe(0);
    expect(planned.stdout).toMatch(
      /^No changes: the live fleet is what the document says\.\nplanHash: [0-9a-f]{64}\n$/,
    );
  });

  it('plans an edited document in words, applies it only with its planHash, and exports what it says', async () => {
    const edited = read('fleet.json');
    edited.sites[ids.fra]!.name = 'fra-one';
    edited.pools[ids.gpu]!.quotas.acme!.gpus = 16;
    edited.flavors['medium'] = {
      pool: ids.vps,
      name: 'medium',
      vcpus: 2,
      memoryMiB: 2048,
      diskGiB: 10,
      gpus: 0,
      gpuModel: null,
      description: '',
      image: null,
    };
    delete edited.sandboxTemplates[ids.template];
    write('edited.json', edited);

    const kept = await run(['fleet', 'plan', 'edited.json']);
    expect(kept.status, kept.stderr).toBe(0);
    expect(kept.stdout).toBe(
      [
        `~ site fra-one (${ids.fra})`,
        '    name: "fra-1" → "fra-one"',
        `~ pool gpu-a (${ids.gpu})`,
        '    quotas.acme.gpus: 8 → 16',
        '+ flavor medium (new, key medium)',
        'Plan: 1 to create, 2 to update, 0 to delete (without --prune: objects the document leaves out stay).',
        `planHash: ${planHashOf(kept.stdout)}`,
        '',
      ].join('\n'),
    );
    const drifted = await run(['fleet', 'plan', 'edited.json', '--fail-on-drift']);
    expect([drifted.status, failureCode(drifted)]).toEqual([1, 'FLEET_DRIFTED']);

    const pruned = await run(['fleet', 'plan', 'edited.json', '--prune', '--calls']);
    expect(pruned.status, pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain(`- sandboxTemplate sbx-a (${ids.template})`);
    expect(pruned.stdout).toContain('Plan: 1 to create, 2 to update, 1 to delete.');
    expect(pruned.stdout).toContain('Calls apply would make (4):');
    expect(pruned.stdout).toContain(
      `  1. sandboxTemplates.delete {"tenantId":"root","templateId":"${ids.template}","ifVersion":1}`,
    );
    expect(pruned.stdout).toMatch(
      / {2}4\. flavors\.create \{"tenantId":"root","poolId":"pool_[0-9a-z]+","name":"medium"/,
    );
    const hash = planHashOf(pruned.stdout);

    // Without --plan-hash (or --yes) it only plans, and says how to apply.
    const onlyPlans = await run(['fleet', 'apply', 'edited.json', '--prune']);
    expect(onlyPlans.status).toBe(1);
    expect(onlyPlans.stdout).toContain(`planHash: ${hash}`);
    expect(onlyPlans.stderr).toContain(
      `Not applied. Review the plan, then run better-compute fleet apply edited.json --prune --plan-hash ${hash}`,
    );
    expect((await api('sites.get', { siteId: ids.fra })).name).toBe('fra-1');

    const applied = await run(['fleet', 'apply', 'edited.json', '--prune', '--plan-hash', hash]);
    expect(applied.status, applied.stderr).toBe(0);
    expect(applied.stdout).toMatch(
      new RegExp(
        `^Applied fapl_[0-9a-z]+: 1 created, 2 updated, 1 deleted \\(4 call\\(s\\)\\); planHash ${hash}\\n$`,
      ),
    );

    expect((await run(['fleet', 'export', '--out', 'after.json'])).status).toBe(0);
    const after = read('after.json');
    const [mediumId] = Object.entries(after.flavors).find(([, f]) => f.name === 'medium')!;
    const expected = structuredClone(edited);
    delete expected.flavors['medium'];
    expected.flavors[mediumId] = edited.flavors['medium']!;
    expect(after).toEqual(expected);
    expect((await run(['fleet', 'plan', 'edited.json', '--prune', '--fail-on-drift'])).status).toBe(0);
    const status = await run(['fleet', 'status', '--fail-on-drift']);
    expect(status.status, status.stderr).toBe(0);
    expect(status.stdout).toMatch(
      /^Last apply: fapl_[0-9a-z]+ at \S+ by usr_[0-9a-z]+ \(planHash [0-9a-f]{64}\)\nDrift: converged \(checked \S+\)\n$/,
    );
  });

  it('a change between plan and apply is CONFIG_DRIFT, and nothing of the plan is applied', async () => {
    const document = read('after.json');
    document.sites[ids.ams]!.description = 'from the document';
    write('drift.json', document);
    const hash = planHashOf((await run(['fleet', 'plan', 'drift.json'])).stdout);
    await json(['sites', 'update', ids.fra, '--description', 'changed by someone else']);
    const refused = await run(['fleet', 'apply', 'drift.json', '--plan-hash', hash]);
    expect([refused.status, failureCode(refused)]).toEqual([1, 'CONFIG_DRIFT']);
    expect(refused.stderr).toContain('Nothing was applied');
    expect((await api('sites.get', { siteId: ids.ams })).description).toBe('');
    await json(['sites', 'update', ids.fra, '--description', '']);
  });

  it('a blocked change exits PLAN_BLOCKED, in the plan and at apply', async () => {
    const document = read('after.json');
    document.sites[ids.ams]!.region = 'us-east';
    write('blocked.json', document);
    const planned = await run(['fleet', 'plan', 'blocked.json']);
    expect([planned.status, failureCode(planned)]).toEqual([1, 'PLAN_BLOCKED']);
    expect(planned.stdout).toContain(
      `BLOCKED ~ site ams-1 (${ids.ams}): a site’s region never changes in place (eu-west → us-east): make a new site`,
    );
    const applied = await run(['fleet', 'apply', 'blocked.json', '--yes']);
    expect([applied.status, failureCode(applied)]).toEqual([1, 'PLAN_BLOCKED']);
    const forced = await run(['fleet', 'apply', 'blocked.json', '--plan-hash', planHashOf(planned.stdout)]);
    expect([forced.status, failureCode(forced)]).toEqual([1, 'PLAN_BLOCKED']);
    expect((await api('sites.get', { siteId: ids.ams })).region).toBe('eu-west');
  });

  it('an unknown field is refused with its path; a caller without compute:fleet:admin and another tenant get nothing', async () => {
    const document = read('after.json') as any;
    document.pools[ids.gpu].colour = 'blue';
    write('unknown.json', document);
    const unknown = await run(['fleet', 'plan', 'unknown.json']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain(
      `INVALID_ARGUMENT: document.pools.${ids.gpu}: Unrecognized key: "colour"`,
    );

    const edited = read('after.json');
    edited.pools[ids.gpu]!.description = 'the operator’s wish';
    write('operator.json', edited);
    const hash = planHashOf((await run(['fleet', 'plan', 'operator.json'])).stdout);
    const operator = await run(['fleet', 'apply', 'operator.json', '--plan-hash', hash], keys.operator);
    expect([operator.status, failureCode(operator)]).toEqual([1, 'ACCESS_DENIED']);
    expect((await api('pools.get', { poolId: ids.gpu })).description).toBe('');
    for (const args of [
      ['fleet', 'export'],
      ['fleet', 'plan', 'after.json'],
      ['fleet', 'apply', 'after.json', '--plan-hash', hash],
      ['fleet', 'status'],
    ]) {
      const acme = await run([...args, '--tenant', 'acme'], keys.acme);
      expect([acme.status, failureCode(acme)], args.join(' ')).toEqual([1, 'ACCESS_DENIED']);
    }
  });

  it('a document over the API’s 64 KiB crosses the real server to fleet.plan', async () => {
    const document = read('after.json');
    for (let i = 0; i < 300; i++)
      document.sites[`bulk-${i}`] = {
        name: `bulk-${i}`,
        region: 'eu',
        description: 'd'.repeat(200),
        labels: {},
      };
    write('big.json', document);
    expect(readFileSync(file('big.json')).length).toBeGreaterThan(64 * 1024);
    const planned = await run(['fleet', 'plan', 'big.json']);
    expect(planned.status, planned.stderr).toBe(0);
    expect(planned.stdout).toContain('Plan: 300 to create, 0 to update, 0 to delete');
  });

  it('fleet status --fail-on-drift exits FLEET_DRIFTED while the drift job sees the fleet moved since the apply', async () => {
    await json(['quotas', 'set', '--pool', ids.gpu, '--subject', 'acme', '--limit', '3']);
    await checkFleetDrift(compute.database.db as Kysely<ComputeTables>, new Date());
    const status = await run(['fleet', 'status', '--fail-on-drift']);
    expect([status.status, failureCode(status)]).toEqual([1, 'FLEET_DRIFTED']);
    expect(status.stdout).toContain(`~ pool gpu-a (${ids.gpu})\n    quotas.acme.gpus: 16 → 3\n`);
    await json(['quotas', 'set', '--pool', ids.gpu, '--subject', 'acme', '--limit', '16']);
    await checkFleetDrift(compute.database.db as Kysely<ComputeTables>, new Date());
    expect((await run(['fleet', 'status', '--fail-on-drift'])).status).toBe(0);
  });
});

describe('fleet schema', () => {
  const scratch = scratchDirectory('.bc-fleet-schema-');
  it('prints the FleetConfig JSON Schema that docs/fleet-config.schema.json publishes', async () => {
    const printed = await runBinary(['fleet', 'schema'], scratch, {});
    expect(printed.status, printed.stderr).toBe(0);
    const schema = JSON.parse(printed.stdout);
    expect(schema).toMatchObject({ title: 'FleetConfig', type: 'object', additionalProperties: false });
    expect(schema.required).toEqual(['kind', 'version', 'tenantId']);
    expect(JSON.parse(readFileSync(join(root, 'docs', 'fleet-config.schema.json'), 'utf8'))).toEqual(schema);
  });
});
