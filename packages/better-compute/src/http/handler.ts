/**
 * compute.handler: Request → Response, the whole pipeline of DESIGN section 4.
 *
 *  1 route  2 body limit + JSON  3 CSRF  4 authentication + tenant  5 rate limit  6 validation
 *  7 authorization  8 idempotency  9 the service, in one transaction with its events and audit
 *  10 the envelope.
 */
import {
  ComputeError,
  type IamBridge,
  type Identity,
  isTenantId,
  methodAction,
  methodBodyLimit,
  methodKey,
  methodPath,
  type Answer,
  BODY_LIMIT_BYTES,
  dataAnswer,
  errorAnswer,
  parseJsonBody,
  readBodyText,
  requestIdFrom,
  ROOT_TENANT,
  type ResourceRef,
  type RouteInfo,
  toComputeError,
  belongsInLog,
  toResponse,
  checkedBody,
  checkedPath,
  validatedInput,
  rateLimited,
  type RateLimiter,
  type ClientInfo,
  isRefusedCredential,
} from '@better-compute/core';
import { retryTransient } from '@better-compute/db';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { recordMutation, writeAudit } from '../db/unit-of-work.js';
import type { BoundMethod, CallContext, EventDraft } from '../modules/define-module.js';
import { createHash } from 'node:crypto';

export type { BoundMethod };
import {
  auditActorKind,
  type ConfirmationStore,
  type ConfirmationTicket,
  confirmationApplies,
  confirmationFor,
} from './confirmation.js';
import { createGate, denied } from './gate.js';
import {
  claimIdempotencyKey,
  type IdempotencyScope,
  openFields,
  packAnswer,
  sealFields,
} from './idempotency.js';
import { documentText, IDEMPOTENCY_HEADER, OPENAPI_PATH } from './openapi.js';

/**
 * One API call as the pipeline sees it. The web handler makes one from a Request; the Node adapter
 * makes one straight from the socket's message, skipping the Request and Response objects.
 */
export interface ApiCall {
  /** The HTTP method. */
  method: string;
  pathname: string;
  /** The origin the call was addressed to, for the same-origin cookie rule. */
  origin: string;
  /** A request header by its lowercase name. */
  header(name: string): string | null;
  /** The body as text; throws PAYLOAD_TOO_LARGE past the limit. */
  readBody(limit: number): Promise<string>;
  /**
   * The client's address, as the host found it (the socket's peer, or X-Forwarded-For from a
   * trusted proxy); public methods are limited by it. Absent in process: no per-address limit.
   */
  clientAddress?: string | null | undefined;
  /**
   * Told, once the credential and tenant steps know them, the tenant the call acts in and the
   * caller's kind: for the host's access line (host/access-log.ts). Never given a credential.
   */
  noteCaller?(caller: { tenantId: string; principalKind: string | null }): void;
}

export interface ComputeHandler {
  /**
   * The web-standard handler: compute's routes and IAM's. A host that knows the client's address
   * passes it in `client`, so public routes are limited per address (docs/rate-limits.md).
   */
  handler(request: Request, client?: ClientInfo): Promise<Response>;
  /** Compute's routes only, for hosts that talk to sockets; null for a path it does not serve (IAM's). */
  dispatch(call: ApiCall): Promise<Answer | null>;
}

export interface HandlerLog {
  (entry: { level: 'error' | 'warn' | 'info'; message: string; requestId?: string; error?: unknown }): void;
}

export interface HandlerOptions {
  basePath: string;
  methods: ReadonlyMap<string, BoundMethod>;
  routes: () => RouteInfo[];
  iam: IamBridge;
  /** IAM's own routes, served under `/api/iam`; `client` carries the client's address on. */
  iamHandler?: (request: Request, client?: ClientInfo) => Promise<Response>;
  db: () => Kysely<ComputeTables>;
  /** Origins allowed to call with a cookie; undefined means the request's own origin only. */
  trustedOrigins: readonly string[] | undefined;
  /** The per-identity limiter, shared with IAM's routes; undefined when the deployment turns it off. */
  limiter: RateLimiter | undefined;
  now: () => Date;
  log: HandlerLog;
  /**
   * Endpoints served beside the methods, each at its own paths (the live event stream at
   * `{basePath}/watch`, the MCP server at `{basePath}/mcp`): through `handler` only (`dispatch` leaves those paths
   * to it, as it does IAM's). They run their own credential and tenant steps (gate.ts).
   */
  beside?: readonly BesideEndpoint[] | undefined;
  /** Where agents' held calls wait for their person (the confirmations module); http/confirmation.ts. */
  confirmations?: ConfirmationStore | undefined;
}

