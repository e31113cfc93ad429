/**
 * Who may manage a sandbox volume, with the real embedded Better IAM and the built-in roles, through
 * the handler (docs/decisions/member-volumes.md): a member makes volumes and grows and deletes its
 * own, never a colleague's; a viewer only reads them; an administrator manages anyone's; an agent
 * acting for a member gets what the member has and no more, whatever its own role (its deletes wait
 * for the member's confirmation, as its delegation holds compute:*:delete back by default). A
 * simulated VPS pool's node does the volume work, with the workers running.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { SIM_DELAY_LABEL } from '../src/modules/vps/sim-runtime.js';
import { seedVpsPool } from './fleet-support.js';
import { agentWithKey } from './iam-support.js';
import { call } from './support.js';

const kinds = await testDatabaseKinds();

type Caller = 'alice' | 'bob' | 'viewer' | 'admin' | 'root' | 'agent' | 'bossAgent';

interface Volume {
  id: string;
  state: string;
  sizeGiB: number;
  ownerId: string | null;
  version: number;
}

describe.each(kinds)('who may manage a sandbox volume, on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let workers: { stop(): Promise<void> } | undefined;
  const keys = {} as Record<Caller, string>;
  const ids = {} as Record<'alice' | 'bob', string>;
  let poolId = '';
  let made = 0;

  async function send(method: string, body: Record<string, unknown>, who: Caller) {
    const { status, body: answer } = await call(
      compute,
      method,
      { tenantId: 'acme', ...body },
      { token: keys[who] },
    );
    // No caller, however refused, meets a server error.
    expect(status, JSON.stringify(answer.error)).toBeLessThan(500);
    return { status, data: answer.data as Volume, error: answer.error };
  }
  async function ok(method: string, body: Record<string, unknown>, who: Caller) {
    const answer = await send(method, body, who);
    expect(answer.error, `${method} as ${who}`).toBeUndefined();
    return answer.data;
  }
  async function refused(method: string, body: Record<string, unknown>, who: Caller) {
    const answer = await send(method, body, who);
    expect(answer.status, `${method} as ${who}`).toBe(403);
    return answer.error!;
  }
  async function ready(volumeId: string): Promise<Volume> {
    for (let i = 0; i < 300; i++) {
      const volume = await ok('sandboxVolumes.get', { volumeId }, 'admin');
      if (volume.state === 'ready') return volume;
      if (volume.state === 'failed') throw new Error(`volume ${volumeId} failed`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`volume ${volumeId}: not ready in time`);
  }
  /** A ready volume made by `who`. */
  async function volumeOf(who: Caller): Promise<Volume> {
    const volume = await ok('sandboxVolumes.create', { poolId, name: `v${++made}`, sizeGiB: 1 }, who);
    return ready(volume.id);
  }

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.alice = dev.acmeMember.apiKey;
    ids.alice = dev.acmeMember.principalId;
    keys.admin = dev.acmeAdmin.apiKey;
    keys.root = dev.rootAdmin.apiKey;
    const person = async (email: string, role: string) => {
      const p = await iam.createPerson({ tenantId: 'acme', email, password: 'correct horse battery' });
      await iam.createBinding({ tenantId: 'acme', role, principalId: p.id });
      return { id: p.id, key: (await iam.createApiKey(p.id, { name: 'k' })).key };
    };
    const bob = await person('bob@acme.test', 'member');
    keys.bob = bob.key;
    ids.bob = bob.id;
    keys.viewer = (await person('vera@acme.test', 'viewer')).key;
    const agentFor = async (role: string) =>
      (
        await agentWithKey(iam, {
          tenantId: 'acme',
          displayName: `alice’s ${role} agent`,
          actingFor: ids.alice,
          role,
        })
      ).key;
    keys.agent = await agentFor('member');
    // Bound as a tenant administrator, it still acts for a member: it gets no more than she has.
    keys.bossAgent = await agentFor('tenant-admin');
    ({ poolId } = await seedVpsPool(
      // The platform administrator's calls, in its own tenant (root) when a method takes one.
      async (method, body) => {
        const { body: answer } = await call(compute, method, body, { token: keys.root });
        if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
        return answer.data;
      },
      'vols',
      ['acme'],
      { [SIM_DELAY_LABEL]: '20' },
    ));
    workers = compute.startWorkers(['controllers']);
  }, 120_000);

  afterAll(async () => {
    await workers?.stop();
    await compute?.close();
    await database?.close();
  });

  it('a member makes a volume, grows it and deletes it: it is hers', async () => {
    const volume = await volumeOf('alice');
    expect(volume.ownerId).toBe(ids.alice);
    const grown = await ok('sandboxVolumes.resize', { volumeId: volume.id, sizeGiB: 2 }, 'alice');
    expect(grown).toMatchObject({ state: 'resizing' });
    expect((await ready(volume.id)).sizeGiB).toBe(2);
    const deleting = await ok('sandboxVolumes.delete', { volumeId: volume.id }, 'alice');
    expect(deleting.state).toBe('deleting');
    const mine = await ok('sandboxVolumes.list', { deleted: true }, 'alice');
    expect((mine as unknown as { items: Volume[] }).items.map((v) => v.id)).toContain(volume.id);
  });

  it('another member reads it but neither grows nor deletes it; an administrator does both', async () => {
    const volume = await volumeOf('alice');
    for (const [method, body] of [
      ['sandboxVolumes.resize', { volumeId: volume.id, sizeGiB: 5 }],
      ['sandboxVolumes.delete', { volumeId: volume.id }],
    ] as const) {
      const error = await refused(method, body, 'bob');
      expect(error.code, method).toBe('ACCESS_DENIED');
      expect(error.details?.reason, method).toContain('own resources');
    }
    expect((await ok('sandboxVolumes.get', { volumeId: volume.id }, 'bob')).id).toBe(volume.id);
    // Nothing changed by the refusals.
    expect(await ready(volume.id)).toMatchObject({ sizeGiB: 1, version: volume.version });
    await ok('sandboxVolumes.resize', { volumeId: volume.id, sizeGiB: 3 }, 'admin');
    await ready(volume.id);
    expect((await ok('sandboxVolumes.delete', { volumeId: volume.id }, 'admin')).state).toBe('deleting');
  });

  it('a viewer reads volumes, and makes, grows and deletes none', async () => {
    const volume = await volumeOf('bob');
    const creating = await refused(
      'sandboxVolumes.create',
      { poolId, name: 'viewers', sizeGiB: 1 },
      'viewer',
    );
    expect(creating).toMatchObject({
      code: 'ACCESS_DENIED',
      details: { action: 'compute:sandbox-volumes:create' },
    });
    expect((await refused('sandboxVolumes.resize', { volumeId: volume.id, sizeGiB: 2 }, 'viewer')).code).toBe(
      'ACCESS_DENIED',
    );
    expect((await refused('sandboxVolumes.delete', { volumeId: volume.id }, 'viewer')).code).toBe(
      'ACCESS_DENIED',
    );
    expect((await ok('sandboxVolumes.get', { volumeId: volume.id }, 'viewer')).id).toBe(volume.id);
    const all = await ok('sandboxVolumes.list', { all: true }, 'viewer');
    expect((all as unknown as { items: Volume[] }).items.map((v) => v.id)).toContain(volume.id);
    expect(await ready(volume.id)).toMatchObject({ sizeGiB: 1, version: volume.version });
  });

  it('an agent for a member makes and grows her volumes, its deletes wait for her, and a colleague’s are refused', async () => {
    const bobs = await volumeOf('bob');
    for (const agent of ['agent', 'bossAgent'] as const) {
      const volume = await volumeOf(agent);
      expect(volume.ownerId, agent).toBe(ids.alice);
      await ok('sandboxVolumes.resize', { volumeId: volume.id, sizeGiB: 2 }, agent);
      await ready(volume.id);
      // Her agent's delete is hers to confirm (compute:*:delete is held back by default).
      expect((await refused('sandboxVolumes.delete', { volumeId: volume.id }, agent)).code, agent).toBe(
        'CONFIRMATION_REQUIRED',
      );
      for (const [method, body] of [
        ['sandboxVolumes.resize', { volumeId: bobs.id, sizeGiB: 4 }],
        ['sandboxVolumes.delete', { volumeId: bobs.id }],
      ] as const)
        expect((await refused(method, body, agent)).code, `${method} as ${agent}`).toBe('ACCESS_DENIED');
      // The volume her agent made is hers to end.
      expect((await ok('sandboxVolumes.delete', { volumeId: volume.id }, 'alice')).state).toBe('deleting');
    }
    expect(await ready(bobs.id)).toMatchObject({ sizeGiB: 1, version: bobs.version });
  });

  it('a volume that is not there is refused to a member and NOT_FOUND to an administrator', async () => {
    const missing = 'vol_01m00000000000000000000000';
    for (const who of ['alice', 'bob'] as const)
      expect((await refused('sandboxVolumes.delete', { volumeId: missing }, who)).code).toBe('ACCESS_DENIED');
    const answer = await send('sandboxVolumes.delete', { volumeId: missing }, 'admin');
    expect([answer.status, answer.error?.code]).toEqual([404, 'NOT_FOUND']);
  });
});
