/**
 * PXE discovery on both databases: what a site agent reports (recordPxeDiscovery, the gateway's
 * call) is kept per site and MAC for 24 hours and only for a site agent's own site; metal.discovered
 * classifies it (candidate, unknown, enrolled; candidates first, newest first) for the site's
 * tenant only; metal.confirmMac binds a MAC to a machine enrolled without MACs, decided as
 * compute:nodes:provision on the machine, with its event and audit row, and refuses a MAC another
 * machine has, a machine that has MACs, malformed input, and other tenants' machines, changing nothing.
 * The site's bound MACs go as metal.boot-entries commands to the site agents that run the
 * provisioning network (`site.pxe` in their hello), at enrolment with MACs, confirmation and hello.
 */
import type { AuthorizationCheck, AuthorizationDecision, Identity } from '@better-compute/core';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { recordNodeSession } from '../src/modules/commands/index.js';
import { pushBootEntriesTo, recordPxeDiscovery } from '../src/modules/metal/index.js';
import type { ComputeTables } from '../src/db/tables.js';
import { call, eventually, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const ACME = 't-acme-alice';
const GLOBEX = 't-globex-bob';
/** An agent acting for usr_alice of acme; `refuse` narrows what her role allows. */
const AGENT = 'agent-acme-bot';
const inventory = { cpuCores: 2, memoryGiB: 4, gpus: [] };
const WAITING_UUID = '4c4c4544-0042-3510-8052-b4c04f4a4e31';

class DiscoveryBridge extends TestBridge {
  refuse: (check: AuthorizationCheck) => boolean = () => false;
  override async authenticate(credential: string): Promise<Identity | null> {
    if (credential !== AGENT) return super.authenticate(credential);
    return {
      principalId: 'agt_bot',
      principalKind: 'agent',
      tenantId: 'acme',
      credentialKind: 'api-key',
      credentialId: 'key_botkey',
      mfa: false,
      expiresAt: null,
      actingFor: 'usr_alice',
      delegation: { id: 'dlg_bot', confirm: [], spendLimitGpuHours: null },
    };
  }
  override async authorize(
    identity: Identity,
    checks: AuthorizationCheck[],
  ): Promise<AuthorizationDecision[]> {
    const decided = await super.authorize(identity, checks);
    return decided.map((decision, i) =>
      this.refuse(checks[i]!) ? { allowed: false, reason: 'no binding grants it' } : decision,
    );
  }
}

describe.each(kinds)('PXE discovery and confirm-mac on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let db: Kysely<ComputeTables>;
  const bridge = new DiscoveryBridge();
  let siteId: string;
  let otherSite: string;
  let globexSite: string;
  let agentNode: string;
  let otherSiteAgent: string;
  let plainNode: string;
  /** Enrolled with its UUID only: waits for its PXE MAC. */
  let waiting: string;
  /** Enrolled with its MAC known. */
  let known: string;
  let globexMachine: string;

  async function api(method: string, body: Record<string, unknown>, token: string = ACME) {
    const { body: answer } = await call(compute, method, body, { token });
    if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
    return answer.data as any;
  }
  async function fails(method: string, body: unknown, token: string = ACME) {
    const { status, body: answer } = await call(compute, method, body, { token });
    if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
    expect(status).toBeLessThan(500);
    return answer.error as { code: string; message: string; details?: Record<string, any> };
  }
  const bootEntryCommands = async () =>
    (
      await sql<{ node_id: string; payload: any }>`
        select node_id, payload from compute.commands where kind = 'metal.boot-entries' order by seq`.execute(
        db,
      )
    ).rows.map((row) => ({
      nodeId: row.node_id,
      macs: (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload).entries.map((e: any) =>
        e.boot === 'local-disk' ? e.mac : `${e.mac}?`,
      ),
    }));
  const machines = async () =>
    JSON.stringify((await sql`select * from compute.metal_machines order by id`.execute(db)).rows);
  async function joinWith(poolId: string, site: boolean, hostname: string, token = ACME) {
    const { token: joinToken } = site
      ? await api('siteTokens.create', { poolId, preApproved: true }, token)
      : await api('joinTokens.create', { poolId, uses: 1, preApproved: true }, token);
    const joined = await api('nodes.join', { joinToken, hostname, inventory }, token);
    return joined.nodeId as string;
  }
  const enroll = (name: string, productUuid: string, macs?: string[], site = siteId, token = ACME) =>
    api(
      'metal.enroll',
      {
        siteId: site,
        name,
        bmcDriver: 'ipmi',
        bmcAddress: '10.0.0.7',
        bmcUser: 'admin',
        bmcPassword: 'bmc-pass',
        productUuid,
        ...(macs ? { macs } : {}),
      },
      token,
    );

  beforeAll(async () => {
    database = await createTestDatabase(kind, 4);
    db = database.db as Kysely<ComputeTables>;
    compute = await betterCompute(
      {
        database,
        iam: bridge,
        trustedOrigins: [],
        rateLimit: false,
        secret: 'discovery-suite-secret-0123456789',
      },
      { log: () => {} },
    );
    await compute.migrate();
    siteId = (await api('sites.create', { name: 'dc-1' })).id;
    otherSite = (await api('sites.create', { name: 'dc-2' })).id;
    globexSite = (await api('sites.create', { name: 'globex-dc' }, GLOBEX)).id;
    const pool = (await api('pools.create', { siteId, name: 'agents', class: 'gpu', driver: 'sim' })).id;
    const otherPool = (
      await api('pools.create', { siteId: otherSite, name: 'agents-2', class: 'gpu', driver: 'sim' })
    ).id;
    agentNode = await joinWith(pool, true, 'agent-1');
    otherSiteAgent = await joinWith(otherPool, true, 'agent-2');
    plainNode = await joinWith(pool, false, 'worker-1');
    // agent-1 runs the provisioning network (site.pxe in its hello); agent-2 does not.
    for (const [nodeId, capabilities] of [
      [agentNode, ['site.agent', 'site.pxe']],
      [otherSiteAgent, ['site.agent']],
    ] as const)
      await recordNodeSession(db, {
        nodeId,
        tenantId: 'acme',
        gatewayId: 'gw_test',
        at: new Date(),
        hello: { version: '0.1.0', capabilities },
      });
    waiting = (await enroll('r12-u07', WAITING_UUID.toUpperCase())).id;
    known = (await enroll('r12-u08', '4c4c4544-0042-3510-8052-b4c04f4a4e32', ['52:54:00:aa:bb:08'])).id;
    globexMachine = (
      await enroll('g-u01', '4c4c4544-0042-3510-8052-b4c04f4a4e39', undefined, globexSite, GLOBEX)
    ).id;
  });
  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('records a site agent’s reports for its own site only; other nodes and bad reports are refused', async () => {
    const t0 = new Date();
    // The waiting machine's MAC, first without option 97, then with its UUID in upper case.
    expect(await recordPxeDiscovery(db, agentNode, { mac: '52-54-00-12-34-56' }, t0)).toEqual({
      outcome: 'recorded',
      siteId,
    });
    const t1 = new Date(t0.getTime() + 1000);
    await recordPxeDiscovery(
      db,
      agentNode,
      { mac: '52:54:00:12:34:56', uuid: WAITING_UUID.toUpperCase() },
      t1,
    );
    await recordPxeDiscovery(db, agentNode, { mac: '52:54:00:12:34:56' }, new Date(t0.getTime() + 2000));
    await recordPxeDiscovery(
      db,
      agentNode,
      { mac: '52:54:00:00:00:99', uuid: '11111111-2222-3333-4444-555555555555' },
      t1,
    );
    await recordPxeDiscovery(db, agentNode, { mac: '52:54:00:aa:bb:08' }, t0);
    // A plain node of the same site, and garbage, are refused and write nothing.
    expect(await recordPxeDiscovery(db, plainNode, { mac: '52:54:00:00:00:77' }, t0)).toMatchObject({
      outcome: 'refused',
      reason: 'the node is not a site agent',
    });
    expect((await recordPxeDiscovery(db, agentNode, { mac: 'ff:ff:ff:ff:ff:ff' }, t0)).outcome).toBe(
      'refused',
    );
    expect((await recordPxeDiscovery(db, agentNode, { mac: '52:54:00:00:00:01\u0000' }, t0)).outcome).toBe(
      'refused',
    );
    expect(
      (await recordPxeDiscovery(db, agentNode, { mac: '52:54:00:00:00:01', uuid: 'x' }, t0)).outcome,
    ).toBe('refused');
    // The other site's agent speaks for its own site, never this one.
    await recordPxeDiscovery(db, otherSiteAgent, { mac: '52:54:00:00:00:42' }, t0);
    const { rows } = await sql<{ site_id: string; mac: string; uuid: string | null; times_seen: number }>`
      select site_id, mac, uuid, times_seen from compute.metal_pxe_discoveries order by mac`.execute(db);
    expect(rows).toEqual([
      { site_id: otherSite, mac: '52:54:00:00:00:42', uuid: null, times_seen: 1 },
      {
        site_id: siteId,
        mac: '52:54:00:00:00:99',
        uuid: '11111111-2222-3333-4444-555555555555',
        times_seen: 1,
      },
      { site_id: siteId, mac: '52:54:00:12:34:56', uuid: WAITING_UUID, times_seen: 3 },
      { site_id: siteId, mac: '52:54:00:aa:bb:08', uuid: null, times_seen: 1 },
    ]);
  });

  it('lists candidates, then unknown, then enrolled, to the site’s tenant only', async () => {
    const answer = await api('metal.discovered', { siteId });
    expect(answer.siteId).toBe(siteId);
    expect(answer.items.map((row: any) => [row.kind, row.mac, row.machineId])).toEqual([
      ['candidate', '52:54:00:12:34:56', waiting],
      ['unknown', '52:54:00:00:00:99', null],
      ['enrolled', '52:54:00:aa:bb:08', known],
    ]);
    expect(answer.items[0]).toMatchObject({ uuid: WAITING_UUID, machineName: 'r12-u07', timesSeen: 3 });
    expect((await api('metal.discovered', { siteId: otherSite })).items.map((r: any) => r.mac)).toEqual([
      '52:54:00:00:00:42',
    ]);
    // Another tenant's site is not found, as every read of a site answers it; a bad id is refused.
    expect((await fails('metal.discovered', { siteId }, GLOBEX)).code).toBe('NOT_FOUND');
    expect((await fails('metal.discovered', { siteId: 'nope' })).code).toBe('INVALID_ARGUMENT');
    expect((await fails('metal.discovered', { siteId, extra: 1 })).code).toBe('INVALID_ARGUMENT');
  });

  it('forgets what was last seen over 24 hours ago', async () => {
    const day = 24 * 60 * 60 * 1000;
    await recordPxeDiscovery(
      db,
      agentNode,
      { mac: '52:54:00:00:00:0d' },
      new Date(Date.now() - day - 60_000),
    );
    expect((await api('metal.discovered', { siteId })).items.map((r: any) => r.mac)).not.toContain(
      '52:54:00:00:00:0d',
    );
    // The next report of the site removes the old row.
    await recordPxeDiscovery(db, agentNode, { mac: '52:54:00:00:00:99' }, new Date());
    const { rows } =
      await sql`select mac from compute.metal_pxe_discoveries where mac = '52:54:00:00:00:0d'`.execute(db);
    expect(rows).toEqual([]);
  });

  it('confirm-mac refuses malformed input, other tenants, a held MAC and a machine with MACs, changing nothing', async () => {
    const before = await machines();
    const commandsBefore = await bootEntryCommands();
    // Enrolling with a MAC sent the site's entries to agent-1 alone.
    expect(commandsBefore).toEqual([{ nodeId: agentNode, macs: ['52:54:00:aa:bb:08'] }]);
    const malformed = await fails('metal.confirmMac', { machineId: waiting, mac: '52:54:00:12:34' });
    expect(malformed.code).toBe('INVALID_ARGUMENT');
    expect(malformed.message).toContain('mac');
    expect(
      (await fails('metal.confirmMac', { machineId: waiting, mac: '52:54:00:12:34:56\u0000' })).code,
    ).toBe('INVALID_ARGUMENT');
    expect((await fails('metal.confirmMac', { machineId: waiting, mac: '01:00:5e:00:00:01' })).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await fails('metal.confirmMac', { machineId: 'node_x', mac: '52:54:00:12:34:56' })).code).toBe(
      'INVALID_ARGUMENT',
    );
    // Another tenant's machine is not found, and another tenant cannot bind ours.
    expect(
      (await fails('metal.confirmMac', { machineId: globexMachine, mac: '52:54:00:12:34:56' })).code,
    ).toBe('NOT_FOUND');
    expect(
      (await fails('metal.confirmMac', { machineId: waiting, mac: '52:54:00:12:34:56' }, GLOBEX)).code,
    ).toBe('NOT_FOUND');
    const held = await fails('metal.confirmMac', { machineId: waiting, mac: '52:54:00:AA:BB:08' });
    expect(held.code).toBe('CONFLICT');
    expect(held.message).toContain(known);
    const has = await fails('metal.confirmMac', { machineId: known, mac: '52:54:00:12:34:57' });
    expect(has.code).toBe('INVALID_STATE');
    // An agent acting for a person without compute:nodes:provision on the machine is refused.
    bridge.refuse = (check) => check.action === 'compute:nodes:provision' && check.resource.id === waiting;
    try {
      const denied = await fails('metal.confirmMac', { machineId: waiting, mac: '52:54:00:12:34:56' }, AGENT);
      expect(denied.code).toBe('ACCESS_DENIED');
      expect(denied.message).toContain('compute:nodes:provision');
    } finally {
      bridge.refuse = () => false;
    }
    expect(await machines()).toBe(before);
    expect(await bootEntryCommands()).toEqual(commandsBefore);
  });

  it('confirm-mac binds the candidate’s MAC, with its event and audit row; the row becomes enrolled', async () => {
    const bound = await api('metal.confirmMac', { machineId: waiting, mac: '52-54-00-12-34-56' }, AGENT);
    expect(bound).toMatchObject({
      id: waiting,
      macs: ['52:54:00:12:34:56'],
      provisionState: 'enroll',
      version: 2,
    });
    // Once bound, the machine has its MAC: a second confirmation is INVALID_STATE.
    expect((await fails('metal.confirmMac', { machineId: waiting, mac: '52:54:00:12:34:56' })).code).toBe(
      'INVALID_STATE',
    );
    const listed = await api('metal.discovered', { siteId });
    expect(listed.items.find((r: any) => r.mac === '52:54:00:12:34:56')).toMatchObject({
      kind: 'enrolled',
      machineId: waiting,
    });
    const events = await eventually(
      () => api('events.list', { type: 'node.pxe-mac.' }),
      (page) => page.items.length > 0,
    );
    expect(events.items[0]).toMatchObject({
      type: 'node.pxe-mac.confirmed',
      subject: { type: 'machine', id: waiting },
      data: { siteId, mac: '52:54:00:12:34:56', productUuid: WAITING_UUID },
    });
    const audit = await sql<{ method: string; action: string }>`
      select method, action from compute.audit_events where method = 'metal.confirmMac'`.execute(db);
    expect(audit.rows).toContainEqual({ method: 'metal.confirmMac', action: 'compute:nodes:provision' });
    // The site's agent that runs the network is sent every bound MAC of the site, whole.
    expect((await bootEntryCommands()).at(-1)).toEqual({
      nodeId: agentNode,
      macs: ['52:54:00:12:34:56', '52:54:00:aa:bb:08'],
    });
  });

  it('a site agent’s hello sends it its site’s entries; a worker gets none', async () => {
    const before = (await bootEntryCommands()).length;
    expect(await pushBootEntriesTo(db, plainNode, new Date())).toBe(false);
    expect(await pushBootEntriesTo(db, otherSiteAgent, new Date())).toBe(true);
    expect(await pushBootEntriesTo(db, agentNode, new Date())).toBe(true);
    const sent = (await bootEntryCommands()).slice(before);
    expect(sent).toEqual([
      { nodeId: otherSiteAgent, macs: [] },
      { nodeId: agentNode, macs: ['52:54:00:12:34:56', '52:54:00:aa:bb:08'] },
    ]);
  });
});
