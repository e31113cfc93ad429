/** @type {import('next').NextConfig} */
export default {
  reactStrictMode: true,
  poweredByHeader: false,
  // The server-side stack (better-compute, Better IAM, pg) is built by server.mjs, never bundled.
  serverExternalPackages: ['better-compute', 'better-iam', '@better-compute/db', 'pg', 'kysely'],
  eslint: { ignoreDuringBuilds: true },
};
