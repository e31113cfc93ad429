/**
 * Canonical JSON: the bytes a release signature covers. Object keys sorted by UTF-16 code units, no
 * whitespace, strings as JSON.stringify writes them, integers only. For the values a manifest holds
 * (ASCII keys, well-formed strings, safe integers) this is exactly RFC 8785 (JCS), so any JCS
 * library reproduces the bytes (docs/decisions/release-manifests.md). Pure: no node:crypto.
 */

/** The canonical JSON text of a value made of null, booleans, safe integers, strings, arrays and plain objects. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    // A fraction or an exponent has several spellings across languages; a manifest has none.
    if (!Number.isSafeInteger(value)) throw new RangeError(`${value} is not a safe integer`);
    return String(value);
  }
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, member]) => member !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`).join(',')}}`;
  }
  throw new RangeError(`${typeof value} has no canonical JSON`);
}

/** The UTF-8 bytes of `canonicalJson(value)`. */
export function canonicalBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalJson(value));
}
