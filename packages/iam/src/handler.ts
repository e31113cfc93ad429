/**
 * IAM's routes: `POST /api/iam/{group}/{name}` for every method of `methods.ts`, and
 * `GET /api/iam/jwks`. The pipeline follows compute's (DESIGN section 4): route, body limit and JSON,
 * credential (bearer, or the session cookie under the CSRF rule), tenant state, input validation,
 * the method's `iam:*` action decided by IAM itself, then the service, in core's envelope.
 */
import {
  type AnyMethod,
  ComputeError,
  dataResponse,
  errorResponse,
  type Identity,
  checkedBody,
  methodPath,
  readJsonBody,
  requestCredential,
  requestIdOf,
  SESSION_COOKIE,
  validatedInput,
  rateLimited,
  ROOT_TENANT,
  toComputeError,
  belongsInLog,
  type ClientInfo,
  isRefusedCredential,
} from '@better-compute/core';
import type { Iam, IamInternals } from './api.js';
import { type IamMethodName, iamMethods } from './methods.js';
import type { RouteBinding, RouteBindings, RouteContext } from './routes.js';

export const IAM_BASE_PATH = '/api/iam';
export { SESSION_COOKIE };

/** The paths IAM serves under its base, from the method table, plus `/can` for the `can` method. */
function routeTable(): Map<string, IamMethodName> {
  const routes = new Map<string, IamMethodName>();
  for (const [key, method] of Object.entries(iamMethods) as [IamMethodName, AnyMethod][])
    routes.set(methodPath(method), key);
  routes.set('/can', 'can');
  return routes;
}

/**
 * What an agent may change through IAM's routes: its own credentials (decided further by the
 * agent's `@own` rules). Any other IAM mutation by an agent is refused outright, whatever its
 * bindings say: an agent never widens its own authority (docs/decisions/delegation-iam-agents.md).
 */
const AGENT_MUTATIONS: ReadonlySet<IamMethodName> = new Set([
  'sessions.signOut',
  'sessions.revoke',
  'apiKeys.create',
  'apiKeys.revoke',
  'jwt.issue',
]);

/** Whether a method may run while the caller's own tenant is suspended (so a session can still end). */
const ALLOWED_WHILE_SUSPENDED: ReadonlySet<IamMethodName> = new Set(['sessions.signOut', 'sessions.get']);

/**
 * The handler over the routes every area binds (`routes` in `iam.ts`): the pipeline is here once, the
 * bindings say what each method decides on and calls.
 */
export function createIamHandler(
  iam: Iam,
  bindings: RouteBindings,
  internals: IamInternals,
): (request: Request, client?: ClientInfo) => Promise<Response> {
  const routes = routeTable();
  const { limiter } = internals;

  return async function handle(request: Request, client?: ClientInfo): Promise<Response> {
    const requestId = requestIdOf(request);
    // The client's address, once a public method (sign-in) was admitted by it.
    let address: string | null = null;
    try {
      const url = new URL(request.url);
      const sub = url.pathname.startsWith(`${IAM_BASE_PATH}/`)
        ? url.pathname.slice(IAM_BASE_PATH.length)
        : null;
      if (sub === '/jwks' && (request.method === 'GET' || request.method === 'HEAD')) {
        return new Response(JSON.stringify(await iam.jwks()), {
          headers: {
            'content-type': 'application/json; charset=utf-8',
            'cache-control': 'public, max-age=300',
            'x-request-id': requestId,
          },
        });
      }
      const key = sub === null ? undefined : routes.get(sub);
      if (key === undefined || request.method !== 'POST') {
        throw new ComputeError('NOT_FOUND', `there is no route ${request.method} ${url.pathname}`, {
          hint: 'IAM methods are POST /api/iam/{group}/{name}.',
        });
      }
      const method: AnyMethod = iamMethods[key];
      // A public method spends no identity's budget: the client's address admits it, before the
      // body is read or a password hashed, and a refused credential counts against the address.
      if ('public' in method.access && limiter && client?.clientAddress) {
        const refused = limiter.admitAddress(client.clientAddress);
        if (refused) throw rateLimited(refused.waitMs, refused.limit);
        address = client.clientAddress;
      }
      const body = checkedBody(await readJsonBody(request));

      let identity: Identity | null = null;
      if (!('public' in method.access)) {
        const credential = requestCredential(
          { method: request.method, origin: url.origin, header: (name) => request.headers.get(name) },
          internals.trustedOrigins,
        );
        if (credential !== null) identity = await iam.authenticate(credential.token);
        if (identity === null) {
          throw new ComputeError(
            'UNAUTHENTICATED',
            credential === null
              ? 'this method needs a credential'
              : 'the credential is unknown, expired or revoked',
            {
              hint: 'Send Authorization: Bearer <session token, API key or session JWT>.',
            },
          );
        }
        const state = await iam.tenantState(identity.tenantId);
        if (state !== 'active' && !ALLOWED_WHILE_SUSPENDED.has(key)) {
          throw new ComputeError('TENANT_SUSPENDED', `tenant ${identity.tenantId} is ${state ?? 'gone'}`);
        }
        // The same budget per identity as compute's routes (one limiter for both).
        const refused = internals.limiter?.charge(identity.principalId, { tenantId: identity.tenantId });
        if (refused) throw rateLimited(refused.waitMs, refused.limit);
      }

      const parsedInput = validatedInput(method.input, body);
      const input = parsedInput as { tenantId?: string };
      const tenantId = input.tenantId ?? identity?.tenantId ?? ROOT_TENANT;
      const context: RouteContext = { identity, request, url, tenantId, requestId };
      const binding = bindings[key] as RouteBinding<IamMethodName>;

      if (identity?.principalKind === 'agent' && method.kind === 'mutation' && !AGENT_MUTATIONS.has(key)) {
        throw new ComputeError('ACCESS_DENIED', `an agent cannot call ${key}: IAM changes are its person's`, {
          details: { reason: 'agent-iam-mutation', method: key },
          hint: `Ask the person the agent acts for (${identity.actingFor ?? 'its person'}) to make this change.`,
        });
      }
      const selfServed =
        binding.selfServe !== undefined &&
        identity !== null &&
        (await binding.selfServe(parsedInput as never, { ...context, identity }));
      if ('action' in method.access && !selfServed) {
        const action = method.access.action;
        const caller = identity!;
        const resource = binding.resource
          ? await binding.resource(parsedInput as never, { ...context, identity: caller })
          : { type: 'tenant', tenantId };
        const [decision] = await iam.authorize(caller, [{ action, resource }]);
        if (!decision?.allowed) {
          throw new ComputeError(
            'ACCESS_DENIED',
            `${action} is not allowed: ${decision?.reason ?? 'no decision'}`,
            {
              details: { action, reason: decision?.reason ?? null },
            },
          );
        }
      }
      const answer = await binding.run(parsedInput as never, context);
      return dataResponse(answer.data, requestId, 200, answer.headers ?? {});
    } catch (error) {
      if (address && isRefusedCredential(error)) limiter!.addressFailed(address);
      const failure = toComputeError(error);
      if (belongsInLog(failure, error))
        internals.log?.({ level: 'error', message: 'IAM request failed', requestId, error });
      return errorResponse(failure, requestId);
    }
  };
}
