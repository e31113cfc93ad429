/** Whether a parsed JSON value is an object with fields (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether a credential can travel as `Authorization: Bearer …`: one run of visible ASCII, nothing to split or hide. */
export function isBearerToken(value: string): boolean {
  return /^[\x21-\x7e]+$/.test(value);
}
