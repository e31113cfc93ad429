/**
 * Keyset pages of a list method, `{ items, nextCursor }`. The cursor is the id of the last row of
 * the previous page; a list reads one row more than its limit to know whether another page follows.
 * A cursor that names no row the caller may list (another tenant's included) is the same
 * INVALID_ARGUMENT, so a cursor is never an oracle for ids outside the caller's reach.
 */
import { ComputeError } from '@better-compute/core';

export function notACursor(what: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', `the cursor names no ${what}`, {
    details: { field: 'cursor' },
    hint: 'Pass the nextCursor of the previous page, or leave --cursor out.',
  });
}

/**
 * The row a cursor names, through `find` (which must apply the caller's tenant and scope), or
 * undefined for the first page.
 */
export async function cursorRow<Row>(
  cursor: string | undefined,
  what: string,
  find: (id: string) => Promise<Row | undefined>,
): Promise<Row | undefined> {
  if (!cursor) return undefined;
  const row = await find(cursor);
  if (row === undefined) throw notACursor(what);
  return row;
}

/** A page from `limit + 1` rows read in list order. */
export function pageOf<Row extends { id: string }, View>(
  rows: readonly Row[],
  limit: number,
  view: (row: Row) => View,
): { items: View[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  return { items: page.map(view), nextCursor: rows.length > limit ? page.at(-1)!.id : null };
}