export interface BesideEndpoint {
  /** Whole paths, each starting with `/`. */
  paths: readonly string[];
  serve(request: Request, client?: ClientInfo): Promise<Response>;
}

const IAM_BASE = '/api/iam';

/** Thrown out of a transaction to roll back a handler that ran before its kept answer was seen. */
class KeptAnswer extends Error {
  constructor(readonly answer: unknown) {
    super('an earlier call with this idempotency key answered');
  }
}

export function createHandler(options: HandlerOptions): ComputeHandler {
  const { basePath, methods, iam } = options;
  const { limiter } = options;
  const routeTable = new Map<string, BoundMethod>();
  for (const bound of methods.values()) routeTable.set(`${basePath}${methodPath(bound.method)}`, bound);

  const gate = createGate(iam, options.trustedOrigins);
  const confirmationOptions = { store: options.confirmations, iam, db: options.db, now: options.now };
  const authenticate = (request: ApiCall) => gate.authenticate(request);
  const checkTenant = (identity: Identity, tenant: string) => gate.checkTenant(identity, tenant);
  const besidePaths = new Map<string, BesideEndpoint>();
  for (const endpoint of options.beside ?? [])
    for (const path of endpoint.paths) besidePaths.set(path, endpoint);
  const documentPath = `${basePath}${OPENAPI_PATH}`;
  const isIamPath = (pathname: string) =>
    options.iamHandler !== undefined && (pathname === IAM_BASE || pathname.startsWith(`${IAM_BASE}/`));
  // The routes no earlier rule of `dispatch` takes, whose paths are plain (one reading only): a
  // request for one of them exactly needs no other look at its path, so it is routed first.
  const plainRoutes = new Map<string, BoundMethod>();
  for (const [path, bound] of routeTable)
    if (!isIamPath(path) && !besidePaths.has(path) && path !== documentPath && isPlainPath(path))
      plainRoutes.set(path, bound);
  // Made on the first request for it: the methods a handler serves never change while it runs.
  let openapi: { body: string; etag: string } | undefined;

  /**
   * `GET {basePath}/openapi.json`: public, cacheable, and an `If-None-Match` naming its ETag is
   * answered 304. Limited by the client's address like the public methods (docs/openapi.md).
   */
  function serveDocument(request: ApiCall, requestId: string): Answer {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      throw new ComputeError('NOT_FOUND', `no route ${request.method} ${request.pathname}; read it with GET`);
    }
    const address = limiter ? request.clientAddress : null;
    if (address) {
      const refused = limiter!.admitAddress(address, limiter!.costOf('openapi', 'query'));
      if (refused) throw rateLimited(refused.waitMs, refused.limit);
    }
    if (!openapi) {
      const body = documentText(
        [...methods.values()].map((bound) => bound.method),
        { basePath },
      );
      const digest = createHash('sha256').update(body).digest('base64url').slice(0, 32);
      openapi = { body, etag: `"${digest}"` };
    }
    const headers = {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'public, max-age=300',
      etag: openapi.etag,
      'x-request-id': requestId,
    };
    if (namesTag(request.header('if-none-match'), openapi.etag)) return { status: 304, headers, body: '' };
    // A HEAD gets the same length; the host leaves the body out (Node does, as does `handler`).
    return { status: 200, headers, body: openapi.body };
  }

  /**
   * A public method spends no identity's budget: it is admitted by the client's address first,
   * and a credential it refuses (a wrong join token, claim secret, node credential) counts against
   * that address (docs/rate-limits.md).
   */
  function call(request: ApiCall, bound: BoundMethod, requestId: string): Promise<Answer> {
    const address = limiter && 'public' in bound.method.access ? request.clientAddress : null;
    // Not an async function: most calls go straight to `run`, without another promise around it.
    return address ? callFromAddress(request, bound, requestId, address) : run(request, bound, requestId);
  }

  async function callFromAddress(
    request: ApiCall,
    bound: BoundMethod,
    requestId: string,
    address: string,
  ): Promise<Answer> {
    const refused = limiter!.admitAddress(
      address,
      limiter!.costOf(methodKey(bound.method), bound.method.kind),
    );
    if (refused) throw rateLimited(refused.waitMs, refused.limit);
    try {
      return await run(request, bound, requestId);
    } catch (error) {
      if (isRefusedCredential(error)) limiter!.addressFailed(address);
      throw error;
    }
  }

  async function run(request: ApiCall, bound: BoundMethod, requestId: string): Promise<Answer> {
    const { method, handler } = bound;
    const key = methodKey(method);
    const isPublic = 'public' in method.access;
    const needsCredential = (found: Identity | null) => {
      if (!found && !isPublic) {
        throw new ComputeError('UNAUTHENTICATED', `${key} needs a credential`, {
          hint: 'Set BETTER_COMPUTE_TOKEN, or sign in with better-iam login or better-compute auth login.',
        });
      }
    };
    // A method that takes more than the API's 64 KiB (a whole FleetConfig document) reads its body
    // only once the credential is accepted: an anonymous caller never makes the server hold more.
    const limit = methodBodyLimit(method, BODY_LIMIT_BYTES);
    const early = limit > BODY_LIMIT_BYTES ? await authenticate(request) : undefined;
    if (early !== undefined) needsCredential(early);
    // 2. body
    const raw = checkedBody(parseJsonBody(await request.readBody(limit)));
    keyFromHeader(method, raw, request.header(IDEMPOTENCY_HEADER.toLowerCase()));
    // 3 + 4. credential (with the CSRF rule) and tenant
    // No await without a credential: `authenticate` answers null at once.
    const pending = early !== undefined ? null : authenticate(request);
    const identity = early !== undefined ? early : pending ? await pending : null;
    needsCredential(identity);
    let tenantId = identity?.tenantId ?? ROOT_TENANT;
    if (method.tenantScoped) {
      if (raw.tenantId === undefined && identity) raw.tenantId = identity.tenantId;
      if (!isTenantId(raw.tenantId)) {
        throw new ComputeError('INVALID_ARGUMENT', 'tenantId must be a tenant id such as acme', {
          details: { field: 'tenantId' },
        });
      }
      tenantId = raw.tenantId;
    }
    request.noteCaller?.({ tenantId, principalKind: identity?.principalKind ?? null });
    if (identity) await checkTenant(identity, tenantId);
    // The platform's own methods (releases) act in the root tenant only, refused before the input
    // is read, as another tenant's credential is.
    if (method.platformOnly && tenantId !== ROOT_TENANT)
      throw denied(
        `${key} is the platform's: only the root tenant calls it`,
        { reason: 'platform-only' },
        'Call it as a platform operator, with a credential of the root tenant (--tenant root).',
      );
    // 5. rate limit: the method's cost, from the identity's budget and its tenant's
    if (identity && limiter) {
      const refused = limiter.charge(identity.principalId, {
        tenantId: identity.tenantId,
        cost: limiter.costOf(key, method.kind),
      });
      if (refused) throw rateLimited(refused.waitMs, refused.limit);
    }
    // 6. validation
    const input = validatedInput(method.input, raw) as Record<string, unknown>;
    // 7. authorization
    const action = method.actionFor?.(input) ?? methodAction(method);
    const resource: ResourceRef = { type: 'tenant', id: tenantId, ...method.resource?.(input), tenantId };
    // Read before the decision, so `@own` patterns see the resource's owner.
    const ownerId = bound.owner ? await bound.owner(options.db(), tenantId, input) : null;
    if (ownerId) resource.ownerId = ownerId;
    const audit =
      identity && method.kind === 'mutation' && action
        ? {
            tenantId,
            actor: identity.principalId,
            actorKind: auditActorKind(identity),
            action,
            method: key,
            resource,
            requestId,
          }
        : undefined;
    // Further decisions on what the input names (a volume a sandbox template mounts), read before
    // the transaction as the owner is, and decided in the same call.
    const more =
      bound.checks && identity
        ? await bound.checks(options.db(), tenantId, input, {
            identity,
            tenantExists: async (id) => (await iam.tenantState(id)) !== null,
            authorize: (checks) => iam.authorize(identity, checks),
          })
        : [];
    if (action && identity) {
      const [decision, ...others] = await iam.authorize(identity, [{ action, resource }, ...more]);
      const refused = more.findIndex((_, i) => !others[i]?.allowed);
      if (decision?.allowed && refused >= 0) {
        const check = more[refused]!;
        if (audit)
          await writeAudit(options.db(), { ...audit, outcome: 'denied', errorCode: 'ACCESS_DENIED' });
        throw denied(
          `${check.action} is not allowed on ${check.resource.type} ${check.resource.id ?? ''}`.trim(),
          { action: check.action, reason: others[refused]?.reason ?? 'no decision' },
          `Your roles in tenant ${tenantId} do not grant ${check.action} on it: ask an administrator of ${tenantId} to bind a role that does (better-iam bindings).`,
        );
      }
      if (!decision?.allowed) {
        if (audit)
          await writeAudit(options.db(), { ...audit, outcome: 'denied', errorCode: 'ACCESS_DENIED' });
        // The tenant was checked above: what is missing is a role that grants the action.
        throw denied(
          `${action} is not allowed on ${resource.type}${resource.id ? ` ${resource.id}` : ''}`,
          { action, reason: decision?.reason ?? 'no decision' },
          `Your roles in tenant ${tenantId} do not grant ${action}: ask an administrator of ${tenantId} to bind a role that does (better-iam bindings).`,
        );
      }
    }
    // Other tenants the input names must exist, asked before the transaction: an embedded IAM may
    // share the database, and on PGlite its one connection.
    for (const field of method.namesTenants ?? []) {
      const named = (input as Record<string, unknown>)[field];
      if (typeof named === 'string' && (await iam.tenantState(named)) === null)
        throw new ComputeError('NOT_FOUND', `tenant ${named} does not exist`, {
          details: { id: named, field },
          hint: 'Name a tenant by its id in Better IAM, such as acme.',
        });
    }
    const db = options.db();
    const events: EventDraft[] = [];
    const context = (executor: Kysely<ComputeTables>): CallContext => ({
      input,
      identity,
      tenantId,
      requestId,
      db: executor,
      emit: (event) => void events.push(event),
      now: options.now,
      tenantExists: async (id) => (await iam.tenantState(id)) !== null,
      routes: options.routes,
    });
    const confirmationCall = { identity, method, action, tenantId, resource, input, requestId };
    const confirms = confirmationApplies(confirmationCall);
    if (method.kind === 'query') {
      if (confirms) await confirmationFor(confirmationOptions, confirmationCall);
      return dataAnswer(await handler(context(db)), requestId);
    }
    // 8 + 9. idempotency, the change, its events and its audit entry: one transaction. One that
    // PostgreSQL aborted for meeting others (a deadlock's victim) kept nothing, and runs again.
    try {
      // An agent's call its delegation holds runs only with its person's approval (confirmation.ts).
      const ticket: ConfirmationTicket | null = confirms
        ? await confirmationFor(confirmationOptions, confirmationCall)
        : null;
      const result = await retryTransient(() =>
        db.transaction().execute(async (trx) => {
          events.length = 0;
          const idempotencyKey =
            method.idempotent && typeof input.idempotencyKey === 'string' ? input.idempotencyKey : undefined;
          const scope: IdempotencyScope | undefined = idempotencyKey
            ? { tenantId, principalId: identity?.principalId ?? '', method: key, key: idempotencyKey }
            : undefined;
          // A method whose handler does nothing outside its transaction runs before its key is
          // read: the read goes out with the handler's first statement, and a kept answer found
          // then rolls back what the handler did (docs/decisions/0003-idempotency.md).
          const early = Boolean(scope && method.claimsWithFirstStatement);
          const pending = scope
            ? await claimIdempotencyKey(trx, scope, input, options.now(), {
                withNextStatement: early,
                secretInput: Boolean(method.secretInput?.length),
              })
            : undefined;
          const ran = early
            ? await handler(context(trx)).then(
                (data) => ({ data }),
                (error: unknown) => ({ error }),
              )
            : undefined;
          const claim = await pending?.settle();
          if (claim?.kind === 'replay') {
            // Parsed again, so a replay's keys come in the output schema's order, as the first answer's.
            const kept = method.output.parse(openFields(claim.response, method.sealed, scope!));
            if (ran) throw new KeptAnswer(kept);
            return { replayed: true as const, data: kept };
          }
          if (ran && 'error' in ran) throw ran.error;
          if (ticket?.kind === 'replay-only') throw options.confirmations!.spent(ticket);
          const data = ran ? ran.data : await handler(context(trx));
          const output = method.output.parse(data);
          // Spent with the change: a call that fails leaves its confirmation approved.
          if (ticket) events.push(await options.confirmations!.consume(trx, ticket, options.now()));
          await recordMutation(trx, {
            events,
            meta: { tenantId, actor: identity?.principalId ?? null, requestId },
            audit: audit && { ...audit, outcome: 'allowed' },
            idempotency:
              scope && claim?.kind === 'new'
                ? { ...claim.key, answer: packAnswer(sealFields(output, method.sealed, scope)) }
                : undefined,
          });
          return { replayed: false as const, data: output };
        }),
      ).catch((error: unknown) => {
        if (error instanceof KeptAnswer) return { replayed: true as const, data: error.answer };
        throw error;
      });
      const data =
        bound.settle && !result.replayed
          ? method.output.parse(await bound.settle(result.data, { db, input, tenantId, now: options.now }))
          : result.data;
      return dataAnswer(data, requestId, 200, result.replayed ? { 'idempotent-replayed': 'true' } : {});
    } catch (error) {
      if (audit) {
        const code = toComputeError(error).code;
        await writeAudit(db, { ...audit, outcome: 'failed', errorCode: code }).catch(() => {});
      }
      throw error;
    }
  }

  async function dispatch(request: ApiCall): Promise<Answer | null> {
    const { pathname } = request;
    const requestId = requestIdFrom(request.header('x-request-id'));
    try {
      // 1. route: a plain route's own path first; anything else is looked at before routing.
      let bound = plainRoutes.get(pathname);
      if (!bound) {
        // For IAM's paths too: a path with two readings is refused, not normalised.
        checkedPath(pathname);
        if (isIamPath(pathname)) return null;
        if (besidePaths.has(pathname)) return null;
        if (pathname === documentPath) return serveDocument(request, requestId);
        bound = routeTable.get(pathname);
      }
      if (!bound) {
        throw new ComputeError('NOT_FOUND', `no route ${request.method} ${pathname}`, {
          hint: 'Run better-compute api --list for the routes this deployment serves.',
        });
      }
      if (request.method !== 'POST') {
        throw new ComputeError(
          'NOT_FOUND',
          `no route ${request.method} ${pathname}; methods are called with POST`,
        );
      }
      return await call(request, bound, requestId);
    } catch (error) {
      const failure = toComputeError(error);
      if (belongsInLog(failure, error))
        options.log({ level: 'error', message: 'request failed', requestId, error });
      return errorAnswer(failure, requestId);
    }
  }

  async function handler(request: Request, client?: ClientInfo): Promise<Response> {
    const url = new URL(request.url);
    const beside = besidePaths.get(url.pathname);
    if (beside) return beside.serve(request, client);
    const answer = await dispatch({
      method: request.method,
      pathname: url.pathname,
      origin: url.origin,
      header: (name) => request.headers.get(name),
      readBody: (limit) => readBodyText(request, limit),
      clientAddress: client?.clientAddress,
    });
    // A 304 and a HEAD answer carry no body, and a Response refuses one with a 304.
    if (answer && (answer.status === 304 || request.method === 'HEAD'))
      return new Response(null, { status: answer.status, headers: answer.headers });
    if (answer) return toResponse(answer);
    return options.iamHandler!(request, client);
  }

  return { handler, dispatch };
}

