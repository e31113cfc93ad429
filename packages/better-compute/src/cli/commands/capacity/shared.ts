/**
 * Helpers the capacity and events commands share. Light on purpose: command files load it for
 * help, so anything heavy is imported inside `run`.
 */
import { ComputeError } from '@better-compute/core';
import type { GlobalOptions } from '../../define.js';
import { CliError } from '../../errors.js';

/** A fresh idempotency key, one per run unless --key is given. */
export async function newIdempotencyKey(): Promise<string> {
  const { randomUUID } = await import('node:crypto');
  return `cli-${randomUUID()}`;
}

/** Checks a --key before anything is sent: what the server's idempotencyKey schema takes. */
export function checkKey(commandName: string, key: string): string {
  if (!/^[A-Za-z0-9._:-]{8,200}$/.test(key)) {
    throw new CliError(
      'INVALID_ARGUMENT',
      `--key must be 8 to 200 letters, digits and . _ : - (got "${key}")`,
      { hint: `Run "better-compute help ${commandName}" for its flags.`, details: { field: 'key' } },
    );
  }
  return key;
}

/** `--label k=v` values as a record; a value without `=` is a usage error. */
export function parseLabels(values: readonly string[], field = 'label'): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const value of values) {
    const eq = value.indexOf('=');
    if (eq <= 0) {
      throw new CliError('INVALID_ARGUMENT', `--${field} takes key=value (got "${value}")`, {
        details: { field },
      });
    }
    labels[value.slice(0, eq).trim()] = value.slice(eq + 1).trim();
  }
  return labels;
}

/** Whether the result is printed as a table: `--format table`, or a table default without --format/--query. */
export function showsTable(global: GlobalOptions, tableByDefault = true): boolean {
  if (global.format !== undefined) return global.format === 'table';
  return tableByDefault && global.query === undefined;
}

/**
 * A page as the table shows it: the items mapped to readable columns, the cursor kept so the table
 * ends with `(more rows: --cursor …)`. JSON formats get the page untouched.
 */
export function pageView<T>(
  page: { items: T[]; nextCursor: string | null },
  global: GlobalOptions,
  columns: (item: T) => Record<string, unknown>,
): unknown {
  if (!showsTable(global)) return page;
  return { items: page.items.map(columns), nextCursor: page.nextCursor };
}

/** Seconds as a short duration: 3600 → 1h, 5400 → 1h30m. */
export function shortDuration(seconds: number): string {
  const parts: string[] = [];
  let rest = seconds;
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('') || '0s';
}

/** Validates a --selector locally with the server's own parser (INVALID_ARGUMENT, exit 2). */
export async function checkSelector(selector: string | undefined): Promise<void> {
  if (selector === undefined) return;
  const { parseSelector } = await import('../../../modules/capacity/selector.js');
  try {
    parseSelector(selector);
  } catch (error) {
    if (error instanceof ComputeError) {
      throw new CliError('INVALID_ARGUMENT', `--${error.message}`, {
        ...(error.hint ? { hint: error.hint } : {}),
        ...(error.details ? { details: error.details } : {}),
      });
    }
    throw error;
  }
}

/** The columns of a reservation in a table. */
export function reservationColumns(r: {
  id: string;
  state: string;
  poolId: string;
  gpus: number;
  nvlink: boolean;
  durationSeconds: number;
  queuePosition: number | null;
  health: string;
  endsAt: string | null;
  endReason: string | null;
  binding: { nodeId: string; gpuIndices: number[] }[];
}): Record<string, unknown> {
  return {
    id: r.id,
    state: r.state,
    pool: r.poolId,
    gpus: r.gpus,
    nvlink: r.nvlink ? 'yes' : 'no',
    for: shortDuration(r.durationSeconds),
    queue: r.queuePosition ?? '',
    health: r.health,
    endsAt: r.endsAt ?? '',
    nodes: r.binding.length,
    endReason: r.endReason ?? '',
  };
}
