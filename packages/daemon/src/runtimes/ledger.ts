/**
 * The ledger of what the daemon made beyond files in its state directory: the processes it started
 * (QEMU, bwrap and a sandbox's first process, slirp4netns), the mounts it made (image roots by
 * loop, sandbox roots by overlay, volumes by loop) and instances' networks (namespace, veth,
 * route, egress element). An entry is written before the thing is made and dropped after it
 * is removed, so a daemon killed at any moment leaves a ledger that names all it left behind
 * (and perhaps something never made, which a sweep finds gone). `<state-dir>/made.json`, 0600,
 * replaced whole at each change; a sweep (`bcd sweep`, a `bcd run --ephemeral` starting or
 * stopping) goes through it after stopping what the state directory's own records name.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { InstanceNetwork } from './instance-network.js';

export type Made =
  /** `start` is the process's start time (field 22 of /proc/<pid>/stat): a reused pid never matches. */
  | { kind: 'process'; pid: number; start: string; what: string }
  | { kind: 'mount'; path: string }
  | { kind: 'network'; net: InstanceNetwork };

/** One entry per thing: the same process, mount point, network or group is recorded once. */
function keyOf(entry: Made): string {
  switch (entry.kind) {
    case 'process':
      return `process:${entry.pid}:${entry.start}`;
    case 'mount':
      return `mount:${entry.path}`;
    case 'network':
      return `network:${entry.net.name}`;
  }
}

/** The start time of process `pid` as the kernel counts it, or null when there is no such process. */
export function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: fields are counted after it.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z') return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

/** Whether `pid` is still the process that started at `start` (alive, not a zombie). */
export function sameProcess(pid: number, start: string): boolean {
  return processStart(pid) === start;
}

export class Ledger {
  readonly file: string;

  constructor(stateDir: string) {
    this.file = join(stateDir, 'made.json');
  }

  entries(): Made[] {
    try {
      const parsed = JSON.parse(readFileSync(this.file, 'utf8')) as { made?: unknown };
      return Array.isArray(parsed.made) ? (parsed.made as Made[]) : [];
    } catch {
      return [];
    }
  }

  /**
   * Replaces the file with `entries`. Read, changed and written in one synchronous step, so two
   * changes in this process never lose one another; written beside and renamed, never half a file.
   */
  private save(entries: Made[]): void {
    const temporary = `${this.file}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify({ made: entries }, null, 1)}\n`, { mode: 0o600 });
    renameSync(temporary, this.file);
  }

  /** Notes a thing about to be made (a process just started: its pid and start time). */
  record(entry: Made): void {
    const entries = this.entries();
    const key = keyOf(entry);
    if (entries.some((e) => keyOf(e) === key)) return;
    this.save([...entries, entry]);
  }

  /** A process just started, recorded with its start time; nothing when it is gone already. */
  recordProcess(pid: number | null | undefined, what: string): void {
    if (!pid) return;
    const start = processStart(pid);
    if (start) this.record({ kind: 'process', pid, start, what });
  }

  /** Drops the entries `match` selects (the thing is gone). */
  forget(match: (entry: Made) => boolean): void {
    const entries = this.entries();
    const kept = entries.filter((entry) => !match(entry));
    if (kept.length !== entries.length) this.save(kept);
  }

  forgetMount(path: string): void {
    this.forget((e) => e.kind === 'mount' && e.path === path);
  }
  forgetProcess(pid: number | null | undefined): void {
    if (pid) this.forget((e) => e.kind === 'process' && e.pid === pid);
  }
  forgetNetwork(name: string): void {
    this.forget((e) => e.kind === 'network' && e.net.name === name);
  }
}
