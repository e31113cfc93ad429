/**
 * Pools and quotas as an audit through the real CLI found them: a quota read of a tenant that does
 * not exist, owner-only refusals whose hint blamed --tenant, offers of an archived pool, and a
 * taken name that belongs to an archived pool, which pools list hides.
 */
import { testDatabaseKinds } from '@better-compute/db/testing';
import { describe, expect, it } from 'vitest';
import { cliRunner, scratchDirectory } from './cli-support.js';
import { ACME, OPS, seedPool, suiteDeployment } from './fleet-support.js';

const kinds = await testDatabaseKinds();

/** The CLI's own ACCESS_DENIED hint, printed only when the server's error brings none. */
const TENANT_HINT = 'Check --tenant (BETTER_COMPUTE_TENANT)';

describe.each(kinds)('pools and quotas found by the audit on %s', (kind) => {
  const d = suiteDeployment(kind);
  const scratch = scratchDirectory('.tmp-fleet-audit-pools-');

  const cli = cliRunner(() => d.compute, scratch);
  /** Runs the CLI in process as `token` acting in `tenant`. */
  const run = (argv: string[], token = OPS, tenant = 'root') =>
    cli.run(argv, { BETTER_COMPUTE_TOKEN: token, BETTER_COMPUTE_TENANT: tenant });

  describe('1. a quota read names a tenant that exists', () => {
    it('quotas.get of an unknown subject is NOT_FOUND for the owner, as quotas.set and pools.offer are; an offered tenant learns nothing', async () => {
      const { poolId } = await seedPool(d, 'q-subject');
      const unknown = { code: 'NOT_FOUND', message: 'tenant nosuch does not exist' };
      // The owner, who may read any tenant's quotas.
      expect(await d.fails('quotas.get', { poolId, subjectTenantId: 'nosuch' }, OPS)).toMatchObject({
        ...unknown,
        details: { id: 'nosuch', field: 'subjectTenantId' },
      });
      // A tenant offered the pool reads only its own: it learns nothing of which tenants exist
      // (issue 15), so an unknown subject answers as a known one does.
      for (const subject of ['nosuch', 'globex']) {
        expect(await d.fails('quotas.get', { poolId, subjectTenantId: subject }, ACME)).toMatchObject({
          code: 'ACCESS_DENIED',
          details: { reason: 'not-owner' },
        });
      }
      expect(await d.fails('quotas.set', { poolId, subjectTenantId: 'nosuch', limit: 4 })).toMatchObject(
        unknown,
      );
      expect(await d.fails('pools.offer', { poolId, offerTenantId: 'nosuch' })).toMatchObject(unknown);
      // A tenant that exists still reads, with no limit set; absent, the acting tenant is the subject.
      const globex = await d.api('quotas.get', { poolId, subjectTenantId: 'globex' });
      expect(globex.items.map((q: { tenantId: string; limit: null }) => [q.tenantId, q.limit])).toEqual([
        ['globex', null],
        ['globex', null],
      ]);
      expect((await d.api('quotas.get', { poolId }, ACME)).items[0].tenantId).toBe('acme');
      // Through the CLI: the error, not a table of limits "none", and exit 1.
      const printed = await run(['quotas', 'get', '--pool', poolId, '--subject', 'nosuch']);
      expect(printed.code).toBe(1);
      expect(printed.out).toEqual([]);
      expect(printed.err[0]).toBe('NOT_FOUND: tenant nosuch does not exist');
    });
  });

  describe('2. owner-only refusals say who manages the pool and what an offered tenant can do', () => {
    it('offer, unoffer, update, archive, quotas set and join tokens by a tenant offered the pool', async () => {
      const { poolId } = await seedPool(d, 'not-mine');
      const refusals = [
        await d.fails('pools.offer', { poolId, offerTenantId: 'globex' }, ACME),
        await d.fails('pools.unoffer', { poolId, offerTenantId: 'globex' }, ACME),
        await d.fails('pools.update', { poolId, name: 'mine-now' }, ACME),
        await d.fails('pools.archive', { poolId }, ACME),
        await d.fails('quotas.set', { poolId, subjectTenantId: 'acme', limit: 100 }, ACME),
        await d.fails('joinTokens.create', { poolId }, ACME),
      ];
      for (const refused of refusals) {
        expect(refused).toMatchObject({
          code: 'ACCESS_DENIED',
          message: `pool ${poolId} belongs to tenant root; only its owner can change it`,
          details: { reason: 'not-owner', poolId },
        });
        expect(refused.hint).toContain(`managed by its owner, tenant root`);
        expect(refused.hint).toContain(`better-compute reserve --pool ${poolId}`);
        expect(refused.hint).toContain(`better-compute quotas get --pool ${poolId}`);
        expect(refused.hint).not.toContain('--tenant');
      }
      // Reading another tenant's quota: the message does not name the owner, so neither does the hint.
      const read = await d.fails('quotas.get', { poolId, subjectTenantId: 'globex' }, ACME);
      expect(read).toMatchObject({
        code: 'ACCESS_DENIED',
        message: 'only the pool’s owner reads other tenants’ quotas',
        details: { reason: 'not-owner', poolId },
      });
      expect(read.hint).toContain(`better-compute quotas get --pool ${poolId}`);
      expect(read.hint).not.toContain('root');
      // What the hint offers works: acme reads its own quota.
      expect((await d.api('quotas.get', { poolId }, ACME)).items).toHaveLength(2);
      // Nothing changed.
      const pool = await d.api('pools.get', { poolId });
      expect(pool).toMatchObject({ name: 'not-mine', state: 'active', offeredTo: ['acme', 'globex'] });
    });

    it('the CLI prints the server’s hint, not its own about --tenant', async () => {
      const { poolId } = await seedPool(d, 'not-mine-cli');
      const commands = [
        ['pools', 'offer', poolId, '--to', 'globex'],
        ['pools', 'unoffer', poolId, '--to', 'globex'],
        ['pools', 'archive', poolId],
        ['quotas', 'set', '--pool', poolId, '--subject', 'acme', '--limit', '8'],
        ['join-tokens', 'create', '--pool', poolId],
        ['quotas', 'get', '--pool', poolId, '--subject', 'globex'],
      ];
      for (const argv of commands) {
        const printed = await run(argv, ACME, 'acme');
        expect(printed.code, argv.join(' ')).toBe(1);
        // An idempotent create prints its key first.
        expect(
          printed.err.filter((line) => line.startsWith('ACCESS_DENIED: ')),
          argv.join(' '),
        ).toHaveLength(1);
        const hint = printed.err.find((line) => line.startsWith('hint: '));
        expect(hint, argv.join(' ')).toContain(`quotas get --pool ${poolId}`);
        expect(printed.err.join('\n'), argv.join(' ')).not.toContain(TENANT_HINT);
      }
    });
  });

  describe('3. an archived pool is offered to no one new', () => {
    it('offer is INVALID_STATE; unoffer, update and clearing a quota still work; setting one does not', async () => {
      const { poolId } = await seedPool(d, 'arch-offer');
      await d.api('pools.unoffer', { poolId, offerTenantId: 'globex' });
      await d.api('quotas.set', { poolId, subjectTenantId: 'acme', limit: 4 });
      const archived = await d.api('pools.archive', { poolId });
      const refused = await d.fails('pools.offer', { poolId, offerTenantId: 'globex' });
      expect(refused).toMatchObject({
        code: 'INVALID_STATE',
        message: `pool ${poolId} is archived`,
        details: { state: 'archived' },
      });
      expect(refused.hint).toContain('better-compute pools list shows the active ones');
      // Offering a tenant it is offered to already is refused too: the pool takes no new work.
      expect((await d.fails('pools.offer', { poolId, offerTenantId: 'acme' })).code).toBe('INVALID_STATE');
      const after = await d.api('pools.get', { poolId });
      expect(after).toMatchObject({ offeredTo: ['acme'], version: archived.version });
      const printed = await run(['pools', 'offer', poolId, '--to', 'globex']);
      expect(printed.code).toBe(1);
      expect(printed.err.slice(0, 2)).toEqual([
        `INVALID_STATE: pool ${poolId} is archived`,
        'hint: An archived pool takes no new work; better-compute pools list shows the active ones.',
      ]);
      // A quota governs new work, so none is set on an archived pool; clearing one only removes.
      const quota = await d.fails('quotas.set', { poolId, subjectTenantId: 'acme', limit: 8 });
      expect(quota).toMatchObject({ code: 'INVALID_STATE', message: `pool ${poolId} is archived` });
      expect(await d.api('quotas.set', { poolId, subjectTenantId: 'acme', limit: null })).toMatchObject({
        limit: null,
        version: 2,
      });
      // Withdrawing an offer only removes: allowed. So are a new name and labels.
      const withdrawn = await d.api('pools.unoffer', { poolId, offerTenantId: 'acme' });
      expect(withdrawn).toMatchObject({ offeredTo: [], state: 'archived' });
      const renamed = await d.api('pools.update', { poolId, name: 'arch-offer-old', labels: { was: 'x' } });
      expect(renamed).toMatchObject({ name: 'arch-offer-old', labels: { was: 'x' }, state: 'archived' });
    });
  });

  describe('4. a name taken by an archived pool says where that pool is', () => {
    it('pools create and pools update point at pools list --archived only when the pool is archived', async () => {
      const site = await d.api('sites.create', { name: 'names-site' });
      const old = await d.api('pools.create', { siteId: site.id, name: 'p4' });
      await d.api('pools.archive', { poolId: old.id });
      const refused = await d.fails('pools.create', { siteId: site.id, name: 'p4' });
      expect(refused).toMatchObject({
        code: 'ALREADY_EXISTS',
        message: 'a pool named p4 exists',
        details: { id: old.id, state: 'archived' },
      });
      expect(refused.hint).toContain(`archived pool ${old.id}`);
      expect(refused.hint).toContain('better-compute pools list --archived');
      // pools list indeed hides it, and --archived shows it.
      const names = async (includeArchived: boolean) =>
        (await d.api('pools.list', { includeArchived, limit: 100 })).items.map(
          (p: { name: string }) => p.name,
        );
      expect(await names(false)).not.toContain('p4');
      expect(await names(true)).toContain('p4');
      // Renaming another pool to it says the same.
      const other = await d.api('pools.create', { siteId: site.id, name: 'p5' });
      const rename = await d.fails('pools.update', { poolId: other.id, name: 'p4' });
      expect(rename).toMatchObject({ code: 'ALREADY_EXISTS', details: { id: old.id, state: 'archived' } });
      expect(rename.hint).toContain('pools list --archived');
      // An active pool's name: no word of archived pools.
      const active = await d.fails('pools.create', { siteId: site.id, name: 'p5' });
      expect(active).toMatchObject({ code: 'ALREADY_EXISTS', details: { id: other.id, state: 'active' } });
      expect(active.hint).toContain(`better-compute pools get ${other.id}`);
      expect(active.hint).not.toContain('archived');
      // Through the CLI.
      const printed = await run(['pools', 'create', '--site', site.id, '--name', 'p4']);
      expect(printed.code).toBe(1);
      expect(printed.err).toContain('ALREADY_EXISTS: a pool named p4 exists');
      expect(printed.err.find((line) => line.startsWith('hint: '))).toContain('pools list --archived');
      // The way out the hint names: renaming the archived pool frees the name.
      await d.api('pools.update', { poolId: old.id, name: 'p4-archived' });
      expect(await d.api('pools.create', { siteId: site.id, name: 'p4' })).toMatchObject({ state: 'active' });
    });

    it('a site’s taken name keeps the general hint: sites list shows every site', async () => {
      await d.api('sites.create', { name: 'dup-site' });
      const refused = await d.fails('sites.create', { name: 'dup-site' });
      expect(refused).toMatchObject({ code: 'ALREADY_EXISTS', message: 'a site named dup-site exists' });
      const printed = await run(['sites', 'create', 'dup-site']);
      expect(printed.err).toContain('hint: Choose another name, or list what exists; nothing was changed.');
    });
  });
});
