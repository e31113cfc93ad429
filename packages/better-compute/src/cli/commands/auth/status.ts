/** `auth status`: which credential token commands would use: source, profile, path; never the token. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'auth status',
  group: 'Auth',
  summary: 'Show which credential commands use: source, profile and path, never the token',
  target: 'none',
  flags: {
    url: {
      type: 'string',
      description: 'The server commands would call (default: BETTER_COMPUTE_URL; else in process)',
      placeholder: 'URL',
    },
    profile: {
      type: 'string',
      description: 'The profile to look at (default: BETTER_COMPUTE_PROFILE, else the current one)',
      placeholder: 'NAME',
    },
  },
  examples: ['better-compute auth status', 'better-compute auth status --url https://compute.example.com'],
  async run({ flags, io }) {
    const { resolveEndpoint } = await import('@better-compute/client');
    const credentials = await import('../../credentials.js');
    const url = flags.url ?? (io.env.BETTER_COMPUTE_URL || undefined);
    const endpoint = url ? resolveEndpoint(url) : null;
    const path = credentials.credentialsPath(io.env);
    const { credential, skipped, notice } = await credentials.resolveCredential({
      env: io.env,
      profile: flags.profile ?? (io.env.BETTER_COMPUTE_PROFILE || undefined),
      target: endpoint ? { origin: endpoint.origin } : null,
    });
    const file = await credentials.readCredentials(path).catch(() => null);
    return {
      source: credential?.source ?? 'none',
      profile: credential?.profile ?? null,
      // The file the credential was read from: Better IAM's profile store for its session.
      path:
        credential?.source === 'env'
          ? null
          : credential?.source === 'better-iam'
            ? (credential.path ?? null)
            : (credential?.path ?? path),
      url: credential?.url ?? null,
      tenantId: credential?.tenantId ?? null,
      expiresAt: credential?.expiresAt ?? null,
      target: endpoint ? endpoint.origin : 'in-process',
      currentProfile: file?.current ?? null,
      profiles: file ? Object.keys(file.profiles) : [],
      ...(skipped.length ? { skipped } : {}),
      ...(notice ? { notice } : {}),
    };
  },
});
