/**
 * `POST {basePath}/mcp`: the MCP server over Streamable HTTP, stateless (a fresh server and transport
 * per request, JSON answers, no session). An agent's or service account's own credential only, as a
 * Bearer header (never a cookie, never a person's: docs/decisions/mcp-agents-only.md); the body
 * is capped at 1 MiB before it is parsed. Each tool call and resource read is one call of compute's
 * own `dispatch` with the request's Authorization header, so IAM, validation, rate limits,
 * idempotency and audit apply exactly as they do to the same call made directly.
 */
import {
  type AnyMethod,
  type Answer,
  type ClientInfo,
  ComputeError,
  errorAnswer,
  type IamBridge,
  payloadTooLarge,
  rateLimited,
  type RateLimiter,
  readBodyText,
  requestIdFrom,
  toComputeError,
  belongsInLog,
} from '@better-compute/core';
import { createGate } from '../http/gate.js';
import type { ApiCall, BesideEndpoint, HandlerLog } from '../http/handler.js';
import type { McpCall, McpCallError, McpCallResult } from './server.js';

/** The largest MCP request body: a batch of calls, each of at most the API's 64 KiB. */
const MCP_BODY_LIMIT_BYTES = 1024 * 1024;
/** The endpoint's path under the API's base path. */
const MCP_PATH = '/mcp';

export interface McpEndpointOptions {
  basePath: string;
  iam: IamBridge;
  trustedOrigins: readonly string[] | undefined;
  limiter: RateLimiter | undefined;
  /** compute's own dispatch; asked at each call (the handler is made after its beside endpoints). */
  dispatch: (call: ApiCall) => Promise<Answer | null>;
  /** The deployment's bound methods, the same array every time. */
  methods: () => readonly AnyMethod[];
  log: HandlerLog;
}

/** The kinds of principal the endpoint serves: MCP is for agents, never a person's own credential. */
const MCP_PRINCIPAL_KINDS: readonly string[] = ['agent', 'service-account'];

/** Refuses a person's credential, with the way to an agent's own (both transports say this). */
export function personRefused(): ComputeError {
  return new ComputeError('ACCESS_DENIED', 'the MCP server takes an agent’s own credential, not a person’s', {
    details: { reason: 'person-credential' },
    hint: 'Give the MCP client an agent’s API key: create an agent that acts for you (POST /api/iam/principals/create with kind agent and actingFor, then /api/iam/apiKeys/create for it; docs/mcp.md). A person’s key would let the model act with all of the person’s rights.',
  });
}

/** JSON-RPC's answer to a request refused before the protocol: compute's error in `data`. */
function refusal(failure: ComputeError, requestId: string): Response {
  const answer = errorAnswer(failure, requestId);
  const { error } = JSON.parse(answer.body) as { error: Record<string, unknown> };
  const headers: Record<string, string> = { ...answer.headers };
  if (failure.code === 'UNAUTHENTICATED') headers['www-authenticate'] = 'Bearer';
  return new Response(
    JSON.stringify({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32000, message: `${failure.code}: ${String(error.message)}`, data: { error } },
    }),
    { status: answer.status, headers },
  );
}

/** The requests of a body that reach no method (initialize, tools/list, ping): charged once. */
function chargesOwnCost(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some(
    (message) =>
      typeof message === 'object' &&
      message !== null &&
      'id' in message &&
      !['tools/call', 'resources/read'].includes(String((message as { method?: unknown }).method)),
  );
}

