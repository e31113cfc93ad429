/**
 * Edges of the fleet found by audits through the real CLI: an inventory that waits keeps new work
 * off its node, changes that change nothing leave versions and events alone, refusals whose hints
 * point at something that works, what revoking a token and archiving a pool do to joins, why a
 * site with pools stays, removing labels from the CLI, and help texts and answers that say what
 * happened.
 */
import { testDatabaseKinds } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { runFleetController } from '../src/modules/fleet/index.js';
import { checkAll } from '../src/sim/invariants.js';
import { cliRunner, scratchDirectory } from './cli-support.js';
import {
  a100x8,
  ACME,
  addNode,
  eventTypesOf,
  getNode,
  heartbeat,
  l40sx4,
  nodeInventory,
  OPERATOR_ENV,
  seedPool,
  suiteDeployment,
} from './fleet-support.js';

const kinds = await testDatabaseKinds();
const HOUR = 3600;
const PENDING = 'better-compute.io/inventory-pending';

describe.each(kinds)('fleet edges on %s', (kind) => {
  const d = suiteDeployment(kind);
  const scratch = scratchDirectory('.tmp-fleet-edges-');

  const reserve = (poolId: string, gpus: number) =>
    d.api('reservations.create', { poolId, gpus, durationSeconds: HOUR }, ACME);
  const release = (reservationId: string) => d.api('reservations.release', { reservationId }, ACME);
  const inventoryOf = (nodeId: string) => d.api('inventory.get', { nodeId });

  /** The CLI in process against this deployment, acting as the root tenant's operator. */
  const { run, json } = cliRunner(() => d.compute, scratch, OPERATOR_ENV);
  const help = async (...words: string[]) => (await run(['help', ...words])).out.join('\n');

  describe('1. a reported inventory that waits keeps new work off its node', () => {
    it('a node reporting fewer GPUs while it holds some takes no new work until the change is in use', async () => {
      const { poolId } = await seedPool(d, 'inv-wait');
      const node = await addNode(d, poolId, 'iw-a', l40sx4());
      const held = await reserve(poolId, 2);
      expect(held.binding[0].gpuIndices).toEqual([0, 1]);
      const one = nodeInventory(l40sx4().slice(0, 1));
      expect((await heartbeat(d, node.credential, one)).state).toBe('ready');
      expect(await inventoryOf(node.nodeId)).toMatchObject({ revision: 2, applied: false });
      const waiting = await getNode(d, node.nodeId);
      expect(waiting.taints).toEqual([{ key: PENDING, value: '', effect: 'NoSchedule' }]);
      // Neither the fast reserve nor the locked path binds GPUs 2 and 3, which the node no longer reports.
      const two = await reserve(poolId, 2);
      expect(two).toMatchObject({ state: 'queued', binding: [] });
      await release(two.id);
      const later = await reserve(poolId, 1);
      expect(later.state).toBe('queued');
      const preview = await d.api('capacity.preview', { poolId, gpus: 1, durationSeconds: HOUR }, ACME);
      expect(preview.fits).toBe(false);
      // The same report again changes nothing: the taint is there once.
      await heartbeat(d, node.credential, one);
      expect((await getNode(d, node.nodeId)).version).toBe(waiting.version);
      // The release that empties it puts it in use, without waiting for a heartbeat: one GPU, no
      // taint, and the queue starts on GPU 0.
      await release(held.id);
      expect(await inventoryOf(node.nodeId)).toMatchObject({ revision: 2, applied: true });
      expect(await getNode(d, node.nodeId)).toMatchObject({ taints: [], gpuCount: 1 });
      expect(await d.api('reservations.get', { reservationId: later.id }, ACME)).toMatchObject({
        state: 'active',
        binding: [expect.objectContaining({ nodeId: node.nodeId, gpuIndices: [0] })],
      });
      const types = await eventTypesOf(d, node.nodeId);
      expect(types.slice(types.indexOf('node.inventory.changed'))).toEqual([
        'node.inventory.changed',
        'node.tainted',
        'node.inventory.applied',
        'node.tainted',
      ]);
      await release(later.id);
    });

    it('a change of CPU or memory only is in use at once, and the node goes on taking work', async () => {
      const { poolId } = await seedPool(d, 'inv-cpu');
      const node = await addNode(d, poolId, 'ic-a', l40sx4());
      const held = await reserve(poolId, 2);
      await heartbeat(d, node.credential, { ...nodeInventory(), cpuCores: 96, memoryGiB: 1024 });
      expect(await inventoryOf(node.nodeId)).toMatchObject({ revision: 2, applied: true });
      expect(await getNode(d, node.nodeId)).toMatchObject({
        taints: [],
        cpuCores: 96,
        memoryGiB: 1024,
        gpuCount: 4,
        freeGpus: 2,
      });
      const next = await reserve(poolId, 2);
      expect(next).toMatchObject({
        state: 'active',
        binding: [expect.objectContaining({ gpuIndices: [2, 3] })],
      });
      for (const r of [held, next]) await release(r.id);
    });

    it('a GPU change reported, then undone while GPUs are held, leaves the node taking work', async () => {
      const { poolId } = await seedPool(d, 'inv-undo');
      const node = await addNode(d, poolId, 'iu-a', l40sx4());
      const held = await reserve(poolId, 1);
      await heartbeat(d, node.credential, nodeInventory(l40sx4().slice(0, 2)));
      expect((await getNode(d, node.nodeId)).taints).toEqual([expect.objectContaining({ key: PENDING })]);
      await heartbeat(d, node.credential, nodeInventory());
      expect(await inventoryOf(node.nodeId)).toMatchObject({ revision: 3, applied: true });
      expect((await getNode(d, node.nodeId)).taints).toEqual([]);
      const next = await reserve(poolId, 1);
      expect(next.state).toBe('active');
      for (const r of [held, next]) await release(r.id);
    });

    it('compute’s own taint keys are neither set nor cleared through nodes.taint', async () => {
      const { poolId } = await seedPool(d, 'inv-taint');
      const node = await addNode(d, poolId, 'it-a', l40sx4());
      for (const body of [{ remove: [PENDING] }, { add: [{ key: PENDING }] }]) {
        const refused = await d.fails('nodes.taint', { nodeId: node.nodeId, ...body });
        expect(refused).toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: `taint ${PENDING} is set and cleared by compute only`,
        });
        expect(refused.hint).toContain('as soon as it holds no reservation');
      }
    });
  });

  describe('2. a change that changes nothing leaves the version and emits no event', () => {
    it('taint --remove and label --remove of a key the node lacks; a taint or label set as it is', async () => {
      const { poolId } = await seedPool(d, 'noop-node');
      const { nodeId } = await addNode(d, poolId, 'nn-a', l40sx4());
      const { version } = await getNode(d, nodeId);
      const views = [
        await d.api('nodes.taint', { nodeId, remove: ['nosuch'], ifVersion: version }),
        await d.api('nodes.label', { nodeId, remove: ['nosuch'], ifVersion: version }),
        await d.api('nodes.label', { nodeId, set: {}, ifVersion: version }),
      ];
      for (const view of views) expect(view.version).toBe(version);
      const taint = { nodeId, add: [{ key: 'gpu-maintenance' }] };
      const tainted = await d.api('nodes.taint', taint);
      expect((await d.api('nodes.taint', taint)).version).toBe(tainted.version);
      const labeled = await d.api('nodes.label', { nodeId, set: { zone: 'b' } });
      expect((await d.api('nodes.label', { nodeId, set: { zone: 'b' } })).version).toBe(labeled.version);
      const types = await eventTypesOf(d, nodeId);
      expect(types.filter((t) => t === 'node.tainted')).toHaveLength(1);
      expect(types.filter((t) => t === 'node.labeled')).toHaveLength(1);
    });

    it('cordoning an offline node twice changes the state it returns to once', async () => {
      const { poolId } = await seedPool(d, 'noop-offline');
      const node = await addNode(d, poolId, 'no-a', l40sx4());
      d.clock.advance(120);
      await runFleetController(d.db, d.clock.now());
      expect((await getNode(d, node.nodeId)).state).toBe('offline');
      const first = await d.api('nodes.cordon', { nodeId: node.nodeId });
      const second = await d.api('nodes.cordon', { nodeId: node.nodeId, ifVersion: first.version });
      expect(second.version).toBe(first.version);
      expect((await eventTypesOf(d, node.nodeId)).filter((t) => t === 'node.cordoned')).toHaveLength(1);
      expect((await heartbeat(d, node.credential)).state).toBe('cordoned');
    });

    it('offering a pool to a tenant it is offered to, and withdrawing an offer not made, succeed as they are', async () => {
      const { poolId } = await seedPool(d, 'noop-offer');
      const pool = await d.api('pools.get', { poolId });
      expect(pool.offeredTo).toEqual(['acme', 'globex']);
      const offered = await d.api('pools.offer', { poolId, offerTenantId: 'acme', ifVersion: pool.version });
      expect(offered).toMatchObject({ version: pool.version, offeredTo: ['acme', 'globex'] });
      await d.api('pools.unoffer', { poolId, offerTenantId: 'globex', ifVersion: pool.version });
      const withdrawn = await d.api('pools.get', { poolId });
      expect(withdrawn).toMatchObject({ version: pool.version + 1, offeredTo: ['acme'] });
      const again = await d.api('pools.unoffer', {
        poolId,
        offerTenantId: 'globex',
        ifVersion: withdrawn.version,
      });
      expect(again).toMatchObject({ version: withdrawn.version, offeredTo: ['acme'] });
      const types = await eventTypesOf(d, poolId);
      expect(types.filter((t) => t === 'pool.offered')).toHaveLength(2); // seedPool's two
      expect(types.filter((t) => t === 'pool.unoffered')).toHaveLength(1);
    });

    it('pools update, sites update and quotas set to what they are already', async () => {
      const { siteId, poolId } = await seedPool(d, 'noop-update');
      const pool = await d.api('pools.get', { poolId });
      const site = await d.api('sites.get', { siteId });
      const samePool = { poolId, name: pool.name, removeLabels: ['nosuch'], ifVersion: pool.version };
      expect((await d.api('pools.update', samePool)).version).toBe(pool.version);
      const sameSite = { siteId, region: site.region, labels: {}, ifVersion: site.version };
      expect((await d.api('sites.update', sameSite)).version).toBe(site.version);
      const quota = { poolId, subjectTenantId: 'acme', resource: 'gpus' };
      expect(await d.api('quotas.set', { ...quota, limit: null })).toMatchObject({ limit: null, version: 0 });
      expect((await d.api('quotas.set', { ...quota, limit: 3 })).version).toBe(1);
      expect((await d.api('quotas.set', { ...quota, limit: 3, ifVersion: 1 })).version).toBe(1);
      const poolEvents = (await eventTypesOf(d, poolId)).filter(
        (t) => t === 'quota.set' || t === 'pool.updated',
      );
      expect(poolEvents).toEqual(['quota.set']);
      expect(await eventTypesOf(d, siteId)).toEqual(['site.created']);
    });
  });

  describe('3. offers and quotas name tenants IAM knows', () => {
    it('refuses an unknown tenant and stores nothing; withdrawing an offer still works', async () => {
      const { poolId } = await seedPool(d, 'unknown-tenant');
      const before = await d.api('pools.get', { poolId });
      expect(await d.fails('pools.offer', { poolId, offerTenantId: 'nosuch' })).toMatchObject({
        code: 'NOT_FOUND',
        message: 'tenant nosuch does not exist',
        details: { field: 'offerTenantId' },
      });
      expect(
        await d.fails('quotas.set', { poolId, subjectTenantId: 'nosuch', resource: 'gpus', limit: 3 }),
      ).toMatchObject({ code: 'NOT_FOUND', message: 'tenant nosuch does not exist' });
      const after = await d.api('pools.get', { poolId });
      expect(after).toMatchObject({ version: before.version, offeredTo: before.offeredTo });
      expect(await d.fails('quotas.get', { poolId, subjectTenantId: 'nosuch' })).toMatchObject({
        code: 'NOT_FOUND',
        message: 'tenant nosuch does not exist',
        details: { field: 'subjectTenantId' },
      });
      // Withdrawing an offer works for any tenant (one since deleted included): there is nothing to store.
      await d.api('pools.unoffer', { poolId, offerTenantId: 'nosuch' });
    });
  });

  describe('4. nodes delete says what works', () => {
    it('a cordoned node that holds reservations: wait or release them, or retire with --force; each works', async () => {
      const { poolId } = await seedPool(d, 'del-hint');
      const a = await addNode(d, poolId, 'dh-a', l40sx4());
      const onA = await reserve(poolId, 4);
      const b = await addNode(d, poolId, 'dh-b', l40sx4());
      const onB = await reserve(poolId, 4);
      for (const { nodeId } of [a, b]) {
        await d.api('nodes.cordon', { nodeId });
        const refused = await d.fails('nodes.delete', { nodeId });
        expect(refused).toMatchObject({
          code: 'INVALID_STATE',
          message: `node ${nodeId} still holds reservations`,
        });
        expect(refused.hint).not.toContain('Drain');
        expect(refused.hint).toContain('released');
        expect(refused.hint).toContain('retire it with --force');
      }
      // Retired with force: its reservation ends, and it is deleted.
      await d.api('nodes.retire', { nodeId: a.nodeId, force: true });
      expect(await d.api('nodes.delete', { nodeId: a.nodeId })).toEqual({ id: a.nodeId, deleted: true });
      const ended = await d.api('reservations.get', { reservationId: onA.id }, ACME);
      expect(ended.endReason).toBe('node-retired');
      // Its reservation released: the cordoned node is deleted.
      await release(onB.id);
      expect(await d.api('nodes.delete', { nodeId: b.nodeId })).toEqual({ id: b.nodeId, deleted: true });
    });
  });

  describe('5. the hints of refusals point at something that exists', () => {
    it('approving or rejecting a decided join request, and a bad node credential or claim secret', async () => {
      const { poolId } = await seedPool(d, 'hints');
      const { token } = await d.api('joinTokens.create', { poolId, uses: 2 });
      const ask = (hostname: string) =>
        d.api('nodes.join', { joinToken: token, hostname, inventory: nodeInventory() }, '');
      const asked = await ask('hint-a');
      const { nodeId } = await d.api('joinRequests.approve', { joinRequestId: asked.joinRequestId });
      const madeNode = `It made node ${nodeId}: see it with "better-compute nodes get ${nodeId}".`;
      expect(await d.fails('joinRequests.approve', { joinRequestId: asked.joinRequestId })).toMatchObject({
        code: 'INVALID_STATE',
        hint: madeNode,
      });
      const other = await ask('hint-b');
      await d.api('joinRequests.reject', { joinRequestId: other.joinRequestId, reason: 'unknown host' });
      const rejected = await d.fails('joinRequests.approve', { joinRequestId: other.joinRequestId });
      expect(rejected.hint).toContain('(unknown host)');
      expect(rejected.hint).toContain('join-requests list --state pending');
      // Through the CLI, the server's hint is the one printed.
      const printed = await run(['join-requests', 'reject', asked.joinRequestId]);
      expect(printed.code).toBe(1);
      expect(printed.err).toContain(`hint: ${madeNode}`);
      expect(printed.err.join('\n')).not.toContain('get command');
      // The node daemon's routes take no IAM credential, so the way out is not auth login.
      const forged = `${nodeId}.${'x'.repeat(43)}`;
      const failures = [
        await d.fails('nodes.heartbeat', { nodeCredential: forged }, ''),
        await d.fails('nodes.claim', { joinRequestId: asked.joinRequestId, claimSecret: 'y'.repeat(43) }, ''),
      ];
      for (const failure of failures) {
        expect(failure.code).toBe('UNAUTHENTICATED');
        expect(failure.hint).toContain('better-compute join-tokens create');
        expect(failure.hint).not.toContain('auth login');
      }
    });
  });

  describe('6 and 7. a revoked token and an archived pool admit no machine, and say so', () => {
    it('revoking a join token rejects the join requests made with it that wait', async () => {
      const { poolId } = await seedPool(d, 'revoke');
      const minted = await d.api('joinTokens.create', { poolId, uses: 3 });
      const ask = (hostname: string) =>
        d.api('nodes.join', { joinToken: minted.token, hostname, inventory: nodeInventory() }, '');
      const a = await ask('rv-a');
      const b = await ask('rv-b');
      const admitted = await d.api('joinRequests.approve', { joinRequestId: b.joinRequestId });
      const tokenId = minted.joinToken.id;
      expect(await d.api('joinTokens.revoke', { joinTokenId: tokenId })).toMatchObject({ state: 'revoked' });
      expect(await d.fails('joinRequests.approve', { joinRequestId: a.joinRequestId })).toMatchObject({
        code: 'INVALID_STATE',
        message: `join request ${a.joinRequestId} is already rejected`,
      });
      const claimA = { joinRequestId: a.joinRequestId, claimSecret: a.claimSecret };
      expect(await d.api('nodes.claim', claimA, '')).toMatchObject({
        state: 'rejected',
        reason: 'join token revoked',
      });
      // The approved one keeps its node, and its daemon still collects its credential.
      const claimB = { joinRequestId: b.joinRequestId, claimSecret: b.claimSecret };
      expect((await d.api('nodes.claim', claimB, '')).nodeId).toBe(admitted.nodeId);
      expect(await eventTypesOf(d, a.joinRequestId)).toEqual(['joinRequest.created', 'joinRequest.rejected']);
      expect(await eventTypesOf(d, tokenId)).toEqual(['joinToken.created', 'joinToken.revoked']);
      // Revoked again: nothing more happens.
      await d.api('joinTokens.revoke', { joinTokenId: tokenId });
      expect(await eventTypesOf(d, tokenId)).toEqual(['joinToken.created', 'joinToken.revoked']);
    });

    it('archiving a pool revokes its join tokens and rejects their waiting requests', async () => {
      const { poolId } = await seedPool(d, 'archive-tokens');
      const open = await d.api('joinTokens.create', { poolId, uses: 2 });
      const ask = (hostname: string) =>
        d.api('nodes.join', { joinToken: open.token, hostname, inventory: nodeInventory() }, '');
      const asked = await ask('at-a');
      await d.api('pools.archive', { poolId });
      expect((await d.api('joinTokens.list', { poolId })).items).toEqual([
        expect.objectContaining({ id: open.joinToken.id, state: 'revoked' }),
      ]);
      expect((await d.api('joinRequests.list', { poolId })).items).toEqual([
        expect.objectContaining({ id: asked.joinRequestId, state: 'rejected', reason: 'pool archived' }),
      ]);
      // The join route answers it as it answers every revoked token.
      const refused = await d.fails(
        'nodes.join',
        { joinToken: open.token, hostname: 'at-b', inventory: nodeInventory() },
        '',
      );
      expect(refused).toMatchObject({
        code: 'UNAUTHENTICATED',
        message: 'the join token is unknown, expired, used up or revoked',
      });
      expect(await eventTypesOf(d, open.joinToken.id)).toEqual(['joinToken.created', 'joinToken.revoked']);
      const listed = (await run(['join-tokens', 'list', '--pool', poolId])).out.join('\n');
      expect(listed).toMatch(new RegExp(`${open.joinToken.id}\\s+${poolId}\\s+revoked`));
    });
  });

  describe('8. sites delete', () => {
    it('a site whose pools are all archived is kept, and the refusal says why and what to do instead', async () => {
      const { siteId, poolId } = await seedPool(d, 'site-kept');
      await d.api('pools.archive', { poolId });
      const refused = await d.fails('sites.delete', { siteId });
      expect(refused).toMatchObject({
        code: 'INVALID_STATE',
        message: `site ${siteId} has 1 pool(s), 0 of them active; a site that has had a pool is kept`,
        details: { pools: 1, activePools: 0, poolId },
      });
      expect(refused.hint).not.toContain('move its pools');
      expect(refused.hint).toContain('sites update');
      const empty = await d.api('sites.create', { name: 'site-empty' });
      expect(await d.api('sites.delete', { siteId: empty.id })).toEqual({ id: empty.id, deleted: true });
    });
  });

  describe('9. the CLI removes labels', () => {
    it('sites update and pools update --remove-label KEY, down to no labels', async () => {
      const site = await json(['sites', 'create', 'lbl-site', '--label', 'tier=gold,zone=a']);
      const one = await json(['sites', 'update', site.id, '--remove-label', 'tier']);
      expect(one).toMatchObject({ labels: { zone: 'a' }, version: 2 });
      const none = await json(['sites', 'update', site.id, '--remove-label', 'zone', '--if-version', '2']);
      expect(none).toMatchObject({ labels: {}, version: 3 });
      expect((await json(['sites', 'update', site.id, '--remove-label', 'zone'])).version).toBe(3);
      const labels = { a: '1', b: '2' };
      const pool = await d.api('pools.create', { siteId: site.id, name: 'lbl-pool', labels });
      const cleared = await json(['pools', 'update', pool.id, '--remove-label', 'a,b']);
      expect(cleared).toMatchObject({ labels: {}, version: 2 });
      // --label still replaces them all; a key both given and removed is refused, not guessed at.
      const both = await run(['pools', 'update', pool.id, '--label', 'c=3,d=4', '--remove-label', 'd']);
      expect(both.code).toBe(2);
      expect(both.err[0]).toMatch(/^INVALID_ARGUMENT: .*\bd\b"? is both set/);
      expect((await d.api('pools.get', { poolId: pool.id })).labels).toEqual({});
      // An empty --label is no change asked for, and the hint names the way.
      const nothing = await run(['sites', 'update', site.id, '--label', '']);
      expect(nothing).toMatchObject({ code: 2 });
      expect(nothing.err).toEqual([
        'INVALID_ARGUMENT: sites update needs something to change: --name, --region, --description or --label',
        'hint: Run "better-compute help sites update" for its flags and examples; --remove-label KEY removes a label.',
      ]);
      expect((await run(['pools', 'update', pool.id, '--label', ''])).err[1]).toContain(
        '--remove-label KEY removes a label',
      );
      for (const group of ['sites', 'pools']) {
        expect(await help(group, 'update')).toMatch(
          /--remove-label KEY\s+A label key to remove, the other labels staying; remove every key to clear them \(repeatable, or comma-separated\)/,
        );
      }
    });
  });

  describe('10. words that say what happens', () => {
    it('help says uncordon takes draining nodes, and pools --label says repeatable once', async () => {
      expect(await help('nodes', 'uncordon')).toContain('Uncordon a cordoned, draining or drained node');
      for (const verb of ['create', 'update']) {
        const lines = (await help('pools', verb)).split('\n');
        const line = lines.find((l) => l.trimStart().startsWith('--label'))!;
        expect(line.match(/repeatable/g)).toHaveLength(1);
      }
      // As it says: a draining node is uncordoned.
      const { poolId } = await seedPool(d, 'uncordon-draining');
      const node = await addNode(d, poolId, 'ud-a', l40sx4());
      const held = await reserve(poolId, 1);
      expect((await d.api('nodes.drain', { nodeId: node.nodeId })).state).toBe('draining');
      expect((await d.api('nodes.uncordon', { nodeId: node.nodeId })).state).toBe('ready');
      await release(held.id);
    });

    it('the heartbeat of a draining node coming back answers drained when that call drained it', async () => {
      const { poolId } = await seedPool(d, 'back-drained');
      const node = await addNode(d, poolId, 'bd-a', l40sx4());
      const held = await reserve(poolId, 1);
      await d.api('nodes.drain', { nodeId: node.nodeId });
      d.clock.advance(120);
      await runFleetController(d.db, d.clock.now());
      expect((await getNode(d, node.nodeId)).state).toBe('offline');
      await release(held.id);
      expect((await heartbeat(d, node.credential)).state).toBe('drained');
      expect((await getNode(d, node.nodeId)).state).toBe('drained');
    });
  });

  /** Until a statement of another connection waits for a node's row lock (`what` names the call). */
  async function untilWaitingForNodeLock(what: string): Promise<void> {
    for (let waited = 0; ; waited += 20) {
      const waiting = await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity
        where wait_event_type = 'Lock' and query ilike '%from "compute"."nodes"%for update%'`.execute(d.db);
      if (waiting.rows[0]!.n > 0) return;
      if (waited > 10_000) throw new Error(`${what} never waited for the node's lock`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  describe('11. what capacity, the event log and the page flags say', () => {
    it('capacity counts the free GPUs of a node whose inventory waits as unavailable', async () => {
      const { poolId } = await seedPool(d, 'cap-waiting');
      const node = await addNode(d, poolId, 'cw-a', l40sx4());
      const held = await reserve(poolId, 2);
      const capacity = async () => (await d.api('capacity.get', { poolId }, ACME)).items[0];
      expect(await capacity()).toMatchObject({ total: 4, reserved: 2, free: 2, unavailable: 0 });
      await heartbeat(d, node.credential, nodeInventory(l40sx4().slice(0, 1)));
      // Nothing may be placed on its two idle GPUs until the change is in use.
      expect(await capacity()).toMatchObject({ total: 4, reserved: 2, free: 0, unavailable: 2 });
      await release(held.id);
      expect(await capacity()).toMatchObject({ total: 1, reserved: 0, free: 1, unavailable: 0 });
      // A taint of the operator's own keeps the GPUs free: a request that tolerates it may use them.
      await d.api('nodes.taint', {
        nodeId: node.nodeId,
        add: [{ key: 'maintenance', effect: 'NoSchedule' }],
      });
      expect(await capacity()).toMatchObject({ free: 1, unavailable: 0 });
    });

    it('a queued reservation that ends without starting is recorded as cancelled, not released', async () => {
      const { poolId } = await seedPool(d, 'cancelled-events');
      await addNode(d, poolId, 'ce-a', l40sx4());
      const running = await reserve(poolId, 4);
      const mine = await reserve(poolId, 4);
      const withdrawn = await reserve(poolId, 2);
      expect([mine.state, withdrawn.state]).toEqual(['queued', 'queued']);
      // Its tenant withdraws one; the pool's offer is withdrawn under the other.
      expect(await release(mine.id)).toMatchObject({ state: 'ended', endReason: 'cancelled' });
      await d.api('pools.unoffer', { poolId, offerTenantId: 'acme' });
      await release(running.id);
      expect(await d.api('reservations.get', { reservationId: withdrawn.id }, ACME)).toMatchObject({
        state: 'ended',
        endReason: 'cancelled',
      });
      for (const id of [mine.id, withdrawn.id])
        expect((await eventTypesOf(d, id)).at(-1)).toBe('reservation.cancelled');
      expect((await eventTypesOf(d, running.id)).at(-1)).toBe('reservation.released');
    });

    // The locked path places from a read taken before it locks the nodes. Here, between the two, the
    // reservation on the node moves from one NVLink group to the other (as when one ends and another
    // takes the first group): the node's free count is the same, the group placed on is now full.
    // The nodes table is locked so that the reserve stops between its read and its lock.
    it.runIf(kind === 'postgres')(
      'a reserve whose group filled between placement and lock is placed again, not an INTERNAL',
      async () => {
        const { poolId } = await seedPool(d, 'stale-group');
        const node = await addNode(d, poolId, 'sg-a', a100x8(`${poolId}-a`, `${poolId}-b`));
        const first = await d.api(
          'reservations.create',
          { poolId, gpus: 4, durationSeconds: HOUR, nvlink: true },
          ACME,
        );
        const firstGroup = first.binding[0].gpuIndices[0] < 4 ? 0 : 1;
        const otherGroup = 1 - firstGroup;
        const indicesOf = (group: number) => [0, 1, 2, 3].map((i) => i + group * 4);
        let second: Promise<any> | undefined;
        await d.db.transaction().execute(async (trx) => {
          await sql`lock table compute.nodes in exclusive mode`.execute(trx);
          second = d.api(
            'reservations.create',
            { poolId, gpus: 4, durationSeconds: HOUR, nvlink: true },
            ACME,
          );
          // Until the reserve waits for the node's lock: it has placed on the other group.
          await untilWaitingForNodeLock('the reserve');
          // The first reservation moves to the other group; the node's free count stays 4.
          const slots = (holder: string | null) =>
            sql`array[${sql.join([0, 1, 2, 3].map(() => sql`${holder}::text`))}]`;
          await sql`update compute.gpu_groups set holders = ${slots(first.id)}, free = 0
            where node_id = ${node.nodeId} and group_no = ${otherGroup}`.execute(trx);
          await sql`update compute.gpu_groups set holders = ${slots(null)}, free = 4
            where node_id = ${node.nodeId} and group_no = ${firstGroup}`.execute(trx);
          await sql`update compute.gpu_bindings set group_no = ${otherGroup}, gpu_indices = ${indicesOf(otherGroup)}::int[],
              nvlink_domain = ${`${poolId}-${otherGroup ? 'b' : 'a'}`}
            where reservation_id = ${first.id}`.execute(trx);
        });
        const placed = await second!;
        expect(placed).toMatchObject({
          state: 'active',
          binding: [expect.objectContaining({ nodeId: node.nodeId, gpuIndices: indicesOf(firstGroup) })],
        });
        expect(await checkAll(d.db, 0, new Map(), poolId)).toEqual([]);
        for (const r of [first, placed]) await release(r.id);
      },
    );

    // Two transactions that wait on each other: PostgreSQL aborts one (40P01). Here the test holds
    // the node and then asks for its pool, while a cordon holds the pool and waits for the node; the
    // cordon is the one aborted: the test's own session looks for deadlocks only after 30 s, so the
    // cordon's (after the server's 1 s) finds it first even on a loaded host. It kept nothing, and
    // runs again once the test's transaction has ended, instead of answering INTERNAL.
    it.runIf(kind === 'postgres')(
      'a call chosen as a deadlock’s victim runs again and succeeds',
      async () => {
        const { poolId } = await seedPool(d, 'deadlock-victim');
        const node = await addNode(d, poolId, 'dv-a', l40sx4());
        let cordon: Promise<any> | undefined;
        await d.db.transaction().execute(async (trx) => {
          await sql`set local deadlock_timeout = '30s'`.execute(trx);
          await sql`select id from compute.nodes where id = ${node.nodeId} for update`.execute(trx);
          cordon = d.api('nodes.cordon', { nodeId: node.nodeId });
          await untilWaitingForNodeLock('the cordon');
          await sql`select id from compute.pools where id = ${poolId} for no key update`.execute(trx);
        });
        expect(await cordon!).toMatchObject({ state: 'cordoned' });
        expect(await eventTypesOf(d, node.nodeId)).toContain('node.cordoned');
      },
    );

    it('an empty --cursor is refused by every list, not taken for the first page', async () => {
      for (const list of [
        ['reservations', 'list'],
        ['pools', 'list'],
        ['nodes', 'list'],
        ['usage', 'list'],
        ['sites', 'list'],
      ]) {
        const result = await run([...list, '--cursor', '']);
        expect(result.code, list.join(' ')).toBe(2);
        expect(result.err[0], list.join(' ')).toMatch(/^INVALID_ARGUMENT: cursor/);
      }
    });
  });
});
