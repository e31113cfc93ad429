/**
 * IAM's routes: `POST /api/iam/{group}/{name}` for every method of `methods.ts`, and
 * `GET /api/iam/jwks`. The pipeline follows compute's (DESIGN section 4): route, body limit and JSON,
 * credential (bearer, or the session cookie under the CSRF rule), tenant state, input validation,
 * the method's `iam:*` action decided by IAM itself, then the service, in core's envelope.
 */
import type { z } from 'zod';
import {
  type AnyMethod,
  ComputeError,
  dataResponse,
  errorResponse,
  type Identity,
  checkedBody,
  isLoopbackHostname,
  methodPath,
  readJsonBody,
  requestCredential,
  requestIdOf,
  SESSION_COOKIE,
  validatedInput,
  rateLimited,
  type ResourceRef,
  ROOT_TENANT,
  toComputeError,
  belongsInLog,
} from '@better-compute/core';
import type { Iam, IamInternals } from './iam.js';
import { type IamMethodName, iamMethods } from './methods.js';
import type { IamResourceRef } from './policy.js';
import type { Principal } from './types.js';

export const IAM_BASE_PATH = '/api/iam';
export { SESSION_COOKIE };

interface Context {
  identity: Identity | null;
  request: Request;
  url: URL;
  /** The request's id, as its answer carries it. */
  requestId: string;
  /** The acting tenant: the input's `tenantId`, else the identity's. */
  tenantId: string;
}

interface Answer {
  data: unknown;
  headers?: Record<string, string>;
}

type Input<K extends IamMethodName> = z.output<(typeof iamMethods)[K]['input']>;

interface Binding<K extends IamMethodName> {
  /** The resource the method's action is decided on (async: some need a lookup for the owner). */
  resource?: (
    input: Input<K>,
    context: Context & { identity: Identity },
  ) => Promise<IamResourceRef> | IamResourceRef;
  run: (input: Input<K>, context: Context) => Promise<Answer>;
}

type Bindings = { [K in IamMethodName]: Binding<K> };

function sessionCookie(url: URL, token: string, maxAgeSeconds: number): string {
  const secure = isLoopbackHostname(url.hostname) ? '' : '; Secure';
  return `${SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secure}`;
}

/**
 * A person's own session, opened with their password (a session token, or a JWT issued from one):
 * second factors are the person's alone, never set up with an API key or by an agent.
 */
function requirePasswordSession(context: Context): Identity {
  const identity = requireIdentity(context);
  if (identity.principalKind !== 'person' || identity.credentialKind === 'api-key') {
    throw new ComputeError(
      'ACCESS_DENIED',
      'a second factor is set up only from a session signed in with the password',
      {
        details: { reason: 'password-session-required' },
        hint: 'Sign in as the person (better-iam login) and run the command with that session, not an API key or an agent.',
      },
    );
  }
  return identity;
}

/** Who takes a recovery action, and in which request, for its audit entry. */
function recoveryAudit(context: Context): { actor: string; requestId: string } {
  return { actor: requireIdentity(context).principalId, requestId: context.requestId };
}

function requireIdentity(context: Context): Identity {
  if (!context.identity) throw new ComputeError('UNAUTHENTICATED', 'this method needs a credential');
  return context.identity;
}

/** Principals are named within the acting tenant: one of another tenant is not found. */
async function principalIn(iam: Iam, principalId: string, tenantId: string): Promise<Principal> {
  const principal = await iam.getPrincipal(principalId).catch(() => null);
  if (!principal || principal.tenantId !== tenantId)
    throw new ComputeError('NOT_FOUND', `principal ${principalId} was not found in tenant ${tenantId}`);
  return principal;
}

