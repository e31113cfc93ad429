/** Shared by the audit tests: a migrated database, audit entries written as calls write them, sealing. */
import { generateKeyPairSync } from 'node:crypto';
import { migrate } from '@better-compute/db';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import type { Kysely } from 'kysely';
import { foundationMigrations } from '../src/db/migrations.js';
import type { ComputeTables } from '../src/db/tables.js';
import { writeAudit } from '../src/db/unit-of-work.js';
import { sealAuditLog, type AuditSigningKey } from '../src/audit/seal.js';
import { publicKeyPinOf } from '../src/audit/note.js';

export interface AuditFixture {
  database: TestDatabase;
  db: Kysely<ComputeTables>;
  key: AuditSigningKey;
  pin: string;
  close(): Promise<void>;
}

export async function auditFixture(kind: 'postgres' | 'pglite' = 'postgres'): Promise<AuditFixture> {
  const database = await createTestDatabase(kind, 4);
  await migrate(database.db, [foundationMigrations]);
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    database,
    db: database.db as Kysely<ComputeTables>,
    key: { privateKey, publicKey },
    pin: publicKeyPinOf(publicKey),
    close: () => database.close(),
  };
}

/** Writes `count` audit entries for `tenantId`, each in its own transaction, as a call does. */
export async function writeEntries(db: Kysely<ComputeTables>, tenantId: string, count: number, from = 0) {
  for (let i = from; i < from + count; i++) {
    await db.transaction().execute((trx) =>
      writeAudit(trx, {
        tenantId,
        actor: `prn_${i % 3}`,
        actorKind: 'person',
        action: 'compute:reservations.create',
        method: 'reservations.create',
        resource: { type: 'reservation', id: `rsv_${i}` },
        outcome: i % 5 === 4 ? 'denied' : 'allowed',
        errorCode: i % 5 === 4 ? 'ACCESS_DENIED' : undefined,
        requestId: `req_${tenantId}_${i}`,
      }),
    );
  }
}

/**
 * Seals until `tenantId`'s tree holds `size` entries: on a shared server other transactions can
 * hold the snapshot's xmin back for a moment, and an entry is sealed only once it is below it.
 */
export async function sealUntil(fixture: AuditFixture, tenantId: string, size: number): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    await sealAuditLog(fixture.db, { key: fixture.key, deployment: 'test.example', tenantId });
    const last = await fixture.db
      .selectFrom('compute.audit_checkpoints')
      .select('tree_size')
      .where('tenant_id', '=', tenantId)
      .orderBy('tree_size', 'desc')
      .executeTakeFirst();
    if (Number(last?.tree_size ?? 0) >= size) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`the tree of ${tenantId} never reached ${size}`);
}
