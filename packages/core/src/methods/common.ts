/** Schemas shared by the method groups. */
import { z } from 'zod';
import { ID_PREFIXES, type IdKind, idKindPhrase, isId, TENANT_ID_PATTERN } from '../ids.js';

export const tenantId = z.string().regex(TENANT_ID_PATTERN, 'must be a tenant id such as acme');

/** An id of one kind, checked by its prefix. */
export function idOf(kind: IdKind) {
  return z.string().refine((value) => isId(kind, value), {
    message: `must be ${idKindPhrase(kind)} like ${ID_PREFIXES[kind]}_01…`,
  });
}

/** `limit` and `cursor` of every list method. */
export const pageInput = {
  limit: z.number().int().min(1).max(500).default(50),
  cursor: z.string().min(1).max(200).optional(),
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
      .refine((value) => isId(kind, value), { message: 'must be a cursor from a previous page' })
      .optional(),
  };
}

/** `{ items, nextCursor }`, the answer of every list method. */
export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), nextCursor: z.string().nullable() });
}

export const idempotencyKey = z
  .string()
  .min(8)
  .max(200)
  .regex(/^[A-Za-z0-9._:-]+$/, 'must be letters, digits and . _ : -');

export const isoTime = z.string();
