/**
 * Signed bcd release manifests (`@better-compute/core/release`): the manifest and envelope format,
 * canonical JSON, versions, release keys, threshold verification and the checks a machine makes
 * before installing, shared by the CLI's offline tools, the server's `releases` group and the
 * daemon. Node only (node:crypto); the method table imports the pure schemas from manifest.ts.
 * docs/releases.md describes the format.
 */
export * from './semver.js';
export * from './canonical.js';
export * from './manifest.js';
export * from './signatures.js';
export * from './checks.js';
export * from './pin-statement.js';