function createBindings(iam: Iam, internals: IamInternals): Bindings {
  const selfOr = (principalId: string | undefined, identity: Identity) => principalId ?? identity.principalId;
  const principalResource = (principalId: string, tenantId: string): ResourceRef => ({
    type: 'iam-principal',
    id: principalId,
    tenantId,
    ownerId: principalId,
  });
  return {
    'sessions.signIn': {
      async run(input, { url }) {
        const result = await iam.signIn(input.email, input.password, input.tenantId, input.totp);
        const maxAge = Math.max(
          0,
          Math.floor((Date.parse(result.session.expiresAt) - internals.now().getTime()) / 1000),
        );
        return { data: result, headers: { 'set-cookie': sessionCookie(url, result.token, maxAge) } };
      },
    },
    'sessions.signOut': {
      async run(_input, context) {
        const identity = requireIdentity(context);
        const clear = { 'set-cookie': sessionCookie(context.url, '', 0) };
        if (identity.credentialKind === 'api-key') return { data: { revoked: false }, headers: clear };
        await iam.signOut(identity.credentialId);
        return { data: { revoked: true }, headers: clear };
      },
    },
    'sessions.get': {
      async run(_input, context) {
        const identity = requireIdentity(context);
        const session =
          identity.credentialKind === 'api-key' ? null : await iam.getSession(identity.credentialId);
        return { data: { identity, session } };
      },
    },
    'sessions.list': {
      resource: (input, { identity, tenantId }) =>
        principalResource(selfOr(input.principalId, identity), tenantId),
      async run(input, context) {
        const principal = await principalIn(
          iam,
          selfOr(input.principalId, requireIdentity(context)),
          context.tenantId,
        );
        return {
          data: await iam.listSessions(principal.id, {
            limit: input.limit,
            ...(input.cursor ? { cursor: input.cursor } : {}),
          }),
        };
      },
    },
    'sessions.revoke': {
      async resource(input, { tenantId }) {
        const session = await iam.getSession(input.sessionId).catch(() => null);
        return {
          type: 'iam-session',
          id: input.sessionId,
          tenantId,
          ...(session ? { ownerId: session.principalId } : {}),
        };
      },
      async run(input, { tenantId }) {
        const session = await iam.getSession(input.sessionId);
        await principalIn(iam, session.principalId, tenantId).catch(() => {
          throw new ComputeError(
            'NOT_FOUND',
            `session ${input.sessionId} was not found in tenant ${tenantId}`,
          );
        });
        return { data: await iam.revokeSession(input.sessionId) };
      },
    },
    'totp.enroll': {
      async run(_input, context) {
        return { data: await iam.enrollTotp(requirePasswordSession(context).principalId) };
      },
    },
    'totp.confirm': {
      async run(input, context) {
        return { data: await iam.confirmTotp(requirePasswordSession(context).principalId, input.code) };
      },
    },
    'totp.remove': {
      async run(input, context) {
        return { data: await iam.removeTotp(requirePasswordSession(context).principalId, input.code) };
      },
    },
    'totp.reset': {
      resource: (input, { tenantId }) => principalResource(input.principalId, tenantId),
      async run(input, context) {
        const person = await principalIn(iam, input.principalId, context.tenantId);
        return { data: await iam.resetTotp(person.id, recoveryAudit(context)) };
      },
    },
    'passwords.change': {
      async run(input, context) {
        const identity = requirePasswordSession(context);
        return {
          data: await iam.changePassword(identity.principalId, {
            currentPassword: input.currentPassword,
            newPassword: input.newPassword,
            // The session it is changed from stays; a JWT's session is the one it was issued from.
            ...(identity.credentialKind === 'session' ? { keepSessionId: identity.credentialId } : {}),
          }),
        };
      },
    },
    'passwords.reset': {
      resource: (input, { tenantId }) => principalResource(input.principalId, tenantId),
      async run(input, context) {
        const person = await principalIn(iam, input.principalId, context.tenantId);
        return { data: await iam.resetPassword(person.id, recoveryAudit(context)) };
      },
    },
    'apiKeys.create': {
      resource: (input, { identity, tenantId }) =>
        principalResource(selfOr(input.principalId, identity), tenantId),
      async run(input, context) {
        const principal = await principalIn(
          iam,
          selfOr(input.principalId, requireIdentity(context)),
          context.tenantId,
        );
        const options =
          input.expiresAt === undefined
            ? { name: input.name }
            : { name: input.name, expiresAt: input.expiresAt };
        return { data: await iam.createApiKey(principal.id, options) };
      },
    },
    'apiKeys.list': {
      resource: (input, { identity, tenantId }) =>
        principalResource(selfOr(input.principalId, identity), tenantId),
      async run(input, context) {
        const principal = await principalIn(
          iam,
          selfOr(input.principalId, requireIdentity(context)),
          context.tenantId,
        );
        return {
          data: await iam.listApiKeys(principal.id, {
            limit: input.limit,
            ...(input.cursor ? { cursor: input.cursor } : {}),
          }),
        };
      },
    },
    'apiKeys.revoke': {
      async resource(input, { tenantId }) {
        const key = await iam.getApiKey(input.apiKeyId).catch(() => null);
        return {
          type: 'iam-api-key',
          id: input.apiKeyId,
          tenantId,
          ...(key ? { ownerId: key.principalId } : {}),
        };
      },
      async run(input, { tenantId }) {
        const key = await iam.getApiKey(input.apiKeyId);
        await principalIn(iam, key.principalId, tenantId).catch(() => {
          throw new ComputeError(
            'NOT_FOUND',
            `API key ${input.apiKeyId} was not found in tenant ${tenantId}`,
          );
        });
        return { data: await iam.revokeApiKey(input.apiKeyId) };
      },
    },
    'tenants.create': {
      resource: (input, { identity }) => ({
        type: 'iam-tenant',
        tenantId: input.parentId ?? identity.tenantId,
      }),
      async run(input, context) {
        const byTenant = requireIdentity(context).tenantId;
        const parentId = input.parentId ?? byTenant;
        return { data: await iam.createTenant({ id: input.id, name: input.name, parentId, byTenant }) };
      },
    },
    'tenants.get': {
      resource: (_input, { tenantId }) => ({ type: 'iam-tenant', id: tenantId, tenantId }),
      async run(_input, { tenantId }) {
        return { data: await iam.getTenant(tenantId) };
      },
    },
    'tenants.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-tenant', tenantId }),
      async run(input, { tenantId }) {
        const page = { limit: input.limit, ...(input.cursor ? { cursor: input.cursor } : {}) };
        return {
          data: await iam.listTenants(tenantId === ROOT_TENANT ? page : { ...page, parentId: tenantId }),
        };
      },
    },
    'tenants.suspend': tenantStateBinding(iam, (id) => iam.suspendTenant(id)),
    'tenants.reactivate': tenantStateBinding(iam, (id) => iam.reactivateTenant(id)),
    'tenants.delete': tenantStateBinding(iam, (id) => iam.deleteTenant(id)),
    'principals.create': {
      resource: (_input, { tenantId }) => ({ type: 'iam-principal', tenantId }),
      async run(input, { tenantId }) {
        if (input.kind === 'person') {
          if (!input.email)
            throw new ComputeError('INVALID_ARGUMENT', 'a person needs an email', {
              details: { field: 'email' },
            });
          return {
            data: await iam.createPerson({
              tenantId,
              email: input.email,
              ...(input.password !== undefined ? { password: input.password } : {}),
              ...(input.displayName !== undefined ? { displayName: input.displayName } : {}),
            }),
          };
        }
        if (!input.displayName)
          throw new ComputeError('INVALID_ARGUMENT', `a ${input.kind} needs a displayName`, {
            details: { field: 'displayName' },
          });
        if (input.kind === 'service-account')
          return { data: await iam.createServiceAccount({ tenantId, displayName: input.displayName }) };
        if (!input.actingFor)
          throw new ComputeError('INVALID_ARGUMENT', 'an agent needs actingFor, the person it acts for', {
            details: { field: 'actingFor' },
          });
        return {
          data: await iam.createAgent({
            tenantId,
            displayName: input.displayName,
            actingFor: input.actingFor,
          }),
        };
      },
    },
    'principals.get': {
      resource: (input, { tenantId }) => principalResource(input.principalId, tenantId),
      async run(input, { tenantId }) {
        return { data: await principalIn(iam, input.principalId, tenantId) };
      },
    },
    'principals.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-principal', tenantId }),
      async run(input, { tenantId }) {
        return {
          data: await iam.listPrincipals({
            tenantId,
            limit: input.limit,
            ...(input.kind ? { kind: input.kind } : {}),
            ...(input.cursor ? { cursor: input.cursor } : {}),
          }),
        };
      },
    },
    'principals.disable': {
      resource: (input, { tenantId }) => ({ type: 'iam-principal', id: input.principalId, tenantId }),
      async run(input, { tenantId }) {
        await principalIn(iam, input.principalId, tenantId);
        return { data: await iam.disablePrincipal(input.principalId) };
      },
    },
    'principals.enable': {
      resource: (input, { tenantId }) => ({ type: 'iam-principal', id: input.principalId, tenantId }),
      async run(input, { tenantId }) {
        await principalIn(iam, input.principalId, tenantId);
        return { data: await iam.enablePrincipal(input.principalId) };
      },
    },
    'roles.create': {
      resource: (_input, { tenantId }) => ({ type: 'iam-role', tenantId }),
      async run(input, { tenantId }) {
        return {
          data: await iam.createRole({
            tenantId,
            name: input.name,
            actions: input.actions,
            ...(input.description !== undefined ? { description: input.description } : {}),
          }),
        };
      },
    },
    'roles.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-role', tenantId }),
      async run(_input, { tenantId }) {
        return { data: await iam.listRoles(tenantId) };
      },
    },
    'roles.delete': {
      resource: (input, { tenantId }) => ({ type: 'iam-role', id: input.roleId, tenantId }),
      async run(input, { tenantId }) {
        return { data: await iam.deleteRole(tenantId, input.roleId) };
      },
    },
    'bindings.create': {
      resource: (_input, { tenantId }) => ({ type: 'iam-binding', tenantId }),
      async run(input, context) {
        const { tenantId } = context;
        return {
          data: await iam.createBinding({
            tenantId,
            role: input.role,
            grantedBy: requireIdentity(context),
            ...(input.principalId ? { principalId: input.principalId } : {}),
            ...(input.groupId ? { groupId: input.groupId } : {}),
            ...(input.scope ? { scope: input.scope } : {}),
          }),
        };
      },
    },
    'bindings.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-binding', tenantId }),
      async run(input, { tenantId }) {
        return {
          data: await iam.listBindings({
            tenantId,
            limit: input.limit,
            ...(input.principalId ? { principalId: input.principalId } : {}),
            ...(input.cursor ? { cursor: input.cursor } : {}),
          }),
        };
      },
    },
    'bindings.revoke': {
      resource: (input, { tenantId }) => ({ type: 'iam-binding', id: input.bindingId, tenantId }),
      async run(input, { tenantId }) {
        const binding = await iam.getBinding(input.bindingId).catch(() => null);
        if (!binding || binding.tenantId !== tenantId)
          throw new ComputeError(
            'NOT_FOUND',
            `binding ${input.bindingId} was not found in tenant ${tenantId}`,
          );
        return { data: await iam.revokeBinding(input.bindingId) };
      },
    },
    can: {
      async run(input, context) {
        const identity = requireIdentity(context);
        const checks = input.checks.map((check) => ({
          action: check.action,
          resource: { ...check.resource, tenantId: check.resource.tenantId ?? context.tenantId },
        }));
        return { data: { results: await iam.authorize(identity, checks) } };
      },
    },
    'jwt.issue': {
      async run(_input, context) {
        const identity = requireIdentity(context);
        if (identity.credentialKind === 'api-key') {
          throw new ComputeError('INVALID_STATE', 'jwt.issue needs a session credential, not an API key');
        }
        return { data: await iam.issueSessionJwt(identity.credentialId) };
      },
    },
  };
}

