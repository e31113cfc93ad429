/**
 * The audit log's seal on PostgreSQL: checkpoints per tenant, proofs that check offline, a late
 * transaction sealed by the next checkpoint, and every kind of tampering named by verify.
 */
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { checkProof } from '../src/audit/check-proof.js';
import { proveEntry } from '../src/audit/prove.js';
import { sealAuditLog } from '../src/audit/seal.js';
import { verifyAuditLog } from '../src/audit/verify.js';
import { verifyNote, parseVerifierKey, publicKeyPinOf } from '../src/audit/note.js';
import { writeAudit } from '../src/db/unit-of-work.js';
import { auditFixture, sealUntil, writeEntries, type AuditFixture } from './audit-support.js';

const kinds = await testDatabaseKinds();

describe.runIf(kinds.includes('postgres'))('the sealed audit log (postgres)', () => {
  let f: AuditFixture;
  beforeAll(async () => {
    f = await auditFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('seals each tenant into its own tree and proves an entry offline', async () => {
    await writeEntries(f.db, 'acme', 5);
    await writeEntries(f.db, 'globex', 2);
    await sealUntil(f, 'acme', 5);
    await sealUntil(f, 'globex', 2);
    await writeEntries(f.db, 'acme', 6, 5);
    await sealUntil(f, 'acme', 11);

    const checkpoints = await f.db
      .selectFrom('compute.audit_checkpoints')
      .selectAll()
      .orderBy('tree_size')
      .execute();
    const acme = checkpoints.filter((c) => c.tenant_id === 'acme');
    expect(Number(acme.at(-1)!.tree_size)).toBe(11);
    const signer = parseVerifierKey(acme.at(-1)!.signer)!;
    expect(signer.name).toBe('test.example/audit/acme');
    expect(verifyNote(acme.at(-1)!.note, signer.name, f.key.publicKey).ok).toBe(true);
    expect(acme.at(-1)!.note.startsWith('test.example/audit/acme\n11\n')).toBe(true);

    const report = await verifyAuditLog(f.db, { tenantId: 'acme', pin: f.pin });
    expect(report).toMatchObject({ ok: true, entries: 11, unsealed: 0, problems: [] });
    expect(report.checkpoints).toBe(acme.length);
    expect((await verifyAuditLog(f.db, { tenantId: 'globex', pin: f.pin })).ok).toBe(true);

    const third = await f.db
      .selectFrom('compute.audit_events')
      .select('id')
      .where('tenant_id', '=', 'acme')
      .where('leaf_index', '=', 2)
      .executeTakeFirstOrThrow();
    const first = Number(acme[0]!.tree_size);
    const proof = await proveEntry(f.db, { tenantId: 'acme', entryId: third.id, consistencyFrom: first });
    const copy = JSON.parse(JSON.stringify(proof));
    expect(checkProof(copy, f.pin)).toMatchObject({
      ok: true,
      entryId: third.id,
      tenant: 'acme',
      leafIndex: 2,
      treeSize: 11,
      consistentFrom: first,
    });
    // Another tenant cannot prove acme's entry, and a wrong pin or any changed field is refused.
    await expect(proveEntry(f.db, { tenantId: 'globex', entryId: third.id })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    const otherPin = publicKeyPinOf(generateKeyPairSync('ed25519').publicKey);
    expect(() => checkProof(copy, otherPin)).toThrow(/pin/);
    const bent = [
      (p: any) => (p.entry.outcome = 'denied'),
      (p: any) => (p.entry.tenant = 'globex'),
      (p: any) => (p.leafIndex = 3),
      (p: any) => (p.treeSize = 12),
      (p: any) => (p.inclusion[0] = Buffer.alloc(32).toString('base64')),
      (p: any) => p.inclusion.pop(),
      (p: any) => (p.checkpoint = p.checkpoint.replace('\n11\n', '\n12\n')),
      (p: any) => (p.consistency.proof = []),
      (p: any) => (p.consistency.fromSize = first + 1),
      (p: any) => (p.format = 'other'),
    ];
    for (const bend of bent) {
      const changed = JSON.parse(JSON.stringify(proof));
      bend(changed);
      expect(() => checkProof(changed, f.pin)).toThrow(expect.objectContaining({ code: 'INVALID_PROOF' }));
    }
  });

  it('leaves a transaction that commits late for the next checkpoint, and seals it then', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const begun = new Promise<void>((resolve) => (started = resolve));
    const late = f.db.transaction().execute(async (trx) => {
      await writeAudit(trx, {
        tenantId: 'initech',
        actor: 'prn_late',
        actorKind: 'person',
        action: 'compute:pools.create',
        method: 'pools.create',
        resource: { type: 'pool' },
        outcome: 'allowed',
        requestId: 'req_late',
      });
      await sql`select 1`.execute(trx);
      started();
      await held;
    });
    await begun;
    await writeEntries(f.db, 'initech', 2);
    const sealed = await sealAuditLog(f.db, { key: f.key, deployment: 'test.example', tenantId: 'initech' });
    expect(sealed.checkpoints.reduce((n, c) => n + c.added, 0)).toBe(0);
    const waiting = await f.db
      .selectFrom('compute.audit_events')
      .select('id')
      .where('tenant_id', '=', 'initech')
      .executeTakeFirstOrThrow();
    await expect(proveEntry(f.db, { tenantId: 'initech', entryId: waiting.id })).rejects.toMatchObject({
      code: 'INVALID_STATE',
      hint: expect.stringContaining('audit checkpoint --tenant initech'),
    });
    release();
    await late;
    await sealUntil(f, 'initech', 3);
    const report = await verifyAuditLog(f.db, { tenantId: 'initech', pin: f.pin });
    expect(report).toMatchObject({ ok: true, entries: 3 });
  });

  describe('tampering', () => {
    async function freshTenant(tenantId: string) {
      await writeEntries(f.db, tenantId, 6);
      await sealUntil(f, tenantId, 4);
      await writeEntries(f.db, tenantId, 2, 6);
      await sealUntil(f, tenantId, 8);
      expect((await verifyAuditLog(f.db, { tenantId, pin: f.pin })).problems).toEqual([]);
      const rows = await f.db
        .selectFrom('compute.audit_events')
        .select(['id', 'leaf_index'])
        .where('tenant_id', '=', tenantId)
        .orderBy('leaf_index')
        .execute();
      const sizes = await f.db
        .selectFrom('compute.audit_checkpoints')
        .select('tree_size')
        .where('tenant_id', '=', tenantId)
        .orderBy('tree_size')
        .execute();
      return Object.assign(
        rows.map((row) => row.id),
        { sizes: sizes.map((row) => Number(row.tree_size)) },
      );
    }
    const problemsOf = async (tenantId: string) =>
      (await verifyAuditLog(f.db, { tenantId, pin: f.pin })).problems;

    it('a changed entry', async () => {
      const ids = await freshTenant('t-change');
      await sql`update compute.audit_events set outcome = 'allowed', error_code = null where id = ${ids[4]}`.execute(
        f.db,
      );
      const problems = await problemsOf('t-change');
      expect(problems).toContainEqual(expect.objectContaining({ kind: 'entry_modified', entryId: ids[4] }));
      expect(problems).toContainEqual(
        expect.objectContaining({ kind: 'root_mismatch', checkpoint: ids.sizes.at(-1) }),
      );
    });

    it('a changed time, by one microsecond', async () => {
      const ids = await freshTenant('t-time');
      await sql`update compute.audit_events set occurred_at = occurred_at + interval '1 microsecond' where id = ${ids[1]}`.execute(
        f.db,
      );
      expect(await problemsOf('t-time')).toContainEqual(
        expect.objectContaining({ kind: 'entry_modified', entryId: ids[1] }),
      );
    });

    it('a deleted entry', async () => {
      const ids = await freshTenant('t-delete');
      await sql`delete from compute.audit_events where id = ${ids[2]}`.execute(f.db);
      expect(await problemsOf('t-delete')).toContainEqual(
        expect.objectContaining({ kind: 'entry_deleted', entryId: ids[2] }),
      );
    });

    it('two entries swapped', async () => {
      const ids = await freshTenant('t-reorder');
      await sql`update compute.audit_events set leaf_index = case id when ${ids[0]} then 1 else 0 end
        where id in (${ids[0]}, ${ids[1]})`.execute(f.db);
      const problems = await problemsOf('t-reorder');
      expect(problems).toContainEqual(expect.objectContaining({ kind: 'entry_moved', entryId: ids[0] }));
      expect(problems).toContainEqual(expect.objectContaining({ kind: 'entry_moved', entryId: ids[1] }));
      // The leaves rewritten to match: the roots no longer do.
      await sql`update compute.audit_leaves set entry_id = case entry_id when ${ids[0]} then ${ids[1]} else ${ids[0]} end,
        leaf_hash = case entry_id when ${ids[0]} then (select leaf_hash from compute.audit_leaves where entry_id = ${ids[1]})
          else (select leaf_hash from compute.audit_leaves where entry_id = ${ids[0]}) end
        where entry_id in (${ids[0]}, ${ids[1]})`.execute(f.db);
      const after = await problemsOf('t-reorder');
      for (const size of ids.sizes) {
        expect(after).toContainEqual(expect.objectContaining({ kind: 'root_mismatch', checkpoint: size }));
      }
      expect(after.some((p) => p.kind === 'entry_moved')).toBe(false);
    });

    it('an entry inserted under a checkpoint', async () => {
      const ids = await freshTenant('t-insert');
      await sql`insert into compute.audit_events
        (id, tenant_id, actor, action, method, resource_type, outcome, request_id, occurred_at, tx_id)
        select 'aud_inserted', tenant_id, 'prn_x', action, method, resource_type, 'allowed', 'req_x',
          occurred_at, tx_id from compute.audit_events where id = ${ids[3]}`.execute(f.db);
      expect(await problemsOf('t-insert')).toContainEqual(
        expect.objectContaining({ kind: 'entry_inserted', entryId: 'aud_inserted' }),
      );
      await sql`update compute.audit_events set leaf_index = 3 where id = 'aud_inserted'`.execute(f.db);
      expect(await problemsOf('t-insert')).toContainEqual(
        expect.objectContaining({ kind: 'entry_inserted', entryId: 'aud_inserted' }),
      );
    });

    it('one byte of a checkpoint note, and a checkpoint re-signed by another key', async () => {
      const { sizes } = await freshTenant('t-note');
      await sql`update compute.audit_checkpoints set note = overlay(note placing
          case substr(note, 40, 1) when 'X' then 'Y' else 'X' end from 40 for 1)
        where tenant_id = 't-note' and tree_size = ${sizes[0]}`.execute(f.db);
      expect(await problemsOf('t-note')).toContainEqual(
        expect.objectContaining({ kind: 'bad_signature', checkpoint: sizes[0] }),
      );
      const forger = generateKeyPairSync('ed25519');
      const { signNote, verifierKey } = await import('../src/audit/note.js');
      const origin = 'test.example/audit/t-note';
      const row = await f.db
        .selectFrom('compute.audit_checkpoints')
        .select('note')
        .where('tenant_id', '=', 't-note')
        .where('tree_size', '=', 8)
        .executeTakeFirstOrThrow();
      const body = row.note.slice(0, row.note.lastIndexOf('\n\n') + 1);
      await sql`update compute.audit_checkpoints set note = ${signNote(body, origin, forger.privateKey, forger.publicKey)},
        signer = ${verifierKey(origin, forger.publicKey)} where tenant_id = 't-note' and tree_size = 8`.execute(
        f.db,
      );
      expect(await problemsOf('t-note')).toContainEqual(
        expect.objectContaining({ kind: 'unknown_signer', checkpoint: 8 }),
      );
    });
  });
});

describe.runIf(kinds.includes('pglite'))('the sealed audit log on PGlite (what dev runs by default)', () => {
  it('seals, verifies, proves and names a change', async () => {
    const f = await auditFixture('pglite');
    try {
      await writeEntries(f.db, 'acme', 3);
      await sealUntil(f, 'acme', 3);
      await writeEntries(f.db, 'acme', 2, 3);
      await sealUntil(f, 'acme', 5);
      expect(await verifyAuditLog(f.db, { tenantId: 'acme', pin: f.pin })).toMatchObject({
        ok: true,
        entries: 5,
      });
      const entry = await f.db
        .selectFrom('compute.audit_events')
        .select('id')
        .where('leaf_index', '=', 4)
        .executeTakeFirstOrThrow();
      const proof = await proveEntry(f.db, { tenantId: 'acme', entryId: entry.id, consistencyFrom: 3 });
      expect(checkProof(JSON.parse(JSON.stringify(proof)), f.pin)).toMatchObject({
        ok: true,
        consistentFrom: 3,
      });
      await sql`update compute.audit_events set method = 'pools.delete' where id = ${entry.id}`.execute(f.db);
      expect((await verifyAuditLog(f.db, { tenantId: 'acme', pin: f.pin })).problems).toContainEqual(
        expect.objectContaining({ kind: 'entry_modified', entryId: entry.id }),
      );
    } finally {
      await f.close();
    }
  }, 120_000);
});
