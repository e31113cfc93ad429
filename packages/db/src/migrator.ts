/**
 * Migrations: each module owns an ordered list of SQL migrations. `migrate` applies every module's
 * pending ones in order, in one transaction under an advisory lock, records each with a checksum,
 * and refuses to run when an applied migration was edited since.
 */
import { createHash } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { ComputeError } from '@better-compute/core';

export interface Migration {
  /** Sorts the module's migrations: `0001_init`, `0002_add_labels`. Never renamed once landed. */
  name: string;
  /** Plain SQL that runs on PostgreSQL 15 and on PGlite; never edited once landed. */
  sql: string;
}

export interface ModuleMigrations {
  module: string;
  migrations: readonly Migration[];
}

export interface MigrationStatus {
  module: string;
  name: string;
  state: 'applied' | 'pending' | 'changed';
  appliedAt: string | null;
}

export interface MigrateResult {
  applied: { module: string; name: string }[];
  alreadyApplied: number;
}

const LOCK_KEY = 7_301_146_205; // a fixed advisory-lock key for "better-compute migrate"

export function checksumOf(migration: Migration): string {
  return createHash('sha256').update(migration.sql).digest('hex');
}

// The ledger lives in `public` so it exists before any module's schema does.
const LEDGER_SQL = `create table if not exists public.better_compute_migrations (
  module text not null,
  name text not null,
  checksum text not null,
  applied_at timestamptz not null default now(),
  primary key (module, name)
)`;

interface LedgerRow {
  module: string;
  name: string;
  checksum: string;
  applied_at: Date;
}

function sortedModules(modules: readonly ModuleMigrations[]): ModuleMigrations[] {
  const seen = new Set<string>();
  for (const entry of modules) {
    if (seen.has(entry.module))
      throw new ComputeError('INVALID_CONFIG', `module ${entry.module} is listed twice`);
    seen.add(entry.module);
    const names = entry.migrations.map((m) => m.name);
    if (new Set(names).size !== names.length) {
      throw new ComputeError('INVALID_CONFIG', `module ${entry.module} has two migrations with one name`);
    }
  }
  return modules.map((entry) => ({
    module: entry.module,
    migrations: [...entry.migrations].sort((a, b) => a.name.localeCompare(b.name)),
  }));
}

async function readLedger(db: Kysely<any>): Promise<Map<string, LedgerRow>> {
  const exists = await sql<{
    present: boolean;
  }>`select to_regclass('public.better_compute_migrations') is not null as present`.execute(db);
  if (!exists.rows[0]?.present) return new Map();
  const rows =
    await sql<LedgerRow>`select module, name, checksum, applied_at from public.better_compute_migrations`.execute(
      db,
    );
  return new Map(rows.rows.map((row) => [`${row.module}/${row.name}`, row]));
}

function changedError(module: string, name: string): ComputeError {
  return new ComputeError('INVALID_STATE', `migration ${module}/${name} was edited after it was applied`, {
    details: { module, name },
    hint: 'Restore the migration as it was and add a new migration for the change.',
  });
}

/** Where each known migration stands, without changing anything. */
export async function migrationStatus(
  db: Kysely<any>,
  modules: readonly ModuleMigrations[],
): Promise<MigrationStatus[]> {
  const ledger = await readLedger(db);
  return sortedModules(modules).flatMap((entry) =>
    entry.migrations.map((migration): MigrationStatus => {
      const row = ledger.get(`${entry.module}/${migration.name}`);
      if (!row) return { module: entry.module, name: migration.name, state: 'pending', appliedAt: null };
      const state = row.checksum === checksumOf(migration) ? 'applied' : 'changed';
      return {
        module: entry.module,
        name: migration.name,
        state,
        appliedAt: new Date(row.applied_at).toISOString(),
      };
    }),
  );
}

/** Applies every pending migration, in module order then name order, in one locked transaction. */
export async function migrate(db: Kysely<any>, modules: readonly ModuleMigrations[]): Promise<MigrateResult> {
  const ordered = sortedModules(modules);
  return db.transaction().execute(async (trx) => {
    // Serialises concurrent runners: the second waits here, then finds nothing left to do.
    await sql`select pg_advisory_xact_lock(${LOCK_KEY})`.execute(trx);
    await sql.raw(LEDGER_SQL).execute(trx);
    const ledger = await readLedger(trx);
    const result: MigrateResult = { applied: [], alreadyApplied: 0 };
    for (const entry of ordered) {
      for (const migration of entry.migrations) {
        const row = ledger.get(`${entry.module}/${migration.name}`);
        if (row) {
          if (row.checksum !== checksumOf(migration)) throw changedError(entry.module, migration.name);
          result.alreadyApplied++;
        }
      }
    }
    for (const entry of ordered) {
      for (const migration of entry.migrations) {
        if (ledger.has(`${entry.module}/${migration.name}`)) continue;
        await sql.raw(migration.sql).execute(trx);
        await sql`insert into public.better_compute_migrations (module, name, checksum) values (${entry.module}, ${migration.name}, ${checksumOf(migration)})`.execute(
          trx,
        );
        result.applied.push({ module: entry.module, name: migration.name });
      }
    }
    return result;
  });
}
