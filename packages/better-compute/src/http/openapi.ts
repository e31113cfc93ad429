/**
 * The OpenAPI 3.1 document of the routes a handler serves, derived from their method definitions:
 * nothing here is written by hand per method, so the document cannot drift from the routes. Each
 * method is a `POST {basePath}/{group}/{name}` whose body is its input (zod → JSON Schema 2020-12,
 * the dialect OpenAPI 3.1 uses) and whose answer is `{ "data": output }` or the error envelope
 * (docs/openapi.md). The schemas are made by each schema's own `toJSONSchema`, so the zod that
 * declared them, with its descriptions, is the one that converts them. Output is sorted and holds
 * only what the definitions say: no configuration, no secret.
 */
import {
  type AnyMethod,
  BODY_LIMIT_BYTES,
  ERROR_STATUS,
  isPublicMethod,
  methodAction,
  methodKey,
  methodPath,
  PRODUCT,
  VERSION,
} from '@better-compute/core';

type Json = Record<string, unknown>;

export interface OpenApiDocument extends Json {
  openapi: string;
  info: Json;
  paths: Record<string, Json>;
  components: Json & { schemas: Record<string, Json> };
}

export interface DocumentOptions {
  /** Where the routes are served, `/api/compute` by default. */
  basePath: string;
}

/** The path the document itself is served at, under the base path. */
export const OPENAPI_PATH = '/openapi.json';

/** The header a mutation that keeps answers takes its key from, besides the body's `idempotencyKey`. */
export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

const DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/**
 * Codes only the command line or a server that fails to start answers: never in an API answer, so
 * they are left out of the responses' code lists.
 */
const NOT_FROM_THE_API = new Set([
  'INVALID_COMMAND',
  'MISSING_ENV',
  'CONFIG_NOT_FOUND',
  'DOCTOR_FINDINGS',
  'INVALID_RESPONSE',
  'INVALID_CONFIG',
  // `fleet plan|status --fail-on-drift`: the CLI's verdict on an answer, never an answer itself.
  'FLEET_DRIFTED',
]);

/** The error statuses every operation lists, with a name for the response component. */
const ERROR_RESPONSES: ReadonlyArray<{ status: number; name: string; when: string; mutationsOnly?: true }> = [
  { status: 400, name: 'InvalidArgument', when: 'The body or a field is not what the method takes.' },
  {
    status: 401,
    name: 'Unauthenticated',
    when: 'No credential where one is needed, or one that is refused (a wrong token or secret).',
  },
  {
    status: 403,
    name: 'AccessDenied',
    when: 'IAM does not allow the action, the tenant is not the credential’s, the tenant is suspended, or the cookie broke the CSRF rule.',
  },
  {
    status: 404,
    name: 'NotFound',
    when: 'What the input names does not exist, or is not the caller’s to see.',
  },
  {
    status: 409,
    name: 'Conflict',
    when: 'The change meets the resource’s state, an `ifVersion`, a quota, or an idempotency key used with other input.',
    mutationsOnly: true,
  },
  { status: 413, name: 'PayloadTooLarge', when: `The body is larger than ${BODY_LIMIT_BYTES / 1024} KiB.` },
  {
    status: 429,
    name: 'RateLimited',
    when: 'The identity’s, its tenant’s or (for a public method) the client address’s budget is spent; `Retry-After` says when to call again (docs/rate-limits.md).',
  },
];

/** The API's codes that travel with an HTTP status, sorted. */
function codesOf(status: number): string[] {
  return Object.entries(ERROR_STATUS)
    .filter(([code, travels]) => travels === status && !NOT_FROM_THE_API.has(code))
    .map(([code]) => code)
    .sort();
}

/** A component name for a method: `pools.list` → `PoolsList`, `plugins.acme.gpu.get` → `PluginsAcmeGpuGet`. */
function componentName(key: string): string {
  return key
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word[0]!.toUpperCase() + word.slice(1))
    .join('');
}

/**
 * A method's schema as JSON Schema. `$schema` goes (the document names its dialect once), and a
 * recursive schema's `$defs` move to `defs` as `{prefix}_{Name}`, referred to as
 * `#/components/schemas/…`: a `#/$defs/…` inside a component would be read against the document's
 * root. The MCP server's tools (mcp/tools.ts) take their input schemas from here too.
 */
