/**
 * createPxeDiscoveryView against a real deployment on PostgreSQL (as the other views' tests): two
 * sites, a site agent joined to the first with a site token, a machine enrolled with only its
 * product UUID and one with its MAC; what the agent saw PXE-booting is recorded with the metal
 * module's own recordPxeDiscovery, the function the gateway calls on an agent's report. The view
 * picks the first site, orders the rows candidates, unknown, enrolled (newest first within each),
 * switches sites, binds a candidate's MAC (the row becomes enrolled) and lets the server's refusals
 * through (CONFLICT, INVALID_STATE). pxeCandidates, normalizeMac and the by-hand form's check alone.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordPxeDiscovery } from '../../better-compute/src/modules/metal/index.js';
import type { ComputeTables } from '../../better-compute/src/db/tables.js';
import {
  bindByHandInput,
  createPxeDiscoveryView,
  describeDiscovery,
  isMachineId,
  normalizeMac,
  pxeCandidates,
  pxeConfirmQuestion,
  type PxeDiscovery,
} from '../src/index.js';
import { startKitServer, type KitServer } from './kit-server.js';

const WAITING_UUID = '4c4c4544-0042-3510-8052-b4c04f4a4e31';
const KNOWN_MAC = '52:54:00:aa:bb:08';

let server: KitServer;
let firstSite: string;
let secondSite: string;
let waiting: string;
let known: string;

beforeAll(async () => {
  server = await startKitServer();
  const { client } = server;
  firstSite = (await client.call('sites.create', { tenantId: 'root', name: 'dc-a' })).id;
  secondSite = (await client.call('sites.create', { tenantId: 'root', name: 'dc-b' })).id;
  const pool = await client.call('pools.create', {
    tenantId: 'root',
    siteId: firstSite,
    name: 'agents',
    class: 'gpu',
  });
  // A site agent joins with a site token; only a site agent's reports are kept, for its own site.
  const { token: joinToken } = await client.call('siteTokens.create', {
    tenantId: 'root',
    poolId: pool.id,
    preApproved: true,
  });
  const agent = await client.nodes.join({
    joinToken,
    hostname: 'agent-a',
    inventory: { cpuCores: 2, memoryGiB: 4, gpus: [] },
  });
  const enroll = (name: string, productUuid: string, macs?: string[]) =>
    client.call('metal.enroll', {
      tenantId: 'root',
      siteId: firstSite,
      name,
      bmcDriver: 'ipmi',
      bmcAddress: '10.0.0.7',
      bmcUser: 'admin',
      bmcPassword: 'bmc-pass',
      productUuid,
      ...(macs ? { macs } : {}),
    });
  waiting = (await enroll('r12-u07', WAITING_UUID)).id;
  known = (await enroll('r12-u08', '4c4c4544-0042-3510-8052-b4c04f4a4e32', [KNOWN_MAC])).id;
  const db = server.compute.database.db as unknown as Kysely<ComputeTables>;
  const now = Date.now();
  const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000);
  // The enrolled machine's MAC is the newest report, an unknown machine the oldest: the view still
  // puts the candidate first.
  for (const [report, minutesAgo] of [
    [{ mac: KNOWN_MAC }, 1],
    [{ mac: '52:54:00:00:00:99', uuid: '11111111-2222-3333-4444-555555555555' }, 30],
    [{ mac: '52-54-00-12-34-56', uuid: WAITING_UUID.toUpperCase() }, 20],
    [{ mac: '52:54:00:00:00:98' }, 10],
  ] as const) {
    const outcome = await recordPxeDiscovery(db, agent.nodeId!, report, at(minutesAgo));
    expect(outcome).toEqual({ outcome: 'recorded', siteId: firstSite });
  }
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

describe('the PXE discovery view', () => {
  it('lists the tenant’s sites, picks the first and orders its rows candidates, unknown, enrolled', async () => {
    const view = createPxeDiscoveryView(server.client, { tenantId: 'root' });
    expect(view.site.get()).toBeNull();
    await view.load();
    expect(view.sites.get().items.map((site) => site.id)).toEqual([firstSite, secondSite]);
    expect(view.site.get()).toBe(firstSite);
    const { data } = view.discovered.get();
    expect(data?.siteId).toBe(firstSite);
    expect(data?.items.map((row) => [row.kind, row.mac, row.machineId])).toEqual([
      ['candidate', '52:54:00:12:34:56', waiting],
      ['unknown', '52:54:00:00:00:98', null],
      ['unknown', '52:54:00:00:00:99', null],
      ['enrolled', KNOWN_MAC, known],
    ]);
    expect(describeDiscovery(data!.items[0]!)).toMatchObject({
      machine: `r12-u07 (${waiting})`,
      uuid: WAITING_UUID,
    });
    expect(describeDiscovery(data!.items[1]!)).toMatchObject({
      machine: 'no machine of this site',
      uuid: 'none sent',
    });

    // Another site saw nothing; switching back reads the first again.
    await view.selectSite(secondSite);
    expect(view.discovered.get().data).toEqual({ siteId: secondSite, items: [] });
    await view.selectSite(firstSite);
    expect(view.discovered.get().data?.items).toHaveLength(4);
    // A second load keeps the chosen site.
    await view.selectSite(secondSite);
    await view.load();
    expect(view.site.get()).toBe(secondSite);
  });

  it('binds a MAC only when asked; the server’s refusals come through and the list is read again', async () => {
    const view = createPxeDiscoveryView(server.client, { tenantId: 'root' });
    await view.load();
    // The enrolled machine's MAC for the waiting machine: CONFLICT, nothing bound.
    await expect(view.confirmMac(waiting, KNOWN_MAC.toUpperCase())).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    // A machine that has its MACs: INVALID_STATE.
    await expect(view.confirmMac(known, '52:54:00:12:34:56')).rejects.toMatchObject({
      code: 'INVALID_STATE',
    });
    expect(view.discovered.get().data?.items[0]).toMatchObject({ kind: 'candidate', machineId: waiting });

    // The candidate, written as a label has it: bound, and the list read again says enrolled.
    const machine = await view.confirmMac(waiting, '52-54-00-12-34-56');
    expect(machine).toMatchObject({ id: waiting, macs: ['52:54:00:12:34:56'] });
    const kinds = view.discovered.get().data?.items.map((row) => [row.kind, row.mac]);
    expect(kinds).toEqual([
      ['unknown', '52:54:00:00:00:98'],
      ['unknown', '52:54:00:00:00:99'],
      ['enrolled', KNOWN_MAC],
      ['enrolled', '52:54:00:12:34:56'],
    ]);
  });

  it('another tenant’s site is not found, and the view says so', async () => {
    const view = createPxeDiscoveryView(server.client, { tenantId: 'root' });
    await view.load();
    await view.selectSite('site_01jzzzzzzzzzzzzzzzzzzzzzzz');
    expect(view.discovered.get()).toMatchObject({ status: 'error', error: { code: 'NOT_FOUND' } });
  });
});

describe('pxeCandidates, normalizeMac and the by-hand form', () => {
  const row = (kind: PxeDiscovery['kind'], mac: string, lastSeenAt: string): PxeDiscovery => ({
    mac,
    uuid: null,
    kind,
    machineId: kind === 'unknown' ? null : 'node_x',
    machineName: kind === 'unknown' ? null : 'x',
    firstSeenAt: lastSeenAt,
    lastSeenAt,
    timesSeen: 1,
  });

  it('orders candidates, then unknown, then enrolled, newest first within each', () => {
    const rows = [
      row('enrolled', '52:54:00:00:00:01', '2026-12-07T00:09:00.000Z'),
      row('unknown', '52:54:00:00:00:02', '2026-12-07T00:01:00.000Z'),
      row('candidate', '52:54:00:00:00:03', '2026-12-07T00:02:00.000Z'),
      row('unknown', '52:54:00:00:00:04', '2026-12-07T00:08:00.000Z'),
      row('candidate', '52:54:00:00:00:05', '2026-12-07T00:07:00.000Z'),
      row('enrolled', '52:54:00:00:00:06', '2026-12-07T00:03:00.000Z'),
    ];
    expect(pxeCandidates(rows).map((item) => item.mac.slice(-1))).toEqual(['5', '3', '4', '2', '1', '6']);
    // A copy: the store's snapshot is never reordered in place.
    expect(rows[0]!.mac).toBe('52:54:00:00:00:01');
  });

  it('normalizeMac is core’s: upper or lower case, - or :; not multicast, zero or mixed separators', () => {
    expect(normalizeMac('52-54-00-AB-CD-EF')).toBe('52:54:00:ab:cd:ef');
    expect(normalizeMac('52:54:00:ab:cd:ef')).toBe('52:54:00:ab:cd:ef');
    expect(normalizeMac(' 52:54:00:AB:cd:EF ')).toBe('52:54:00:ab:cd:ef');
    for (const refused of [
      'ff:ff:ff:ff:ff:ff',
      '01:00:5e:00:00:01',
      '00:00:00:00:00:00',
      '52:54:00-ab:cd:ef',
      '52:54:00:ab:cd',
      '525400abcdef',
      'node_x',
      '',
    ])
      expect(normalizeMac(refused), refused).toBeNull();
  });

  it('the by-hand form is ready only with a node id and a well-formed MAC', () => {
    const id = 'node_01j9z3k4m5n6p7q8r9s0t1v2w3';
    expect(isMachineId(id)).toBe(true);
    expect(bindByHandInput(` ${id} `, '52-54-00-12-34-56')).toEqual({
      machineId: id,
      mac: '52:54:00:12:34:56',
      ready: true,
    });
    expect(bindByHandInput('r12-u07', '52:54:00:12:34:56').ready).toBe(false);
    expect(bindByHandInput(id, '52:54:00:12:34').ready).toBe(false);
    expect(bindByHandInput('', '').ready).toBe(false);
    expect(pxeConfirmQuestion('52-54-00-12-34-56', id)).toBe(
      `Bind 52:54:00:12:34:56 as the PXE MAC of ${id}? The machine will then boot from it.`,
    );
  });
});
