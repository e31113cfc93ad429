export {
  openDatabase,
  databaseNow,
  redactDatabaseUrl,
  sentWithCommit,
  sendAnsweredLater,
  type AnsweredLater,
  type Database,
  type DatabaseKind,
  type DatabaseOptions,
  type PoolUse,
} from './database.js';
export { PGliteDialect } from './pglite-dialect.js';
export { isTransientConflict, retryTransient } from './retry.js';
export {
  migrate,
  migrationStatus,
  checksumOf,
  type Migration,
  type ModuleMigrations,
  type MigrationStatus,
  type MigrateResult,
} from './migrator.js';
export { listenAt, listenOn, type ListenHandlers, type Listening } from './listen.js';