export function createMcpEndpoint(options: McpEndpointOptions): BesideEndpoint {
  const { basePath, limiter } = options;
  const gate = createGate(options.iam, options.trustedOrigins);
  const path = `${basePath}${MCP_PATH}`;
  // Loaded on the first request: a deployment that is never asked for MCP never loads the SDK.
  let sdk: Promise<Sdk> | undefined;

  async function serve(request: Request, client?: ClientInfo): Promise<Response> {
    const requestId = requestIdFrom(request.headers.get('x-request-id'));
    try {
      if (request.method !== 'POST') {
        const response = refusal(
          new ComputeError('NOT_FOUND', `no route ${request.method} ${path}; MCP is served with POST`, {
            hint: 'This endpoint is stateless: it answers POSTed JSON-RPC with JSON and keeps no event stream.',
          }),
          requestId,
        );
        return new Response(response.body, {
          status: 405,
          headers: { ...Object.fromEntries(response.headers), allow: 'POST' },
        });
      }
      const url = new URL(request.url);
      // Only the Authorization header: a cookie would let any page the person visits call tools.
      const authorization = request.headers.get('authorization');
      const identity = await gate.authenticate({
        method: request.method,
        origin: url.origin,
        header: (name) => (name === 'authorization' ? authorization : null),
      });
      if (!identity) {
        throw new ComputeError('UNAUTHENTICATED', 'the MCP server needs the agent’s credential', {
          hint: 'Send "Authorization: Bearer <the agent’s API key>".',
        });
      }
      if (!MCP_PRINCIPAL_KINDS.includes(identity.principalKind)) throw personRefused();
      await gate.checkTenant(identity, identity.tenantId);
      const text = await readBodyText(request, MCP_BODY_LIMIT_BYTES);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return Response.json(
          { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: the body is not JSON' } },
          { status: 400, headers: { 'x-request-id': requestId } },
        );
      }
      if (limiter && chargesOwnCost(body)) {
        const refused = limiter.charge(identity.principalId, {
          tenantId: identity.tenantId,
          cost: limiter.costOf('mcp', 'query'),
        });
        if (refused) throw rateLimited(refused.waitMs, refused.limit);
      }
      const loaded = await (sdk ??= loadSdk());
      const server = loaded.createMcpServer({
        call: callOf(authorization!, url.origin, requestId, client),
        methods: options.methods(),
        identity,
        jsonSchemaValidator: loaded.validator,
      });
      const transport = new loaded.Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      try {
        const response = await transport.handleRequest(request, { parsedBody: body });
        const headers = new Headers(response.headers);
        headers.set('x-request-id', requestId);
        headers.set('cache-control', 'no-store');
        return new Response(response.body, { status: response.status, headers });
      } finally {
        void server.close().catch(() => {});
      }
    } catch (error) {
      const failure = toComputeError(error);
      if (belongsInLog(failure, error))
        options.log({ level: 'error', message: 'MCP request failed', requestId, error });
      return refusal(failure, requestId);
    }
  }

  /** One API call as the caller, through compute's own pipeline. */
  function callOf(
    authorization: string,
    origin: string,
    requestId: string,
    client: ClientInfo | undefined,
  ): McpCall {
    let calls = 0;
    return async (method, input) => {
      const body = JSON.stringify(input);
      // The API call's request id names the MCP request it came from (its audit entry shows both).
      const callId = `${requestId.slice(0, 120)}.${++calls}`;
      const answer = await options.dispatch({
        method: 'POST',
        pathname: `${basePath}/${method.replaceAll('.', '/')}`,
        origin,
        header: (name) =>
          name === 'authorization'
            ? authorization
            : name === 'content-type'
              ? 'application/json'
              : name === 'x-request-id'
                ? callId
                : null,
        readBody: async (limit) => {
          if (body.length > limit || Buffer.byteLength(body) > limit) throw payloadTooLarge(limit);
          return body;
        },
        clientAddress: client?.clientAddress,
      });
      return answerOf(answer);
    };
  }

  return { paths: [path], serve };
}

/** The API's answer as a call's result: its data, or its error fields whole. */
function answerOf(answer: Answer | null): McpCallResult {
  if (!answer) return { error: { code: 'NOT_FOUND', message: 'no such method' } };
  const parsed = JSON.parse(answer.body) as { data?: unknown; error?: McpCallError };
  return parsed.error ? { error: parsed.error } : { data: parsed.data };
}

interface Sdk {
  createMcpServer: typeof import('./server.js').createMcpServer;
  Transport: typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js').WebStandardStreamableHTTPServerTransport;
  validator: import('@modelcontextprotocol/sdk/validation/types.js').jsonSchemaValidator;
}

async function loadSdk(): Promise<Sdk> {
  const [{ createMcpServer }, { WebStandardStreamableHTTPServerTransport }, { AjvJsonSchemaValidator }] =
    await Promise.all([
      import('./server.js'),
      import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
      import('@modelcontextprotocol/sdk/validation/ajv-provider.js'),
    ]);
  return {
    createMcpServer,
    Transport: WebStandardStreamableHTTPServerTransport,
    validator: new AjvJsonSchemaValidator(),
  };
}
