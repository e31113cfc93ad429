/**
 * A self-update in progress, as `update.json` in the state directory records it, shared by the
 * daemon (update.ts, which swaps the bundle and reports the outcome) and its supervisor
 * (supervisor.ts, which restarts the daemon and returns to the previous bundle when the new one
 * does not come back healthy). Phases: `trial` (the new bundle is in place; it has until the
 * deadline to reconnect and pass its health check), `healthy` (it did), `rolled-back` (the previous
 * bundle is back, and `reason` says why). `reported` is set once the control plane acknowledged the
 * outcome, so a restart never reports it twice. Node only, no other import: the supervisor bundle
 * stays small.
 */
import { closeSync, copyFileSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface UpdateRecord {
  /** The bcd.update command this update answers. */
  commandId: string;
  from: string;
  to: string;
  phase: 'trial' | 'healthy' | 'rolled-back';
  /** The bundle that was swapped (the file the daemon runs from) and the copy of the one before. */
  bundle: string;
  previous: string;
  startedAt: string;
  /** Past this, a trial that is not healthy is rolled back. */
  deadline: string;
  reason: string | null;
  finishedAt: string | null;
  reported: boolean;
}

const UPDATE_FILE = 'update.json';
/** The exit status a daemon stops with to be started again at once (EX_TEMPFAIL). */
export const RESTART_EXIT_CODE = 75;

export function readUpdate(stateDir: string): UpdateRecord | null {
  try {
    const value = JSON.parse(readFileSync(join(stateDir, UPDATE_FILE), 'utf8')) as UpdateRecord;
    return value && typeof value === 'object' && typeof value.commandId === 'string' ? value : null;
  } catch {
    return null;
  }
}

/** Written beside, synced, renamed over, and the directory synced: never half a record. */
export function writeUpdate(stateDir: string, record: UpdateRecord): void {
  writeFileDurably(join(stateDir, UPDATE_FILE), `${JSON.stringify(record, null, 2)}\n`, 0o600);
}

export function writeFileDurably(path: string, content: string | Uint8Array, mode: number): void {
  const temporary = `${path}.${process.pid}.tmp`;
  const fd = openSync(temporary, 'w', mode);
  try {
    writeSync(fd, typeof content === 'string' ? Buffer.from(content) : content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, path);
  syncDirectory(dirname(path));
}

function syncDirectory(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // A file system that cannot sync a directory: the rename is still atomic.
  }
}

/**
 * Puts the previous bundle back in place (copied beside, synced, renamed over) and records why.
 * The copy stays, so a second rollback finds it too.
 */
export function rollBack(stateDir: string, record: UpdateRecord, reason: string): UpdateRecord {
  const beside = `${record.bundle}.restore.${process.pid}`;
  copyFileSync(record.previous, beside);
  const fd = openSync(beside, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(beside, record.bundle);
  syncDirectory(dirname(record.bundle));
  const next: UpdateRecord = {
    ...record,
    phase: 'rolled-back',
    reason: reason.slice(0, 1000),
    finishedAt: new Date().toISOString(),
  };
  writeUpdate(stateDir, next);
  return next;
}
