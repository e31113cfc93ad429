/**
 * Sandboxes in process on a fresh database, with the workers running and a simulated VPS pool
 * whose commands the sim runtime completes: what the end-to-end suite cannot steer from the
 * command line. A bundle without a sandbox SSH CA refuses cold starts with the hint to add one (and
 * the fixed bundle is read on the next call), a memory restore that still shares its source's
 * identity is refused `restore-shares-identity` by exec while its source works, a deployment with
 * no snapshot store refuses snapshots and restores, and exec with an API key is
 * `session-required`.
 */
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuthorizationCheck, AuthorizationDecision, Identity } from '@better-compute/core';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { SIM_DELAY_LABEL, SIM_FAIL_LABEL, SIM_KEEP_IDENTITY_LABEL } from '../src/modules/vps/sim-runtime.js';
import { FAILURES_PER_WINDOW } from '../src/modules/sandboxes/controller.js';
import { createPkiBundle } from '../src/pki/create.js';
import { addNode, type FleetDeployment, seedVpsPool } from './fleet-support.js';
import { call, TestBridge } from './support.js';

const SECRET = 'sandboxes-suite-secret-0123456789abcdef';
const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVzZXJrZXlmb3J0ZXN0aW5nb25seTAwMDAwMDAwMDAw alice@laptop';
const OPS = 't-root-ops';
const ACME_KEY = 't-acme-alice';
/** The same person signed in: `s-` tokens are sessions. */
const ACME_SESSION = 's-acme-alice';

/** The test bridge, with sessions beside its API keys, and a person who may not attach volumes. */
class SessionBridge extends TestBridge {
  override async authorize(
    identity: Identity,
    checks: AuthorizationCheck[],
  ): Promise<AuthorizationDecision[]> {
    const decisions = await super.authorize(identity, checks);
    return decisions.map((decision, i) =>
      identity.principalId.includes('noattach') && checks[i]!.action === 'compute:sandboxes:attach'
        ? { allowed: false, reason: 'no binding grants compute:sandboxes:attach' }
        : decision,
    );
  }

  override async authenticate(credential: string): Promise<Identity | null> {
    const session = /^s-(.+)$/.exec(credential);
    const identity = await super.authenticate(session ? `t-${session[1]}` : credential);
    if (!identity || !session) return identity;
    return {
      ...identity,
      credentialKind: 'session',
      credentialId: `ses_${identity.principalId}`,
      expiresAt: new Date(Date.now() + 3600_000).toISOString(),
    };
  }
}

const work = mkdtempSync(join(tmpdir(), 'bc-sandboxes-suite-'));
const pki = join(work, 'pki.json');
let database: TestDatabase;
let compute: ComputeInstance;
let withoutSnapshots: ComputeInstance;
let workers: { stop(): Promise<void> };
let poolId = '';
let flavorId = '';
let imageId = '';

