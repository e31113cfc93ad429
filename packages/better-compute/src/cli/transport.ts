/**
 * The transport of token commands, loaded only when a command calls `context.api()`. With --url
 * (or BETTER_COMPUTE_URL) it is the typed client over HTTP; otherwise the same client posts to the
 * configuration's `compute.handler` in process, so the route table, the envelope, CSRF, the body
 * limit and IAM all apply as they do remotely.
 */
import { ComputeError, safeText } from '@better-compute/core';
import {
  createComputeClient,
  DEFAULT_BASE_PATH,
  methodFlags,
  resolveEndpoint,
  type ComputeClient,
} from '@better-compute/client';
import type { ComputeInstance } from '../types.js';
import type { GlobalOptions, ResolvedIO } from './define.js';
import { resolveCredential, type ResolvedCredential } from './credentials.js';
import type { CliApi, CredentialInfo } from './transport-types.js';

export interface TransportOptions {
  io: ResolvedIO;
  global: GlobalOptions;
  compute: () => Promise<ComputeInstance>;
  /** A token to use instead of the resolved one (`auth login` checks the token it is given). */
  token?: ResolvedCredential;
}

/** Whether `method` needs no credential; undefined for a method this client does not know. */
function isPublic(method: string): boolean | undefined {
  const flags = methodFlags[method];
  return flags ? flags.public === true : undefined;
}

export async function createCliApi(options: TransportOptions): Promise<CliApi> {
  const { io, global } = options;
  // Checked before anything else: plain http to another machine never gets a token.
  const endpoint = global.url ? resolveEndpoint(global.url) : null;
  const resolution = options.token
    ? { credential: options.token, skipped: [] }
    : await resolveCredential({
        env: io.env,
        profile: global.profile,
        target: endpoint ? { origin: endpoint.origin } : null,
      });
  const credential = resolution.credential;
  if ('notice' in resolution && resolution.notice) io.err(safeText(`note: ${resolution.notice}`));
  const tenant = global.tenant ?? credential?.tenantId ?? undefined;

  let client: ComputeClient;
  if (endpoint) {
    client = createComputeClient({
      baseURL: endpoint,
      token: credential?.token,
      tenant,
      ...(io.fetch ? { fetch: io.fetch } : {}),
    });
  } else {
    // A token command without --url runs the deployment in process; without a configuration for
    // that, a running server is the other way, and only a token command can be told so.
    const compute = await options.compute().catch((error: unknown) => {
      if (
        error instanceof ComputeError &&
        error.code === 'CONFIG_NOT_FOUND' &&
        !error.hint?.includes('--url')
      )
        throw new ComputeError(error.code, error.message, {
          hint: `${error.hint ?? 'Run better-compute init.'} Or pass --url (BETTER_COMPUTE_URL) to call a running server.`,
          ...(error.details ? { details: error.details } : {}),
          cause: error,
        });
      throw error;
    });
    const basePath = compute.config.basePath || DEFAULT_BASE_PATH;
    client = createComputeClient({
      baseURL: new URL(basePath, 'http://localhost'),
      token: credential?.token,
      tenant,
      fetch: (request) => compute.handler(request),
    });
  }

  async function guard(method: string): Promise<void> {
    if (credential) return;
    // Public methods (system.version) need no token; plugin methods the table does not know are sent as they are.
    if (isPublic(method) !== false) return;
    const why = resolution.skipped.length ? ` (${resolution.skipped.join('; ')})` : '';
    throw new ComputeError(
      'MISSING_ENV',
      `${method} needs a credential: BETTER_COMPUTE_TOKEN is not set and no saved session or profile applies${why}`,
      {
        hint: endpoint
          ? `Set BETTER_COMPUTE_TOKEN, or run "better-compute auth login --url ${endpoint.origin}".`
          : 'Set BETTER_COMPUTE_TOKEN, or run "better-compute auth login" to save a credential.',
      },
    );
  }

  let info: CredentialInfo | null = null;
  if (credential) {
    const { token: _token, ...rest } = credential;
    info = rest;
  }
  return {
    mode: endpoint ? 'remote' : 'in-process',
    endpoint: client.endpoint,
    tenant,
    credential: info,
    async call(method, input) {
      await guard(method);
      return client.call(method, input);
    },
    async request(method, input) {
      await guard(method);
      return client.request(method, input);
    },
    async watch(watchOptions) {
      await guard('events.list');
      return client.$watch(watchOptions);
    },
    async tunnel(ticket) {
      if (!endpoint)
        throw new ComputeError(
          'UNSUPPORTED',
          'a tunnel opens a WebSocket on a running server, and needs --url',
          {
            hint: 'Pass --url https://compute.example.com (or set BETTER_COMPUTE_URL).',
          },
        );
      const { openTunnelSocket } = await import('./tunnel-socket.js');
      return openTunnelSocket(client.endpoint, ticket, credential?.token);
    },
  };
}