/** Whether checkedPath lets a path through as it is. */
function isPlainPath(pathname: string): boolean {
  try {
    return checkedPath(pathname) === pathname;
  } catch {
    return false;
  }
}

/** Whether an `If-None-Match` header names `etag` (weak or strong), or is `*`. */
function namesTag(header: string | null, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed.replace(/^W\//, '') === etag;
  });
}

/**
 * The `Idempotency-Key` header, for clients that send the key the way most HTTP APIs take it: on a
 * method that keeps answers it is the body's `idempotencyKey` (both given, they must agree); on a
 * mutation that keeps none it is refused, since the caller believes a retry is safe and it is not
 * (docs/decisions/openapi.md). A query is safe to retry anyway, and ignores it.
 */
function keyFromHeader(
  method: BoundMethod['method'],
  raw: Record<string, unknown>,
  header: string | null,
): void {
  if (header === null || method.kind === 'query') return;
  const key = methodKey(method);
  if (!method.idempotent) {
    throw new ComputeError('INVALID_ARGUMENT', `${key} takes no idempotency key`, {
      details: { field: IDEMPOTENCY_HEADER },
      hint: `Leave out the ${IDEMPOTENCY_HEADER} header: a retry of ${key} runs it again, so check its effect before retrying.`,
    });
  }
  if (raw.idempotencyKey === undefined) raw.idempotencyKey = header;
  else if (raw.idempotencyKey !== header) {
    throw new ComputeError('INVALID_ARGUMENT', `the ${IDEMPOTENCY_HEADER} header and idempotencyKey differ`, {
      details: { field: 'idempotencyKey' },
      hint: 'Send the key once, in the header or in the body.',
    });
  }
}