function tenantStateBinding<K extends 'tenants.suspend' | 'tenants.reactivate' | 'tenants.delete'>(
  iam: Iam,
  apply: (tenantId: string) => Promise<unknown>,
): Binding<K> {
  return {
    // Decided in the parent tenant: a tenant's own admins cannot suspend or delete it.
    async resource(input: { id: string }) {
      const tenant = await iam.getTenant(input.id);
      return { type: 'iam-tenant', id: input.id, tenantId: tenant.parentId ?? ROOT_TENANT };
    },
    async run(input: { id: string }) {
      return { data: await apply(input.id) };
    },
  };
}

/** The paths IAM serves under its base, from the method table, plus `/can` for the `can` method. */
function routeTable(): Map<string, IamMethodName> {
  const routes = new Map<string, IamMethodName>();
  for (const [key, method] of Object.entries(iamMethods) as [IamMethodName, AnyMethod][])
    routes.set(methodPath(method), key);
  routes.set('/can', 'can');
  return routes;
}

/** Whether a method may run while the caller's own tenant is suspended (so a session can still end). */
const ALLOWED_WHILE_SUSPENDED: ReadonlySet<IamMethodName> = new Set(['sessions.signOut', 'sessions.get']);

export function createIamHandler(iam: Iam, internals: IamInternals): (request: Request) => Promise<Response> {
  const routes = routeTable();
  const bindings = createBindings(iam, internals);

  return async function handle(request: Request): Promise<Response> {
    const requestId = requestIdOf(request);
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
      const context: Context = { identity, request, url, tenantId, requestId };
      const binding = bindings[key] as Binding<IamMethodName>;

      if ('action' in method.access) {
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
      const failure = toComputeError(error);
      if (belongsInLog(failure, error))
        internals.log?.({ level: 'error', message: 'IAM request failed', requestId, error });
      return errorResponse(failure, requestId);
    }
  };
}
