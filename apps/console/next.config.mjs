import { PHASE_DEVELOPMENT_SERVER } from 'next/constants.js';

// Next.js reports usage to Vercel unless NEXT_TELEMETRY_DISABLED is set (it has no configuration
// key for it). Every Next.js command (build, dev, start, and the servers lib/mount.mjs starts) loads
// this file before it reads the variable, so setting it here turns telemetry off whichever way Next
// is run; lib/mount.mjs and scripts/ensure.mjs set it too, before Next.js is even loaded.
process.env.NEXT_TELEMETRY_DISABLED = '1';

/** @type {(phase: string) => import('next').NextConfig} */
export default (phase) => ({
  reactStrictMode: true,
  poweredByHeader: false,
  // Development mode (server.mjs --dev, better-compute dev --console-dev) empties its build
  // directory when it starts: it gets one of its own, so it never deletes the production build that
  // `better-compute dev` and the tests serve. Inside .next, so what ignores .next ignores it too.
  distDir: phase === PHASE_DEVELOPMENT_SERVER ? '.next/dev' : '.next',
  // Development mode serves its scripts and hot reload only to pages of these hosts; the console is
  // opened by name or by address.
  allowedDevOrigins: ['localhost', '127.0.0.1'],
  // The server-side stack (better-compute, Better IAM, pg) is built by server.mjs, never bundled.
  serverExternalPackages: ['better-compute', 'better-iam', '@better-compute/db', 'pg', 'kysely'],
  eslint: { ignoreDuringBuilds: true },
});
