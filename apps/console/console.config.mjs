// The console's stack, built once per process and loaded at run time (never bundled by Next):
// Better Compute with its built-in modules and the embedded Better IAM on the same database, which
// serves /api/iam beside /api/compute. Session cookies count only from the console's own origin
// (trustedOrigins), on POSTs with X-Better-Compute: 1 (docs/request-checks.md).
//
// Capabilities that need keys find them in the PKI bundle (`settings.pki`).
import { betterCompute } from 'better-compute';

/** @param {{ databaseUrl: string, secret: string, trustedOrigins: string[], pki: string | null, release?: { pins: string[], threshold?: number } | null }} settings */
export default async function createStack(settings) {
  const compute = await betterCompute({
    database: settings.databaseUrl,
    secret: settings.secret,
    trustedOrigins: settings.trustedOrigins,
    // The PKI bundle: break-glass SSH certificates, tunnel tickets and the audit seal need its keys.
    ...(settings.pki ? { pki: settings.pki } : {}),
    // The release keys signed bcd releases must verify under; with them, the console shows Rollouts.
    ...(settings.release ? { release: settings.release } : {}),
  });
  return { compute, iam: compute.embeddedIam };
}
