/**
 * The server's refusal of a form, placed on the form's fields. The API answers a refused input as
 * INVALID_ARGUMENT with `details.issues` (each with the field's `path` and its `message`, core's
 * `invalidInput`), a refusal about one field (usage's "from must be before to", a quota's tenant
 * that does not exist) with `details.field`, and a name another item of the tenant holds as ALREADY_EXISTS; a form shows each
 * message beside the field it concerns, and anything it cannot place above the form. A field inside
 * a list is named by its dotted path (`volumes.2.path`, the path zod and `details.field` give): the
 * longest leading part of the path the form names is where the message goes, so a form may name
 * `volumes.2.path` for its Mount path and still catch `volumes` as a whole.
 */
import { isComputeClientError } from '@better-compute/client';

export interface FieldErrors<F extends string> {
  /** A message per field of the form the server refused. */
  fields: Partial<Record<F, string>>;
  /** The error when no field could carry it (shown for the whole form); null when all were placed. */
  rest: unknown;
}

interface Issue {
  path?: unknown;
  message?: unknown;
}

/** The longest leading part of a dotted or array path that is one of the form's fields. */
function placeOf<F extends string>(path: unknown, formFields: readonly F[]): F | undefined {
  const parts = Array.isArray(path)
    ? (path as unknown[]).map(String)
    : typeof path === 'string'
      ? path.split('.')
      : [];
  for (let length = parts.length; length > 0; length--) {
    const candidate = parts.slice(0, length).join('.');
    if (formFields.includes(candidate as F)) return candidate as F;
  }
  return undefined;
}

/**
 * Places a call's error on the form's fields. `nameField` is the field ALREADY_EXISTS concerns (the
 * item's name, unique in its tenant), when the form has one.
 *
 * @example
 * const { fields, rest } = fieldErrorsOf(create.error, ['name', 'region'], 'name');
 * // INVALID_ARGUMENT "name: must be 1-63 lowercase letters…" → fields.name is that message
 * fieldErrorsOf(update.error, ['volumes.1.path', 'volumes.1']);
 * // an issue at ['volumes', 1, 'path'] → fields['volumes.1.path']; details.field 'volumes.1' → fields['volumes.1']
 */
export function fieldErrorsOf<F extends string>(
  error: unknown,
  formFields: readonly F[],
  nameField?: F,
): FieldErrors<F> {
  if (!error) return { fields: {}, rest: null };
  if (!isComputeClientError(error)) return { fields: {}, rest: error };
  const details = error.details as { issues?: unknown; field?: unknown } | undefined;
  // Any refusal that names its field (a tenant that does not exist, a period that ends before it starts).
  const field = placeOf(details?.field, formFields);
  if (field) return { fields: { [field]: error.message } as Partial<Record<F, string>>, rest: null };
  if (error.code === 'ALREADY_EXISTS' && nameField)
    return { fields: { [nameField]: error.message } as Partial<Record<F, string>>, rest: null };
  if (error.code !== 'INVALID_ARGUMENT') return { fields: {}, rest: error };
  const issues = details?.issues;
  if (!Array.isArray(issues)) return { fields: {}, rest: error };
  const fields: Partial<Record<F, string>> = {};
  let unplaced = false;
  for (const issue of issues as Issue[]) {
    const issueField = placeOf(issue.path, formFields);
    if (issueField && typeof issue.message === 'string') fields[issueField] ??= issue.message;
    else unplaced = true;
  }
  return { fields, rest: unplaced || Object.keys(fields).length === 0 ? error : null };
}
