/**
 * The versions a release manifest names: semantic versions (semver.org 2.0) without build metadata,
 * so each version has one spelling, compared by semver precedence (a pre-release sorts below its
 * release). Pure: no node:crypto, no I/O.
 */

/** The longest version string a manifest may carry. */
export const MAX_VERSION_LENGTH = 64;

const IDENTIFIER = '(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)';
const SEMVER = new RegExp(
  `^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-(${IDENTIFIER}(?:\\.${IDENTIFIER})*))?$`,
);

/** A version as its parts: three numbers as digit strings (no leading zero), and the pre-release identifiers. */
export interface Semver {
  core: [string, string, string];
  prerelease: string[];
}

/** `1.4.0` or `2.0.0-rc.1`; null for anything else (build metadata `+…` included). */
export function parseSemver(text: unknown): Semver | null {
  if (typeof text !== 'string' || text.length > MAX_VERSION_LENGTH) return null;
  const match = SEMVER.exec(text);
  if (!match) return null;
  return { core: [match[1]!, match[2]!, match[3]!], prerelease: match[4] ? match[4].split('.') : [] };
}

export const isSemver = (text: unknown): text is string => parseSemver(text) !== null;

/** Numeric identifiers without leading zeros compare by length, then digit by digit: no overflow. */
function compareDigits(a: string, b: string): number {
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** -1, 0 or 1 by semver precedence; throws RangeError for a string that is not a version. */
export function compareSemver(a: string, b: string): number {
  const x = parseSemver(a);
  const y = parseSemver(b);
  if (!x || !y) throw new RangeError(`not a version: ${x ? b : a}`);
  for (let i = 0; i < 3; i++) {
    const order = compareDigits(x.core[i]!, y.core[i]!);
    if (order !== 0) return order;
  }
  // A version without a pre-release sorts above the same version with one.
  if (x.prerelease.length === 0 || y.prerelease.length === 0)
    return x.prerelease.length === y.prerelease.length ? 0 : x.prerelease.length === 0 ? 1 : -1;
  for (let i = 0; i < Math.max(x.prerelease.length, y.prerelease.length); i++) {
    const p = x.prerelease[i];
    const q = y.prerelease[i];
    if (p === undefined) return -1;
    if (q === undefined) return 1;
    const pNumeric = /^\d+$/.test(p);
    const qNumeric = /^\d+$/.test(q);
    if (pNumeric && qNumeric) {
      const order = compareDigits(p, q);
      if (order !== 0) return order;
    } else if (pNumeric !== qNumeric) {
      // Numeric identifiers sort below alphanumeric ones.
      return pNumeric ? -1 : 1;
    } else if (p !== q) {
      return p < q ? -1 : 1;
    }
  }
  return 0;
}