function client(instance: () => ComputeInstance) {
  return {
    async api(method: string, body: Record<string, unknown>, token = ACME_KEY) {
      const { body: answer } = await call(instance(), method, body, { token });
      if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
      return answer.data as any;
    },
    async fails(method: string, body: Record<string, unknown>, token = ACME_KEY) {
      const { status, body: answer } = await call(instance(), method, body, { token });
      if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
      // What the deployment lacks (INVALID_CONFIG) is the server's to fix, a 500; bad input never is.
      if (answer.error.code !== 'INVALID_CONFIG')
        expect(status, JSON.stringify(answer.error)).toBeLessThan(500);
      return answer.error as { code: string; message: string; details?: Record<string, unknown> } & {
        hint?: string;
      };
    },
  };
}
const d = client(() => compute);

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what}: not in time`);
}

beforeAll(async () => {
  await createPkiBundle({ path: pki, secret: SECRET });
  database = await createTestDatabase('pglite', 4);
  const config = {
    database,
    iam: new SessionBridge(),
    trustedOrigins: [],
    rateLimit: false as const,
    pki,
    secret: SECRET,
  };
  compute = await betterCompute(config, { log: () => {} });
  await compute.migrate();
  withoutSnapshots = await betterCompute({ ...config, sandboxes: { snapshots: false } }, { log: () => {} });
  ({ poolId, flavorId, imageId } = await seedVpsPool(
    (method, body) => d.api(method, body, OPS),
    'sbx',
    ['acme'],
    {
      [SIM_DELAY_LABEL]: '20',
      [SIM_KEEP_IDENTITY_LABEL]: 'true',
    },
  ));
  workers = compute.startWorkers(['controllers']);
}, 120_000);

afterAll(async () => {
  await workers?.stop();
  await withoutSnapshots?.close();
  await compute?.close();
  await database?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('sandboxes in process', () => {
  let templateId = '';
  let sourceId = '';

  it('a bundle without a sandbox SSH CA refuses a cold start with the hint to add one; the fixed bundle is read again', async () => {
    templateId = (
      await d.api('sandboxTemplates.create', { name: 'vm', poolId, flavorId, imageId, runtime: 'qemu' })
    ).id;
    const full = readFileSync(pki, 'utf8');
    const document = JSON.parse(full);
    delete document.sandboxSshCa;
    writeFileSync(pki, JSON.stringify(document));
    // A fresh deployment reads the bundle on first use.
    const fresh = await betterCompute(
      { database, iam: new SessionBridge(), trustedOrigins: [], rateLimit: false, pki, secret: SECRET },
      { log: () => {} },
    );
    try {
      const refused = await client(() => fresh).fails('sandboxes.create', { templateId, waitSeconds: 0 });
      expect(refused).toMatchObject({ code: 'INVALID_CONFIG', details: { reason: 'no-sandbox-ca' } });
      expect(refused.hint).toContain('better-compute pki add-sandbox-ca');
      writeFileSync(pki, full);
      const started = await client(() => fresh).api('sandboxes.create', { templateId, waitSeconds: 0 });
      expect(started.state).toBe('starting');
      await client(() => fresh).api('sandboxes.delete', { sandboxId: started.id });
    } finally {
      writeFileSync(pki, full);
      await fresh.close();
    }
  });

  it('exec refuses an API key, and a memory restore that still shares its source’s identity', async () => {
    const source = await d.api('sandboxes.create', { templateId, waitSeconds: 20 });
    sourceId = source.id;
    expect(source).toMatchObject({ state: 'running', identityRebound: true, hostCertified: true });
    const byKey = await d.fails('sandboxes.exec', { sandboxId: source.id, publicKey: KEY });
    expect(byKey).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'session-required' } });
    const grant = await d.api('sandboxes.exec', { sandboxId: source.id, publicKey: KEY }, ACME_SESSION);
    expect(grant).toMatchObject({ sandboxId: source.id, account: 'root', hostCertified: true });
    // Ten minutes unless the call asks for another lifetime (issue 41).
    expect(Date.parse(grant.certificateExpiresAt) - Date.now()).toBeLessThanOrEqual(600_000);

    const snapshot = await d.api('sandboxes.snapshot', { sandboxId: source.id, keep: true });
    expect(snapshot).toMatchObject({ memory: true, keep: true, state: 'creating' });
    await until(
      'the snapshot is ready',
      () => d.api('sandboxSnapshots.get', { snapshotId: snapshot.id }),
      (s) => s.state === 'ready',
    );
    const restore = await d.api('sandboxes.create', {
      templateId,
      fromSnapshotId: snapshot.id,
      waitSeconds: 20,
    });
    expect(restore).toMatchObject({
      state: 'running',
      fromSnapshotId: snapshot.id,
      identityRebound: false,
      nodeId: source.nodeId,
    });
    const shared = await d.fails('sandboxes.exec', { sandboxId: restore.id, publicKey: KEY }, ACME_SESSION);
    expect(shared).toMatchObject({ code: 'INVALID_STATE', details: { reason: 'restore-shares-identity' } });
    expect(shared.hint).toContain('identityRebound: true');
    await d.api('sandboxes.delete', { sandboxId: restore.id });
  });

  it('a deployment without a snapshot store refuses snapshots and restores', async () => {
    const other = client(() => withoutSnapshots);
    const snapshot = await other.fails('sandboxes.snapshot', { sandboxId: sourceId, keep: false });
    expect(snapshot).toMatchObject({ code: 'INVALID_CONFIG', details: { reason: 'no-snapshot-store' } });
    const snapshots = await d.api('sandboxSnapshots.list', { sandboxId: sourceId });
    const restore = await other.fails('sandboxes.create', {
      templateId,
      fromSnapshotId: snapshots.items[0].id,
    });
    expect(restore).toMatchObject({ code: 'INVALID_CONFIG', details: { reason: 'no-snapshot-store' } });
    await d.api('sandboxes.delete', { sandboxId: sourceId });
  });

  it('a tenant’s sandbox quota on a pool, set by the pool’s owner, refuses one sandbox too many', async () => {
    expect(
      (
        await d.fails('sandboxes.setQuota', {
          poolId,
          subjectTenantId: 'acme',
          resource: 'sandboxes',
          limit: 1,
        })
      ).code,
    ).toBe('ACCESS_DENIED');
    await d.api(
      'sandboxes.setQuota',
      { poolId, subjectTenantId: 'acme', resource: 'sandboxes', limit: 1 },
      OPS,
    );
    await until(
      'earlier sandboxes are gone',
      () => d.api('sandboxes.quotas', { poolId }),
      (q) => q.items[0].used === 0,
    );
    const first = await d.api('sandboxes.create', { templateId, waitSeconds: 0 });
    const refused = await d.fails('sandboxes.create', { templateId, waitSeconds: 0 });
    expect(refused).toMatchObject({
      code: 'QUOTA_EXCEEDED',
      details: { resource: 'sandboxes', limit: 1, used: 1 },
    });
    const quotas = await d.api('sandboxes.quotas', { poolId });
    expect(quotas.items[0]).toMatchObject({ tenantId: 'acme', resource: 'sandboxes', limit: 1, used: 1 });
    await d.api(
      'sandboxes.setQuota',
      { poolId, subjectTenantId: 'acme', resource: 'sandboxes', limit: null },
      OPS,
    );
    await d.api('sandboxes.delete', { sandboxId: first.id });
  });

  it('a template’s runtime must be one a node of the pool runs: a bcd node whose daemon never said so runs none', async () => {
    const site = await d.api('sites.create', { name: 'bcd-site', region: 'eu-1' }, OPS);
    const bcdPool = (await d.api('pools.create', { siteId: site.id, name: 'bcd', class: 'vps' }, OPS)).id;
    await d.api('pools.offer', { poolId: bcdPool, offerTenantId: 'acme' }, OPS);
    const fleet = {
      api: (method: string, body: Record<string, unknown>, token = OPS) => d.api(method, body, token),
    } as unknown as FleetDeployment;
    await addNode(fleet, bcdPool, 'bcd-a', []);
    const bcdFlavor = (
      await d.api(
        'flavors.create',
        { poolId: bcdPool, name: 'small', vcpus: 1, memoryMiB: 512, diskGiB: 2 },
        OPS,
      )
    ).id;
    for (const runtime of ['bwrap', 'qemu'])
      expect(
        await d.fails('sandboxTemplates.create', {
          name: `no-${runtime}`,
          poolId: bcdPool,
          flavorId: bcdFlavor,
          imageId,
          runtime,
        }),
      ).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'runtime', reason: 'runtime' } });
    // A GPU pool takes no sandboxes at all.
    const gpuPool = (await d.api('pools.create', { siteId: site.id, name: 'gpu', class: 'gpu' }, OPS)).id;
    await d.api('pools.offer', { poolId: gpuPool, offerTenantId: 'acme' }, OPS);
    expect(
      await d.fails('sandboxTemplates.create', { name: 'gpu', poolId: gpuPool, flavorId, imageId }),
    ).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'poolId' } });
  });

  it('naming a volume in a template is decided as compute:sandboxes:attach on the volume', async () => {
    const volume = await d.api('sandboxVolumes.create', { poolId, name: 'notes', sizeGiB: 1 });
    await until(
      'the volume is ready',
      () => d.api('sandboxVolumes.get', { volumeId: volume.id }),
      (v) => v.state === 'ready',
    );
    const input = { poolId, flavorId, imageId, volumes: [{ name: 'notes', path: '/notes' }] };
    const refused = await d.fails('sandboxTemplates.create', { name: 'mounts', ...input }, 't-acme-noattach');
    expect(refused).toMatchObject({ code: 'ACCESS_DENIED', details: { action: 'compute:sandboxes:attach' } });
    // A VM would attach the file the node has loop-mounted for bwrap sandboxes: refused.
    expect(
      await d.fails('sandboxTemplates.create', { name: 'vm-mounts', runtime: 'qemu', ...input }),
    ).toMatchObject({ code: 'INVALID_ARGUMENT', details: { reason: 'runtime', field: 'volumes' } });
    const template = await d.api('sandboxTemplates.create', { name: 'mounts', ...input });
    expect(template.volumes).toEqual([
      { volumeId: volume.id, name: 'notes', path: '/notes', readOnly: false },
    ]);
    expect(
      (
        await d.fails(
          'sandboxTemplates.update',
          { templateId: template.id, volumes: [{ volumeId: volume.id, path: '/n' }] },
          't-acme-noattach',
        )
      ).code,
    ).toBe('ACCESS_DENIED');
  });

  it('a warm pool whose starts keep failing pauses its refills instead of retrying every second', async () => {
    const site = await d.api('sites.create', { name: 'failing-site', region: 'eu-1' }, OPS);
    const failing = (
      await d.api('pools.create', { siteId: site.id, name: 'failing', class: 'vps', driver: 'sim' }, OPS)
    ).id;
    await d.api('pools.offer', { poolId: failing, offerTenantId: 'acme' }, OPS);
    const fleet = {
      api: (method: string, body: Record<string, unknown>, token = OPS) => d.api(method, body, token),
    } as unknown as FleetDeployment;
    await addNode(fleet, failing, 'failing-a', [], {
      [SIM_DELAY_LABEL]: '10',
      [SIM_FAIL_LABEL]: 'sandbox.create',
    });
    const small = (
      await d.api(
        'flavors.create',
        { poolId: failing, name: 'small', vcpus: 1, memoryMiB: 512, diskGiB: 2 },
        OPS,
      )
    ).id;
    const template = await d.api('sandboxTemplates.create', {
      name: 'broken',
      poolId: failing,
      flavorId: small,
      imageId,
      warmMin: 1,
    });
    const failedCount = async () =>
      Number(
        (
          await sql<{ n: number }>`select count(*)::int as n from compute.sandboxes
            where template_id = ${template.id} and state = 'failed'`.execute(database.db)
        ).rows[0]!.n,
      );
    await until('the starts fail', failedCount, (n) => n >= FAILURES_PER_WINDOW);
    // Several controller passes later, no new start was made.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(await failedCount()).toBe(FAILURES_PER_WINDOW);
    const events = await sql<{ n: number }>`select count(*)::int as n from compute.events
      where type = 'sandbox.failed' and subject_id in (select id from compute.sandboxes where template_id = ${template.id})`.execute(
      database.db,
    );
    expect(Number(events.rows[0]!.n)).toBe(FAILURES_PER_WINDOW);
    await d.api('sandboxTemplates.delete', { templateId: template.id });
  });
});
