/** Schemas shared by the method groups. */
import { z } from 'zod';
import { ID_PREFIXES, type IdKind, idKindPhrase, isId, TENANT_ID_PATTERN } from '../ids.js';

export const tenantId = z
  .string()
  .regex(TENANT_ID_PATTERN, 'must be a tenant id such as acme')
  .describe(
    'A tenant id in Better IAM, such as acme. As a method’s tenantId: the tenant acting, the credential’s own when omitted',
  );

/** An id of one kind, checked by its prefix. */
export function idOf(kind: IdKind) {
  const phrase = idKindPhrase(kind);
  return z
    .string()
    .refine((value) => isId(kind, value), {
      message: `must be ${phrase} like ${ID_PREFIXES[kind]}_01…`,
    })
    .describe(`${phrase[0]!.toUpperCase()}${phrase.slice(1)}, like ${ID_PREFIXES[kind]}_01…`);
}

/** The largest `integer` the database stores: versions and inventory revisions are such columns. */
export const INT4_MAX = 2_147_483_647;

/** How many labels a site, pool or node carries, and how many taints a node carries, at most. */
export const MAX_LABELS = 64;
export const MAX_TAINTS = 32;

/** What every list says of a cursor it could not have given (docs/decisions/list-cursors.md). */
const NOT_A_CURSOR = 'must be a cursor from a previous page';

/** `limit` and `cursor` of every list method. */
export const pageInput = {
  limit: z.number().int().min(1).max(500).default(50).describe('The most items a page holds'),
  cursor: z
    .string()
    .min(1, NOT_A_CURSOR)
    .max(200, NOT_A_CURSOR)
    .optional()
    .describe('The previous page’s nextCursor, for the page after it'),
};

/**
 * `limit` and `cursor` of a list that pages by id: the cursor is the last id of the page before, so
 * anything else (a pasted typo, another list's cursor) is refused instead of paging from nowhere.
 */
export function pageInputById(kind: IdKind) {
  return {
    limit: pageInput.limit,
    cursor: z
      .string()
      .refine((value) => isId(kind, value), { message: NOT_A_CURSOR })
      .optional()
      .describe('The previous page’s nextCursor, for the page after it'),
  };
}

/**
 * `limit` and `cursor` of a list that pages by a revision number (newest first): the cursor is the
 * last revision of the page before, digits only, in the range the database stores. `-5`, `1e3`,
 * ` 2` or a number past INT4_MAX was never a page's cursor, so it is refused before any read.
 */
export function pageInputByRevision() {
  return {
    limit: pageInput.limit,
    cursor: z
      .string()
      .refine((value) => /^[1-9][0-9]{0,9}$/.test(value) && Number(value) <= INT4_MAX, {
        message: NOT_A_CURSOR,
      })
      .optional()
      .describe('The previous page’s nextCursor, for the page after it'),
  };
}

/** A revision number: a whole number from 1 to INT4_MAX (a larger one is none the database holds). */
export const revisionNumber = z
  .number()
  .int('must be a revision number from 1 to 2147483647')
  .min(1, 'must be a revision number from 1 to 2147483647')
  .max(INT4_MAX, 'must be a revision number from 1 to 2147483647');

/** `{ items, nextCursor }`, the answer of every list method. */
export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), nextCursor: z.string().nullable() });
}

export const idempotencyKey = z
  .string()
  .min(8)
  .max(200)
  .regex(/^[A-Za-z0-9._:-]+$/, 'must be letters, digits and . _ : -')
  .describe(
    'A key of the caller’s choosing: a retry with the same key and input answers the first call’s answer for 24 hours instead of running again',
  );

export const isoTime = z.string();
