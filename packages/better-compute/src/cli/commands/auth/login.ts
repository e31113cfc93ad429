/**
 * `auth login`: saves a token under a profile, which becomes the current one. The token comes from
 * standard input or BETTER_COMPUTE_TOKEN, never from an argument (arguments end up in shell history
 * and process listings), and is checked with system.whoami unless --no-verify.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'auth login',
  group: 'Auth',
  summary: 'Save a token (from standard input or BETTER_COMPUTE_TOKEN) under a profile',
  target: 'token',
  calls: ['system.whoami'],
  flags: {
    verify: {
      type: 'boolean',
      default: true,
      description: 'Check the token with system.whoami before saving it',
    },
  },
  argumentsHint:
    'auth login reads the token from standard input or BETTER_COMPUTE_TOKEN, never from an argument: better-compute auth login < token.txt',
  examples: [
    'better-compute auth login --url https://compute.example.com < token.txt',
    'BETTER_COMPUTE_TOKEN=biam_key_… better-compute auth login --profile ci --no-verify',
  ],
  async run({ flags, global, io, compute }) {
    const { resolveEndpoint } = await import('@better-compute/client');
    const credentials = await import('../../credentials.js');
    const profile = credentials.assertProfileName(global.profile ?? 'default');
    const fromEnv = io.env.BETTER_COMPUTE_TOKEN || undefined;
    let token = fromEnv ?? '';
    if (!token && io.stdin) token = (await io.stdin()).trim();
    if (!token) {
      throw new ComputeError(
        'MISSING_ENV',
        'no token to save: standard input was empty and BETTER_COMPUTE_TOKEN is not set',
        {
          hint: 'Pipe the token in (better-compute auth login < token.txt) or set BETTER_COMPUTE_TOKEN; it is never taken from an argument.',
        },
      );
    }
    token = credentials.checkedToken(
      token,
      fromEnv ? 'BETTER_COMPUTE_TOKEN' : 'the token on standard input',
      fromEnv
        ? 'Set BETTER_COMPUTE_TOKEN to the token alone: no quotes, spaces or line breaks inside it.'
        : 'Pipe in the token alone, on one line: better-compute auth login < token.txt',
    );
    // Resolved first: a malformed URL or plain http to another machine fails before the token is sent.
    const url = global.url ? resolveEndpoint(global.url).href : null;
    let tenantId = global.tenant ?? null;
    let principalId: string | undefined;
    if (flags.verify) {
      const { createCliApi } = await import('../../transport.js');
      const api = await createCliApi({
        io,
        global,
        compute,
        token: { source: fromEnv ? 'env' : 'stdin', token },
      });
      const identity = await api.call('system.whoami', global.tenant ? { tenantId: global.tenant } : {});
      tenantId = global.tenant ?? identity.tenantId;
      principalId = identity.principalId;
    }
    const path = credentials.credentialsPath(io.env);
    const file = await credentials.readCredentials(path);
    file.profiles[profile] = { url, token, tenantId, savedAt: new Date().toISOString() };
    file.current = profile;
    await credentials.writeCredentials(path, file);
    return { profile, url, tenantId, verified: flags.verify, ...(principalId ? { principalId } : {}), path };
  },
});
