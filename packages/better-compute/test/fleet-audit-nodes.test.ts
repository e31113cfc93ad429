/**
 * Faults an audit of nodes found through the real CLI: joining nodes cordoned into ready without a
 * heartbeat, inventory cursors and revisions the database refused (INTERNAL), taint values never
 * checked, a key set and removed in one call, zod's own wording, retired nodes relabelled, labels
 * under compute's prefix, no cap on labels and taints, and a hint naming a flag that is not one.
 */
import { testDatabaseKinds } from '@better-compute/db/testing';
import { describe, expect, it } from 'vitest';
import { runFleetController } from '../src/modules/fleet/index.js';
import { cliRunner, scratchDirectory } from './cli-support.js';
import {
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
const NOT_A_CURSOR = 'INVALID_ARGUMENT: cursor: must be a cursor from a previous page';

describe.each(kinds)('fleet audit of nodes on %s', (kind) => {
  const d = suiteDeployment(kind);
  const scratch = scratchDirectory('.tmp-fleet-audit-nodes-');

  /** A node joined with a pre-approved token that has not heartbeated: it is joining. */
  async function joiningNode(poolId: string, hostname: string) {
    const { token } = await d.api('joinTokens.create', { poolId, preApproved: true });
    const joined = await d.api('nodes.join', { joinToken: token, hostname, inventory: nodeInventory() }, '');
    return { nodeId: joined.nodeId as string, credential: joined.nodeCredential as string };
  }

  const { run } = cliRunner(() => d.compute, scratch, OPERATOR_ENV);

  describe('1. only the first heartbeat makes a joining node ready', () => {
    it('cordon, drain and uncordon of a joining node are INVALID_STATE and change nothing', async () => {
      const { poolId } = await seedPool(d, 'audit-joining');
      const node = await joiningNode(poolId, 'aj-a');
      const before = await getNode(d, node.nodeId);
      expect(before.state).toBe('joining');
      for (const [method, verb] of [
        ['nodes.cordon', 'cordoned'],
        ['nodes.drain', 'drained'],
      ] as const) {
        const refused = await d.fails(method, { nodeId: node.nodeId });
        expect(refused).toMatchObject({
          code: 'INVALID_STATE',
          message: `node ${node.nodeId} is joining (no heartbeat yet); a joining node is not ${verb}`,
          details: { state: 'joining' },
        });
        expect(refused.hint).toContain('first heartbeat');
        expect(refused.hint).toContain(`better-compute nodes retire ${node.nodeId}`);
      }
      const uncordon = await d.fails('nodes.uncordon', { nodeId: node.nodeId });
      expect(uncordon).toMatchObject({ code: 'INVALID_STATE', details: { state: 'joining' } });
      expect(uncordon.hint).toContain('first heartbeat');
      expect(await getNode(d, node.nodeId)).toMatchObject({ state: 'joining', version: before.version });
      expect(await eventTypesOf(d, node.nodeId)).toEqual(['node.joining']);
      // The first heartbeat makes it ready; it can be cordoned then.
      expect((await heartbeat(d, node.credential)).state).toBe('ready');
      expect((await d.api('nodes.cordon', { nodeId: node.nodeId })).state).toBe('cordoned');
    });

    it('a joining node that should not join is retired and then deleted, as the hint says', async () => {
      const { poolId } = await seedPool(d, 'audit-joining-out');
      const node = await joiningNode(poolId, 'ajo-a');
      const early = await d.fails('nodes.delete', { nodeId: node.nodeId });
      expect(early.code).toBe('INVALID_STATE');
      expect(early.hint).toContain(`Retire it first (better-compute nodes retire ${node.nodeId})`);
      expect((await d.api('nodes.retire', { nodeId: node.nodeId })).state).toBe('retired');
      // Retiring cleared its credential: it never becomes ready.
      expect((await d.fails('nodes.heartbeat', { nodeCredential: node.credential }, '')).code).toBe(
        'UNAUTHENTICATED',
      );
      expect(await d.api('nodes.delete', { nodeId: node.nodeId })).toEqual({
        id: node.nodeId,
        deleted: true,
      });
    });

    it('the CLI refuses nodes cordon and drain of a joining node with the server’s hint', async () => {
      const { poolId } = await seedPool(d, 'audit-joining-cli');
      const node = await joiningNode(poolId, 'ajc-a');
      for (const verb of ['cordon', 'drain']) {
        const result = await run(['nodes', verb, node.nodeId]);
        expect(result.code).not.toBe(0);
        expect(result.err[0]).toMatch(new RegExp(`^INVALID_STATE: node ${node.nodeId} is joining`));
        expect(result.err[1]).toContain('first heartbeat');
      }
      expect((await getNode(d, node.nodeId)).state).toBe('joining');
      // Before the fix, uncordon then made it ready without a heartbeat.
      expect((await run(['nodes', 'uncordon', node.nodeId])).err[0]).toMatch(/^INVALID_STATE: /);
      expect((await getNode(d, node.nodeId)).state).toBe('joining');
    });
  });

  describe('2. inventory cursors and revisions the list could not have given', () => {
    it('inventory history refuses every cursor that is not a revision, before the database sees it', async () => {
      const { poolId } = await seedPool(d, 'audit-cursor');
      const { nodeId } = await addNode(d, poolId, 'ac-a', l40sx4());
      for (const cursor of ['99999999999999999999999', '2147483648', '-5', '1e3', ' 2', '0', '2.0', '']) {
        const result = await run(['inventory', 'history', nodeId, '--cursor', cursor]);
        expect(result.code, cursor).toBe(2);
        expect(result.err[0], cursor).toBe(NOT_A_CURSOR);
      }
      const refused = await d.fails('inventory.history', { nodeId, cursor: '2147483648' });
      expect(refused).toMatchObject({ code: 'INVALID_ARGUMENT', message: NOT_A_CURSOR.slice(18) });
    });

    it('a cursor from a page still pages, and 2147483647 is a cursor (an empty-ended page)', async () => {
      const { poolId } = await seedPool(d, 'audit-cursor-ok');
      const node = await addNode(d, poolId, 'aco-a', l40sx4());
      await heartbeat(d, node.credential, { ...nodeInventory(), cpuCores: 96 });
      await heartbeat(d, node.credential, { ...nodeInventory(), cpuCores: 128 });
      const first = await d.api('inventory.history', { nodeId: node.nodeId, limit: 2 });
      expect(first.items.map((r: { revision: number }) => r.revision)).toEqual([3, 2]);
      expect(first.nextCursor).toBe('2');
      const second = await d.api('inventory.history', { nodeId: node.nodeId, cursor: first.nextCursor });
      expect(second).toMatchObject({ items: [{ revision: 1 }], nextCursor: null });
      const top = await d.api('inventory.history', { nodeId: node.nodeId, cursor: '2147483647' });
      expect(top.items).toHaveLength(3);
    });

    it('inventory diff refuses revisions past the column, and a missing one points at history', async () => {
      const { poolId } = await seedPool(d, 'audit-diff');
      const node = await addNode(d, poolId, 'ad-a', l40sx4());
      await heartbeat(d, node.credential, { ...nodeInventory(), memoryGiB: 1024 });
      const big = await run(['inventory', 'diff', node.nodeId, '--from', '2147483648']);
      expect(big.code).toBe(2);
      expect(big.err[0]).toBe(
        'INVALID_ARGUMENT: fromRevision: must be a revision number from 1 to 2147483647',
      );
      for (const field of ['fromRevision', 'toRevision']) {
        const refused = await d.fails('inventory.diff', { nodeId: node.nodeId, [field]: 2147483648 });
        expect(refused).toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: `${field}: must be a revision number from 1 to 2147483647`,
        });
      }
      const missing = await run(['inventory', 'diff', node.nodeId, '--from', '5']);
      expect(missing.err.slice(0, 2)).toEqual([
        `NOT_FOUND: node ${node.nodeId} has no inventory revision 5`,
        `hint: Its revisions go from 1 to 2: better-compute inventory history ${node.nodeId} lists them.`,
      ]);
    });
  });

  describe('3. taint values follow the label-value rule', () => {
    it('values with spaces, = , : or controls are refused and nothing is stored', async () => {
      const { poolId } = await seedPool(d, 'audit-taint-value');
      const { nodeId } = await addNode(d, poolId, 'atv-a', l40sx4());
      for (const item of ['k2=hello world', 'k=v=w', 'a=b:c:NoSchedule', 'k4=a\u001bb']) {
        const result = await run(['nodes', 'taint', nodeId, item]);
        expect(result.code, item).toBe(2);
        expect(result.err[0], item).toBe(
          'INVALID_ARGUMENT: add.0.value: must be up to 63 letters, digits, - _ .',
        );
      }
      expect((await getNode(d, nodeId)).taints).toEqual([]);
      // A value as a label's is still taken.
      const ok = await d.api('nodes.taint', { nodeId, add: [{ key: 'gpu-check', value: 'v1.2_a-b' }] });
      expect(ok.taints).toEqual([{ key: 'gpu-check', value: 'v1.2_a-b', effect: 'NoSchedule' }]);
    });
  });

  describe('4. a call that both sets and removes a key is refused', () => {
    it('nodes.label and nodes.taint name the key, with details.field, and change nothing', async () => {
      const { poolId } = await seedPool(d, 'audit-both');
      const { nodeId } = await addNode(d, poolId, 'ab-a', l40sx4(), { x: '0' });
      const before = await getNode(d, nodeId);
      const label = await d.fails('nodes.label', { nodeId, set: { x: '1' }, remove: ['x'] });
      expect(label).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'label x is both set and removed in one call',
        details: { field: 'remove', key: 'x' },
      });
      const taint = await d.fails('nodes.taint', { nodeId, add: [{ key: 't', value: '1' }], remove: ['t'] });
      expect(taint).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'taint t is both added and removed in one call',
        details: { field: 'remove', key: 't' },
      });
      expect(await getNode(d, nodeId)).toMatchObject({
        labels: { x: '0' },
        taints: [],
        version: before.version,
      });
      // Removing a key the call does not set still works.
      const moved = await d.api('nodes.label', { nodeId, set: { y: '1' }, remove: ['x'] });
      expect(moved.labels).toEqual({ y: '1' });
    });

    it('sites.update and pools.update refuse --label a=1 --remove-label a alike', async () => {
      const site = await d.api('sites.create', { name: 'audit-both-s', labels: { a: '0' } });
      const pool = await d.api('pools.create', {
        siteId: site.id,
        name: 'audit-both-pool',
        class: 'gpu',
        labels: { a: '0' },
      });
      for (const [method, ref] of [
        ['sites.update', { siteId: site.id }],
        ['pools.update', { poolId: pool.id }],
      ] as const) {
        const refused = await d.fails(method, { ...ref, labels: { a: '1' }, removeLabels: ['a'] });
        expect(refused, method).toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: 'label a is both set and removed in one call',
          details: { field: 'removeLabels', key: 'a' },
        });
      }
      expect(await d.api('sites.get', { siteId: site.id })).toMatchObject({ labels: { a: '0' }, version: 1 });
      expect(await d.api('pools.get', { poolId: pool.id })).toMatchObject({ labels: { a: '0' }, version: 1 });
    });

    it('through the CLI, each of the three is INVALID_ARGUMENT naming the key', async () => {
      const { poolId, siteId } = await seedPool(d, 'audit-both-cli');
      const { nodeId } = await addNode(d, poolId, 'abc-a', l40sx4());
      for (const argv of [
        ['nodes', 'label', nodeId, 'x=1', '--remove', 'x'],
        ['nodes', 'taint', nodeId, 't=1', '--remove', 't'],
        ['sites', 'update', siteId, '--label', 'a=1', '--remove-label', 'a'],
      ]) {
        const result = await run(argv);
        expect(result.code, argv.join(' ')).toBe(2);
        expect(result.err[0], argv.join(' ')).toMatch(/^INVALID_ARGUMENT: .*\b[xta]\b.*both/);
      }
      expect(await getNode(d, nodeId)).toMatchObject({ labels: {}, taints: [] });
    });
  });

  describe('5. messages that say what was wrong, not zod’s', () => {
    it('a bad label key is named, with what a key must be', async () => {
      const { poolId } = await seedPool(d, 'audit-key');
      const { nodeId } = await addNode(d, poolId, 'ak-a', l40sx4());
      const rule =
        'must be up to 63 letters, digits, - _ . (starting and ending with a letter or digit), optionally after a DNS-name prefix and /, like zone or example.com/rack';
      const site = await d.fails('sites.create', { name: 'audit-key-site', labels: { 'bad label': 'x' } });
      expect(site.message).toBe(`labels.bad label: label key "bad label" ${rule}`);
      const result = await run(['nodes', 'label', nodeId, 'ümlaut=1']);
      expect(result.code).toBe(2);
      expect(result.err[0]).toBe(`INVALID_ARGUMENT: set.ümlaut: label key "ümlaut" ${rule}`);
      expect(result.err[0]).not.toContain('Invalid key in record');
    });

    it('--if-version past the column says what a version is', async () => {
      const { poolId } = await seedPool(d, 'audit-version');
      const { nodeId } = await addNode(d, poolId, 'av-a', l40sx4());
      const message =
        'INVALID_ARGUMENT: ifVersion: must be a version number from 1 to 2147483647, as the resource showed it';
      for (const version of ['99999999999999999999', '2147483648']) {
        const result = await run(['nodes', 'cordon', nodeId, '--if-version', version]);
        expect(result.code, version).toBe(2);
        expect(result.err[0], version).toBe(message);
      }
      expect((await getNode(d, nodeId)).state).toBe('ready');
    });

    it('an empty --cursor of nodes events and inventory history is not a cursor', async () => {
      const { poolId } = await seedPool(d, 'audit-empty-cursor');
      const { nodeId } = await addNode(d, poolId, 'aec-a', l40sx4());
      for (const list of [
        ['nodes', 'events'],
        ['inventory', 'history'],
      ]) {
        const result = await run([...list, nodeId, '--cursor', '']);
        expect(result.code, list.join(' ')).toBe(2);
        expect(result.err[0], list.join(' ')).toBe(NOT_A_CURSOR);
      }
    });
  });

  describe('6. a retired node is retired for good', () => {
    it('nodes label and nodes taint of a retired node are INVALID_STATE, pointing at delete', async () => {
      const { poolId } = await seedPool(d, 'audit-retired');
      const { nodeId } = await addNode(d, poolId, 'ar-a', l40sx4(), { zone: 'a' });
      const retired = await d.api('nodes.retire', { nodeId });
      for (const [method, body] of [
        ['nodes.label', { set: { zone: 'b' } }],
        ['nodes.label', { remove: ['zone'] }],
        ['nodes.taint', { add: [{ key: 'maintenance' }] }],
      ] as const) {
        const refused = await d.fails(method, { nodeId, ...body });
        expect(refused, method).toMatchObject({ code: 'INVALID_STATE', details: { state: 'retired' } });
        expect(refused.message).toMatch(new RegExp(`^node ${nodeId} is retired`));
        expect(refused.hint).toContain(`better-compute nodes delete ${nodeId} --yes`);
      }
      expect(await getNode(d, nodeId)).toMatchObject({
        labels: { zone: 'a' },
        taints: [],
        version: retired.version,
      });
      const cli = await run(['nodes', 'label', nodeId, 'zone=c']);
      expect(cli.err[0]).toMatch(/^INVALID_STATE: /);
      expect(cli.err[1]).toContain('delete it');
    });
  });

  describe('7. label keys under better-compute.io/ are compute’s own', () => {
    it('nodes.label refuses them set and removed, as nodes.taint does', async () => {
      const { poolId } = await seedPool(d, 'audit-prefix');
      const { nodeId } = await addNode(d, poolId, 'ap-a', l40sx4());
      const key = 'better-compute.io/x';
      for (const [body, field] of [
        [{ set: { [key]: '1' } }, 'set'],
        [{ remove: [key] }, 'remove'],
      ] as const) {
        const refused = await d.fails('nodes.label', { nodeId, ...body });
        expect(refused).toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: `label ${key} is under better-compute.io/, which is compute's own`,
          details: { field, key },
        });
        expect(refused.hint).toContain('Use label keys of your own');
      }
      expect((await run(['nodes', 'label', nodeId, `${key}=1`])).err[0]).toBe(
        `INVALID_ARGUMENT: label ${key} is under better-compute.io/, which is compute's own`,
      );
      expect((await getNode(d, nodeId)).labels).toEqual({});
    });

    it('nor does a node get them by joining or at its approval', async () => {
      const { poolId } = await seedPool(d, 'audit-prefix-join');
      const { token } = await d.api('joinTokens.create', { poolId, uses: 2 });
      const labels = { 'better-compute.io/x': '1' };
      const body = { joinToken: token, hostname: 'apj-a', inventory: nodeInventory() };
      expect((await d.fails('nodes.join', { ...body, labels }, '')).code).toBe('INVALID_ARGUMENT');
      const pending = await d.api('nodes.join', body, '');
      const approve = await d.fails('joinRequests.approve', { joinRequestId: pending.joinRequestId, labels });
      expect(approve).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'labels' } });
      const approved = await d.api('joinRequests.approve', { joinRequestId: pending.joinRequestId });
      expect((await getNode(d, approved.nodeId)).labels).toEqual({});
    });
  });

  describe('8. at most 64 labels and 32 taints, counted on the result', () => {
    const many = (n: number, prefix = 'k') =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 'v']));

    it('a node takes at most 64 labels, in one call or over several', async () => {
      const { poolId } = await seedPool(d, 'audit-label-cap');
      const { nodeId } = await addNode(d, poolId, 'alc-a', l40sx4());
      const one = await d.fails('nodes.label', { nodeId, set: many(200) });
      expect(one).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'set: must be at most 64 labels, not 200',
      });
      await d.api('nodes.label', { nodeId, set: many(60) });
      const over = await d.fails('nodes.label', { nodeId, set: many(5, 'extra') });
      expect(over).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'a site, pool or node carries at most 64 labels; this change would leave it 65',
        details: { field: 'set', limit: 64, count: 65 },
      });
      // Removing in the same call makes room.
      const full = await d.api('nodes.label', { nodeId, set: many(5, 'extra'), remove: ['k0'] });
      expect(Object.keys(full.labels)).toHaveLength(64);
      expect((await d.fails('sites.create', { name: 'audit-cap-site', labels: many(65) })).message).toBe(
        'labels: must be at most 64 labels, not 65',
      );
    });

    it('an approval whose labels with the machine’s pass 64 is refused', async () => {
      const { poolId } = await seedPool(d, 'audit-label-cap-join');
      const { token } = await d.api('joinTokens.create', { poolId });
      const pending = await d.api(
        'nodes.join',
        { joinToken: token, hostname: 'alcj-a', inventory: nodeInventory(), labels: many(40) },
        '',
      );
      const refused = await d.fails('joinRequests.approve', {
        joinRequestId: pending.joinRequestId,
        labels: many(30, 'op'),
      });
      expect(refused).toMatchObject({ code: 'INVALID_ARGUMENT', details: { limit: 64, count: 70 } });
      const request = await d.api('joinRequests.list', { state: 'pending', poolId });
      expect(request.items.map((r: { id: string }) => r.id)).toEqual([pending.joinRequestId]);
    });

    it('a node carries at most 32 taints of its own, over two calls too', async () => {
      const { poolId } = await seedPool(d, 'audit-taint-cap');
      const { nodeId } = await addNode(d, poolId, 'atc-a', l40sx4());
      const taints = (n: number, prefix: string) =>
        Array.from({ length: n }, (_, i) => ({ key: `${prefix}${i}` }));
      await d.api('nodes.taint', { nodeId, add: taints(20, 'a') });
      const refused = await d.fails('nodes.taint', { nodeId, add: taints(20, 'b') });
      expect(refused).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'a node carries at most 32 taints; this change would leave it 40',
        details: { field: 'add', limit: 32, count: 40 },
      });
      expect((await getNode(d, nodeId)).taints).toHaveLength(20);
      const swapped = await d.api('nodes.taint', {
        nodeId,
        add: taints(12, 'b'),
        remove: ['a0'],
      });
      expect(swapped.taints).toHaveLength(31);
    });
  });

  describe('9. the retire refusal names the flag', () => {
    it('nodes retire of a node that holds reservations says --force', async () => {
      const { poolId } = await seedPool(d, 'audit-retire');
      const { nodeId } = await addNode(d, poolId, 'are-a', l40sx4());
      const held = await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR }, ACME);
      const refused = await d.fails('nodes.retire', { nodeId });
      expect(refused.code).toBe('INVALID_STATE');
      expect(refused.hint).toContain('retire it with --force');
      const result = await run(['nodes', 'retire', nodeId]);
      expect(result.err[0]).toBe(`INVALID_STATE: node ${nodeId} holds reservations`);
      expect(result.err[1]).toContain('--force');
      await d.api('reservations.release', { reservationId: held.id }, ACME);
    });
  });

  describe('10. a pool filter names a pool of the tenant’s own; an offline node says where it returns', () => {
    it('nodes, join tokens and join requests listed by an unknown or only-offered pool are refused', async () => {
      const { poolId } = await seedPool(d, 'audit-filter');
      await addNode(d, poolId, 'af-a', l40sx4());
      expect((await d.api('nodes.list', { poolId })).items).toHaveLength(1);
      for (const method of ['nodes.list', 'joinTokens.list', 'joinRequests.list']) {
        expect(await d.fails(method, { poolId: 'pool_01jzzzzzzzzzzzzzzzzzzzzzzz' })).toMatchObject({
          code: 'NOT_FOUND',
        });
        // Offered to acme, owned by root: its nodes and joins are the owner's.
        const offered = await d.fails(method, { poolId }, ACME);
        expect(offered).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'not-owner' } });
        expect(offered.hint).toContain('managed by its owner');
      }
      const listed = await run(['nodes', 'list', '--pool', 'pool_01jzzzzzzzzzzzzzzzzzzzzzzz']);
      expect(listed.code).toBe(1);
      expect(listed.err[0]).toMatch(/^NOT_FOUND: /);
    });

    it('an offline node shows the state its next heartbeat returns it to', async () => {
      const { poolId } = await seedPool(d, 'audit-offline');
      const node = await addNode(d, poolId, 'ao-a', l40sx4());
      expect((await getNode(d, node.nodeId)).stateWhenBack).toBeNull();
      d.clock.advance(120);
      await runFleetController(d.db, d.clock.now());
      expect(await getNode(d, node.nodeId)).toMatchObject({ state: 'offline', stateWhenBack: 'ready' });
      await d.api('nodes.cordon', { nodeId: node.nodeId });
      expect(await getNode(d, node.nodeId)).toMatchObject({ state: 'offline', stateWhenBack: 'cordoned' });
      await heartbeat(d, node.credential);
      expect(await getNode(d, node.nodeId)).toMatchObject({ state: 'cordoned', stateWhenBack: null });
    });
  });
});
