/**
 * Foundation migration 0002 makes an event's position its primary key: the events on record stay,
 * a position is still unique, and an id needs no index of its own. Migration 0005 stores
 * idempotency keys compactly: keys kept from before still replay their answers.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '@better-compute/core';
import { migrate, openDatabase } from '@better-compute/db';
import { type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { foundationMigrations } from '../src/db/migrations.js';
import type { ComputeTables } from '../src/db/tables.js';
import { claimIdempotencyKey, packAnswer, unpackAnswer } from '../src/http/idempotency.js';

describe('foundation migration 0002_event_position_key', () => {
  it('keeps the events on record and keys them by position', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db;
    try {
      const first = foundationMigrations.migrations.findIndex((m) => m.name === '0002_event_position_key');
      await migrate(db, [{ module: 'compute', migrations: foundationMigrations.migrations.slice(0, first) }]);
      await sql`insert into compute.events (id, tx_id, tx_index, tenant_id, type, subject_type)
        values ('event_a', '100', 0, 'acme', 'reservation.created', 'reservation'),
               ('event_b', '100', 1, 'acme', 'reservation.activated', 'reservation')`.execute(db);
      await migrate(db, [foundationMigrations]);
      const kept = await sql<{ id: string }>`select id from compute.events order by tx_id, tx_index`.execute(
        db,
      );
      expect(kept.rows.map((r) => r.id)).toEqual(['event_a', 'event_b']);
      const key = await sql<{ column: string }>`
        select a.attname as column from pg_index i
        join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
        where i.indrelid = 'compute.events'::regclass and i.indisprimary
        order by array_position(i.indkey::int2[], a.attnum)`.execute(db);
      expect(key.rows.map((r) => r.column)).toEqual(['tx_id', 'tx_index']);
      const indexedById = await sql<{ n: number }>`
        select count(*)::int as n from pg_indexes
        where schemaname = 'compute' and tablename = 'events' and indexdef like '%(id)%'`.execute(db);
      expect(indexedById.rows[0]!.n).toBe(0);
      await expect(
        sql`insert into compute.events (id, tx_id, tx_index, tenant_id, type, subject_type)
          values ('event_c', '100', 1, 'acme', 'reservation.released', 'reservation')`.execute(db),
      ).rejects.toMatchObject({ code: '23505' });
    } finally {
      await database.close();
    }
  });
});

describe('foundation migration 0005_idempotency_compact', () => {
  it('keeps the keys on record, and they replay their answers', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db as Kysely<ComputeTables>;
    try {
      const first = foundationMigrations.migrations.findIndex((m) => m.name === '0005_idempotency_compact');
      await migrate(db, [{ module: 'compute', migrations: foundationMigrations.migrations.slice(0, first) }]);
      const scope = { tenantId: 'acme', principalId: 'usr_1', method: 'reservations.create', key: 'k-1' };
      const hex = (text: string) => createHash('sha256').update(text).digest('hex');
      const input = { tenantId: 'acme', gpus: 2 };
      const answer = { id: 'rsv_1', gpus: 2, state: 'active', binding: [{ nodeId: 'node_1' }] };
      const now = new Date('2026-03-01T00:00:00Z');
      await sql`insert into compute.idempotency_keys (scope_hash, tenant_id, method, input_hash, response, expires_at)
        values (${hex(canonicalJson(['acme', 'usr_1', 'reservations.create', 'k-1']))}, 'acme',
          'reservations.create', ${hex(canonicalJson(input))}, ${JSON.stringify(answer)},
          ${new Date(now.getTime() + 3_600_000)})`.execute(db);
      await migrate(db, [foundationMigrations]);
      const claim = await db
        .transaction()
        .execute(async (trx) =>
          (await claimIdempotencyKey(trx, scope, { ...input, idempotencyKey: 'k-1' }, now)).settle(),
        );
      expect(claim).toEqual({ kind: 'replay', response: answer });
      // Another input under the kept key is still a conflict.
      await expect(
        db
          .transaction()
          .execute(async (trx) =>
            (await claimIdempotencyKey(trx, scope, { ...input, gpus: 3 }, now)).settle(),
          ),
      ).rejects.toMatchObject({ code: 'CONFLICT' });
      const index = await sql<{ indexdef: string }>`
        select indexdef from pg_indexes where indexname = 'idempotency_keys_expiry'`.execute(db);
      expect(index.rows[0]!.indexdef).toContain('USING brin');
    } finally {
      await database.close();
    }
  });

  it('stores an answer compressed and reads it back as it was', () => {
    const answer = {
      id: 'rsv_01m91n69ts1vb2965pmfrvr8fq',
      tenantId: 'acme',
      binding: [{ nodeId: 'node_01m91n68zv1knmz51s9eqbsqxs', gpuIndices: [0, 1] }],
      note: 'ünïcödé and "quotes"',
      endedAt: null,
    };
    const packed = packAnswer(answer);
    expect(packed[0]).toBe(1);
    expect(packed.length).toBeLessThan(JSON.stringify(answer).length);
    expect(unpackAnswer(packed)).toEqual(answer);
    expect(unpackAnswer(new Uint8Array(packed))).toEqual(answer);
    expect(unpackAnswer(packAnswer(undefined))).toBeNull();
    expect(() => unpackAnswer(Buffer.of(7, 1, 2))).toThrow(/unknown format/);
  });
});
