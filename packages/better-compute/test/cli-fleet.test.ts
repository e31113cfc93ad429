/**
 * The sites and projects commands in process, against a deployment with the real embedded Better
 * IAM on PGlite and bootstrapDev()'s API keys.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createCli, main } from '../src/cli/index.js';
import { captureIO } from './cli-support.js';

let database: TestDatabase;
let compute: ComputeInstance;
let adminKey: string;
/** The bodies the commands sent, with their method (`sites.create`). */
const sent: { method: string; body: Record<string, unknown> }[] = [];
const scratch = mkdtempSync(join(import.meta.dirname, '.tmp-cli-fleet-'));

const borrowed = (): ComputeInstance =>
  ({
    ...compute,
    handler: async (request: Request) => {
      const method = new URL(request.url).pathname.replace(/^\/api\/compute\//, '').replaceAll('/', '.');
      sent.push({ method, body: JSON.parse(await request.clone().text()) });
      return compute.handler(request);
    },
    close: async () => undefined,
  }) as ComputeInstance;
const cli = createCli({ projectCommands: false, loadCompute: async () => borrowed() });
const env = (): Record<string, string> => ({
  HOME: scratch,
  BETTER_IAM_HOME: join(scratch, 'iam'),
  BETTER_COMPUTE_TOKEN: adminKey,
  BETTER_COMPUTE_TENANT: 'acme',
});

async function run(argv: string[]): Promise<{ out: string[]; err: string[] }> {
  const { io, out, err } = captureIO(env(), { cwd: scratch });
  await cli.run(argv, io);
  return { out, err };
}
async function json<T = any>(argv: string[]): Promise<T> {
  return JSON.parse((await run([...argv, '--format', 'compact'])).out[0]!) as T;
}
async function status(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const { io, out, err } = captureIO(env(), { cwd: scratch });
  return { code: await main(argv, cli, io), out, err };
}

beforeAll(async () => {
  database = await createTestDatabase('pglite');
  compute = await betterCompute({ database, trustedOrigins: [], rateLimit: false }, { log: () => {} });
  await compute.migrate();
  adminKey = (await compute.embeddedIam!.bootstrapDev())!.acmeAdmin.apiKey;
});
afterAll(async () => {
  await compute?.close();
  await database?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('sites', () => {
  let siteId: string;

  it('create sends a new idempotency key on every run and logs it; --key retries without creating twice', async () => {
    sent.length = 0;
    const first = await run([
      'sites',
      'create',
      'fra-1',
      '--region',
      'eu-central',
      '--label',
      'tier=gold',
      '--format',
      'compact',
    ]);
    const site = JSON.parse(first.out[0]!);
    expect(site).toMatchObject({
      tenantId: 'acme',
      name: 'fra-1',
      region: 'eu-central',
      labels: { tier: 'gold' },
      description: '',
      version: 1,
    });
    expect(site.id).toMatch(/^site_/);
    siteId = site.id;
    const key = sent[0]!.body.idempotencyKey as string;
    expect(key).toMatch(/^cli-[0-9a-f-]{36}$/);
    expect(first.err).toEqual([`idempotency key: ${key}`]);

    const again = await json(['sites', 'create', 'fra-9']);
    expect(sent[1]!.body.idempotencyKey).not.toBe(key);
    expect(again.id).not.toBe(siteId);

    const keyed = await run([
      'sites',
      'create',
      'ams-1',
      '--key',
      'site-ams-1-attempt',
      '--format',
      'compact',
    ]);
    expect(keyed.err).toEqual(['idempotency key: site-ams-1-attempt']);
    const retried = await json(['sites', 'create', 'ams-1', '--key', 'site-ams-1-attempt']);
    expect(retried.id).toBe(JSON.parse(keyed.out[0]!).id);
    expect(sent.slice(2).map((call) => call.body.idempotencyKey)).toEqual([
      'site-ams-1-attempt',
      'site-ams-1-attempt',
    ]);
  });

  it('create with a name that is taken says ALREADY_EXISTS with a hint about names, not files', async () => {
    const taken = await status(['sites', 'create', 'fra-1', '--key', 'site-fra-1-again']);
    expect(taken.code).toBe(1);
    expect(taken.out).toEqual([]);
    expect(taken.err).toEqual([
      'idempotency key: site-fra-1-again',
      'ALREADY_EXISTS: a site named fra-1 exists',
      'hint: Choose another name, or list what exists; nothing was changed.',
      expect.stringMatching(/^request id: req_[0-9a-f]{32}$/),
    ]);
  });

  it('list prints a table by default', async () => {
    const { out } = await run(['sites', 'list']);
    const lines = out[0]!.split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+region\s+labels\s+version\s+createdAt$/);
    expect(lines).toHaveLength(4);
    expect(lines.find((line) => line.startsWith(siteId))).toMatch(
      new RegExp(`^${siteId}\\s+fra-1\\s+eu-central\\s+tier=gold\\s+1\\s+\\S+Z$`),
    );
    expect(lines.find((line) => line.includes('fra-9'))).toMatch(/\s+fra-9\s+-\s+1\s+\S+Z$/);
    expect((await json(['sites', 'list'])).items).toHaveLength(3);
  });

  it('get, and a wrong id kind is a usage error before any call', async () => {
    expect(await json(['sites', 'get', siteId])).toMatchObject({ id: siteId, name: 'fra-1' });
    sent.length = 0;
    const failed = await status(['sites', 'get', 'pool_01k5w00000000000000000000']);
    expect(failed.code).toBe(2);
    expect(failed.err[0]).toBe(
      'INVALID_ARGUMENT: site must be a site id like site_01… (got "pool_01k5w00000000000000000000")',
    );
    expect(sent).toEqual([]);
  });

  it('update applies --if-version; a stale one is CONFLICT; nothing to change is a usage error', async () => {
    const updated = await json(['sites', 'update', siteId, '--region', 'eu-west', '--if-version', '1']);
    expect(updated).toMatchObject({ id: siteId, region: 'eu-west', version: 2 });
    expect(sent.at(-1)!.body).toEqual({ tenantId: 'acme', siteId, region: 'eu-west', ifVersion: 1 });
    const stale = await status(['sites', 'update', siteId, '--name', 'fra-2', '--if-version', '1']);
    expect(stale.code).toBe(1);
    expect(stale.err[0]).toMatch(/^CONFLICT: /);
    expect((await json(['sites', 'get', siteId])).name).toBe('fra-1');
    sent.length = 0;
    const empty = await status(['sites', 'update', siteId]);
    expect(empty.code).toBe(2);
    expect(empty.err[0]).toBe(
      'INVALID_ARGUMENT: sites update needs something to change: --name, --region, --description or --label',
    );
    expect(sent).toEqual([]);
  });

  it('delete, with --if-version', async () => {
    const stale = await status(['sites', 'delete', siteId, '--if-version', '1']);
    expect(stale.code).toBe(1);
    expect(stale.err[0]).toMatch(/^CONFLICT: /);
    expect(await json(['sites', 'delete', siteId, '--if-version', '2'])).toEqual({
      id: siteId,
      deleted: true,
    });
    const gone = await status(['sites', 'get', siteId]);
    expect(gone.code).toBe(1);
    expect(gone.err[0]).toMatch(/^NOT_FOUND: /);
  });
});

describe('projects', () => {
  let projectId: string;

  it('create, list as a table, get', async () => {
    sent.length = 0;
    const created = await json(['projects', 'create', 'training', '--description', 'LLM training runs']);
    expect(created).toMatchObject({
      tenantId: 'acme',
      name: 'training',
      description: 'LLM training runs',
      state: 'active',
      version: 1,
      archivedAt: null,
    });
    projectId = created.id;
    expect(sent[0]!.body.idempotencyKey).toMatch(/^cli-/);
    const { out } = await run(['projects', 'list']);
    const lines = out[0]!.split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+state\s+description\s+version\s+createdAt$/);
    expect(lines[1]).toMatch(
      new RegExp(`^${projectId}\\s+training\\s+active\\s+LLM training runs\\s+1\\s+\\S+Z$`),
    );
    expect(lines).toHaveLength(2);
    expect(await json(['projects', 'get', projectId])).toEqual(created);
  });

  it('archive with a stale --if-version is CONFLICT, then archives; list --state filters', async () => {
    const stale = await status(['projects', 'archive', projectId, '--if-version', '7']);
    expect(stale.code).toBe(1);
    expect(stale.err[0]).toMatch(/^CONFLICT: /);
    const archived = await json(['projects', 'archive', projectId, '--if-version', '1']);
    expect(archived).toMatchObject({ id: projectId, state: 'archived', version: 2 });
    expect(archived.archivedAt).toEqual(expect.any(String));
    expect((await run(['projects', 'list', '--state', 'active'])).out).toEqual(['(no rows)']);
    expect((await run(['projects', 'list', '--state', 'archived', '--query', 'items[].id'])).out).toEqual([
      projectId,
    ]);
    const badState = await status(['projects', 'list', '--state', 'gone']);
    expect(badState.code).toBe(2);
    expect(badState.err[0]).toBe('INVALID_ARGUMENT: --state must be one of active, archived (got "gone")');
  });

  it('a wrong id kind is a usage error before any call', async () => {
    sent.length = 0;
    const failed = await status(['projects', 'archive', 'site_01k5w00000000000000000000']);
    expect(failed.code).toBe(2);
    expect(failed.err[0]).toMatch(/^INVALID_ARGUMENT: project must be a project id like proj_01…/);
    expect(sent).toEqual([]);
  });
});