export function jsonSchemaOf(
  schema: AnyMethod['input'],
  io: 'input' | 'output',
  prefix: string,
  defs: Json,
): Json {
  // `unrepresentable: 'any'`: a plugin's schema with a type JSON Schema cannot say (a Date, a
  // transform's output) becomes an open schema for that field instead of breaking the document.
  const converted = schema.toJSONSchema({ target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
  delete converted.$schema;
  const local = converted.$defs as Record<string, Json> | undefined;
  delete converted.$defs;
  if (!local) return converted;
  const renamed = (name: string) => `${prefix}_${componentName(name)}`;
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (typeof value !== 'object' || value === null) return value;
    const out: Json = {};
    for (const [key, inner] of Object.entries(value)) {
      out[key] =
        key === '$ref' && typeof inner === 'string' && inner.startsWith('#/$defs/')
          ? `#/components/schemas/${renamed(inner.slice('#/$defs/'.length))}`
          : rewrite(inner);
    }
    return out;
  };
  for (const [name, def] of Object.entries(local)) defs[renamed(name)] = rewrite(def);
  return rewrite(converted) as Json;
}

const ref = (name: string, kind = 'schemas') => ({ $ref: `#/components/${kind}/${name}` });

/** Sorts an object's keys, so the document's text depends on its content only. */
function sortedKeys<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

function operationOf(method: AnyMethod, names: { input: string; output: string }, inputSchema: Json): Json {
  const key = methodKey(method);
  const isPublic = isPublicMethod(method);
  const action = methodAction(method);
  const takesKey = method.kind === 'mutation' && method.idempotent === true;
  const required = Array.isArray(inputSchema.required) ? inputSchema.required : [];
  const access = isPublic
    ? 'Public: no credential needed; limited by the client’s address.'
    : action
      ? `Needs a credential whose roles grant \`${action}\`.`
      : 'Needs a credential; any identity may call it for itself.';
  const successHeaders: Json = { 'X-Request-Id': ref('RequestId', 'headers') };
  if (takesKey) successHeaders['Idempotent-Replayed'] = ref('IdempotentReplayed', 'headers');
  const responses: Json = {
    '200': {
      description: 'The answer: `{ "data": … }`.',
      headers: successHeaders,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: { data: ref(names.output) },
            required: ['data'],
            additionalProperties: false,
          },
        },
      },
    },
  };
  for (const error of ERROR_RESPONSES) {
    if (error.mutationsOnly && method.kind !== 'mutation') continue;
    responses[String(error.status)] = ref(error.name, 'responses');
  }
  responses.default = ref('Failure', 'responses');
  const parameters: Json[] = [ref('RequestId', 'parameters')];
  if (takesKey) parameters.push(ref('IdempotencyKey', 'parameters'));
  const operation: Json = {
    operationId: key,
    tags: [method.group],
    summary: method.summary,
    description: [
      access,
      method.tenantScoped
        ? '`tenantId` is the tenant acting; omitted, it is the credential’s own tenant.'
        : undefined,
      takesKey
        ? `Takes an idempotency key (the \`${IDEMPOTENCY_HEADER}\` header or \`idempotencyKey\` in the body): a retry with the same key and input answers the first call’s answer.`
        : undefined,
    ]
      .filter(Boolean)
      .join(' '),
    parameters,
    requestBody: {
      required: required.length > 0,
      content: { 'application/json': { schema: ref(names.input) } },
    },
    responses,
    'x-method': key,
    'x-kind': method.kind,
    'x-module': method.module,
    'x-access': isPublic ? 'public' : action ? 'action' : 'authenticated',
  };
  if (action) operation['x-iam-action'] = action;
  if (method.alsoActions?.length) operation['x-iam-also-actions'] = [...method.alsoActions].sort();
  if (!isPublic) operation.security = [{ bearerAuth: [] }];
  return operation;
}

/** The error envelope's schema, its `code` held to `codes` when given. */
function errorEnvelope(codes?: string[]): Json {
  if (!codes) return ref('ErrorEnvelope');
  return {
    allOf: [
      ref('ErrorEnvelope'),
      { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: codes } } } } },
    ],
  };
}

/** The components every document shares: the envelope, the headers and parameters, the scheme. */
function sharedComponents(idempotencyKey: Json | undefined) {
  const responses: Json = {
    Failure: {
      description:
        'Any other failure (`INTERNAL`, `UNAVAILABLE`, `UNSUPPORTED`, or a plugin’s own code), in the error envelope.',
      headers: { 'X-Request-Id': ref('RequestId', 'headers') },
      content: { 'application/json': { schema: errorEnvelope() } },
    },
  };
  for (const error of ERROR_RESPONSES) {
    const codes = codesOf(error.status);
    const headers: Json = { 'X-Request-Id': ref('RequestId', 'headers') };
    if (error.status === 429) headers['Retry-After'] = ref('RetryAfter', 'headers');
    responses[error.name] = {
      description: `${error.when} Codes: ${codes.map((code) => `\`${code}\``).join(', ')}.`,
      headers,
      content: { 'application/json': { schema: errorEnvelope(codes) } },
    };
  }
  const parameters: Json = {
    RequestId: {
      name: 'X-Request-Id',
      in: 'header',
      required: false,
      description:
        'The caller’s id for this request (letters, digits and `._:-`, at most 128), echoed in the answer; a new one when absent or malformed.',
      schema: { type: 'string', maxLength: 128, pattern: '^[A-Za-z0-9._:-]{1,128}$' },
    },
  };
  if (idempotencyKey) {
    parameters.IdempotencyKey = {
      name: IDEMPOTENCY_HEADER,
      in: 'header',
      required: false,
      description:
        'Keeps the answer of this call for 24 hours: a retry with the same key and input gets it back instead of running again; the same key with other input is `CONFLICT`. Same as `idempotencyKey` in the body; both given, they must be equal.',
      schema: idempotencyKey,
    };
  }
  return {
    responses: sortedKeys(responses),
    parameters: sortedKeys(parameters),
    headers: {
      IdempotentReplayed: {
        description: '`true` when the answer is the one kept under the call’s idempotency key.',
        schema: { type: 'string', enum: ['true'] },
      },
      RequestId: { description: 'The request’s id, for support and the logs.', schema: { type: 'string' } },
      RetryAfter: {
        description: 'Whole seconds to wait before calling again.',
        schema: { type: 'integer', minimum: 1 },
      },
    },
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description:
          'A Better IAM session token, API key or session JWT. A browser may instead send the `better-iam.session` cookie with `X-Better-Compute: 1` from a trusted origin (docs/request-checks.md).',
      },
    },
  };
}

/**
 * The OpenAPI 3.1 document of `methods` served under `options.basePath`: the built-in table and
 * whatever plugin methods a deployment bound. Paths, components and tags are sorted, so the same
 * methods give the same text.
 */
export function documentOf(methods: Iterable<AnyMethod>, options: DocumentOptions): OpenApiDocument {
  const basePath = options.basePath.replace(/\/+$/, '');
  const paths: Record<string, Json> = {};
  const schemas: Record<string, Json> = {};
  const taken = new Map<string, string>();
  const groups = new Set<string>();
  let idempotencyKey: Json | undefined;
  const sorted = [...methods].sort((a, b) => (methodPath(a) < methodPath(b) ? -1 : 1));
  for (const method of sorted) {
    const key = methodKey(method);
    let base = componentName(key);
    // Two keys that spell one name (`a-b.c`, `aB.c`) keep apart by the table's order: sorted.
    for (let n = 2; taken.has(base) && taken.get(base) !== key; n++) base = `${componentName(key)}${n}`;
    taken.set(base, key);
    const names = { input: `${base}Input`, output: `${base}Output` };
    const input = jsonSchemaOf(method.input, 'input', names.input, schemas);
    // A tenant-scoped method fills `tenantId` from the credential when the body leaves it out.
    if (method.tenantScoped && Array.isArray(input.required)) {
      input.required = input.required.filter((field) => field !== 'tenantId');
      if ((input.required as unknown[]).length === 0) delete input.required;
    }
    const properties = input.properties as Record<string, Json> | undefined;
    if (method.idempotent && properties?.idempotencyKey && !idempotencyKey) {
      const { description: _described, ...shape } = properties.idempotencyKey;
      idempotencyKey = shape;
    }
    schemas[names.input] = input;
    schemas[names.output] = jsonSchemaOf(method.output, 'output', names.output, schemas);
    paths[`${basePath}${methodPath(method)}`] = { post: operationOf(method, names, input) };
    groups.add(method.group);
  }
  paths[`${basePath}${OPENAPI_PATH}`] = {
    get: {
      operationId: 'openapi',
      tags: ['openapi'],
      summary: 'This document',
      description:
        'Public and cacheable: answers `304 Not Modified` to an `If-None-Match` that names its `ETag`.',
      responses: {
        '200': {
          description: 'The OpenAPI document of the routes this deployment serves, plugins included.',
          headers: { ETag: { schema: { type: 'string' } } },
          content: { 'application/json': { schema: { type: 'object' } } },
        },
        '304': { description: 'The document the `If-None-Match` names has not changed.' },
        '429': ref('RateLimited', 'responses'),
      },
    },
  };
  groups.add('openapi');
  const shared = sharedComponents(idempotencyKey);
  return {
    openapi: '3.1.1',
    jsonSchemaDialect: DIALECT,
    info: {
      title: `${PRODUCT} API`,
      version: VERSION,
      description: [
        'Every method is `POST {basePath}/{group}/{name}` with a JSON body of at most',
        `${BODY_LIMIT_BYTES / 1024} KiB; it answers \`{ "data": … }\`, or \`{ "error": { code, message, details?, hint?, requestId } }\``,
        'with the status of its code. `x-iam-action` is the IAM action a call is decided on.',
        'The live event stream (`{basePath}/watch`) and Better IAM’s routes (`/api/iam`) are documented',
        'apart (docs/live-events.md).',
      ].join(' '),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    tags: [...groups].sort().map((name) => ({ name })),
    paths: sortedKeys(paths),
    components: {
      schemas: sortedKeys({
        ...schemas,
        ErrorEnvelope: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'requestId'],
              properties: {
                code: {
                  type: 'string',
                  description: 'A stable UPPER_SNAKE code; its HTTP status is the answer’s.',
                },
                message: { type: 'string' },
                details: {
                  type: 'object',
                  description:
                    'Structured details: `issues` for a refused input (docs/request-checks.md), `retryAfterMs` and `limit` for `RATE_LIMITED`, …',
                },
                hint: { type: 'string', description: 'What to run or set next.' },
                requestId: { type: 'string' },
              },
            },
          },
        },
      }),
      ...shared,
    },
  };
}

/** The document as the handler serves it and `better-compute openapi` prints it. */
export function documentText(methods: Iterable<AnyMethod>, options: DocumentOptions): string {
  return `${JSON.stringify(documentOf(methods, options), null, 2)}\n`;
}
