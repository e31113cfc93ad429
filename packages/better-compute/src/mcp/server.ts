/**
 * The MCP server over one caller's credential: the SDK's low-level `Server` with the tools and
 * resources of tools.ts, each answered by `call`, which performs the API call as the caller (the
 * handler's `dispatch` over HTTP, the CLI's transport over stdio). The server decides nothing
 * itself: validation, IAM, rate limits, idempotency and audit are the API's, and an argument or a
 * result is passed through as data, never read for meaning (docs/mcp.md).
 */
import { type AnyMethod, isRecord, VERSION } from '@better-compute/core';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import {
  DATA_NOT_INSTRUCTIONS,
  deriveResources,
  deriveTools,
  EVENTS_URI,
  parseResourceUri,
  type ResourceEntry,
  type ToolEntry,
} from './tools.js';

/** A failed call as the API answered it: its code, message, hint and details, passed on whole. */
export interface McpCallError {
  code: string;
  message: string;
  hint?: string | undefined;
  details?: Record<string, unknown> | undefined;
  requestId?: string | undefined;
}

export type McpCallResult = { data: unknown } | { error: McpCallError };

/** Performs one API call as the server's caller: `method` is a method key, `input` its body. */
export type McpCall = (method: string, input: Record<string, unknown>) => Promise<McpCallResult>;

/** Who the server acts as (from the credential), named in its instructions. */
interface McpIdentity {
  principalId: string;
  principalKind: string;
  tenantId: string;
  actingFor?: string | undefined;
}

export interface McpServerOptions {
  call: McpCall;
  /** The methods to offer: the deployment's bound methods, or the table the CLI knows that the server serves. */
  methods: readonly AnyMethod[];
  identity: McpIdentity;
  /**
   * `resources/subscribe` on compute://events, followed by polling events.list every `pollMs`; only
   * where the connection lasts (stdio). Absent, the events are followed by cursor.
   */
  subscribe?: { pollMs: number } | undefined;
  /** Diagnostics (a subscription's failed poll); never a credential. */
  log?: ((message: string) => void) | undefined;
  /** The JSON Schema validator the SDK's server keeps (one per process is enough; it is made per server otherwise). */
  jsonSchemaValidator?: jsonSchemaValidator | undefined;
}

/** The tools and resources of a method list, derived once per list. */
interface McpCatalog {
  tools: ToolEntry[];
  byName: Map<string, ToolEntry>;
  resources: ResourceEntry[];
  /** Whether events.list is among the methods: compute://events is offered then. */
  events: boolean;
  /** `tools/list`'s answer, made once. */
  listed: { tools: ToolEntry['tool'][] };
}

const catalogs = new WeakMap<readonly AnyMethod[], McpCatalog>();

/** The catalog of `methods`, kept for as long as the list itself. */
function catalogOf(methods: readonly AnyMethod[]): McpCatalog {
  let catalog = catalogs.get(methods);
  if (!catalog) {
    const tools = deriveTools(methods);
    catalog = {
      tools,
      byName: new Map(tools.map((entry) => [entry.tool.name, entry])),
      resources: deriveResources(methods),
      events: methods.some((method) => method.group === 'events' && method.name === 'list'),
      listed: { tools: tools.map((entry) => entry.tool) },
    };
    catalogs.set(methods, catalog);
  }
  return catalog;
}

/** A JSON-RPC error code for an API failure behind a resource (the server's own range). */
const API_FAILURE = -32000;
/** The code MCP gives a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002;

/** An id as the instructions may quote it: only the characters ids are written in. */
const plainId = (value: string) => value.replace(/[^A-Za-z0-9_.:@-]/g, '').slice(0, 80);

/** What a failure says to the model: `CODE: message`, then the hint. */
function failureText(error: McpCallError): string {
  return error.hint
    ? `${error.code}: ${error.message}\nHint: ${error.hint}`
    : `${error.code}: ${error.message}`;
}

/** A tool's result from the API's answer: the data as structured content and as JSON text, or the failure. */
function toolResult(result: McpCallResult): CallToolResult {
  if ('error' in result) {
    return {
      isError: true,
      content: [{ type: 'text', text: failureText(result.error) }],
      structuredContent: { error: result.error },
    };
  }
  const text = JSON.stringify(result.data ?? null);
  return isRecord(result.data)
    ? { content: [{ type: 'text', text }], structuredContent: result.data }
    : { content: [{ type: 'text', text }] };
}

/** A server for one caller; connect it to a transport (a fresh one per request over HTTP). */
export function createMcpServer(options: McpServerOptions): Server {
  const { call, identity } = options;
  const catalog = catalogOf(options.methods);
  const subscribable = Boolean(options.subscribe && catalog.events);
  const acting = identity.actingFor ? ` for ${plainId(identity.actingFor)}` : '';
  const server = new Server(
    { name: 'better-compute', title: 'better-compute', version: VERSION },
    {
      capabilities: {
        tools: {},
        resources: subscribable ? { subscribe: true } : {},
      },
      instructions: [
        `The better-compute API of tenant ${plainId(identity.tenantId)}, as ${plainId(identity.principalKind)} ${plainId(identity.principalId)}${acting}.`,
        'Each tool is one API method; IAM decides every call as it does for the API, and a refusal comes back as the API’s code, message and hint.',
        'Destructive work on nodes goes through propose_command_batch: the person’s approvers sign it.',
        DATA_NOT_INSTRUCTIONS,
      ].join(' '),
      ...(options.jsonSchemaValidator ? { jsonSchemaValidator: options.jsonSchemaValidator } : {}),
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, () => catalog.listed);

  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const entry = catalog.byName.get(request.params.name);
    if (!entry) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `no tool ${JSON.stringify(request.params.name.slice(0, 130))}`,
      );
    }
    return toolResult(await call(entry.method, { ...(request.params.arguments ?? {}) }));
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: [
      ...(catalog.events
        ? [
            {
              uri: EVENTS_URI,
              name: 'events',
              title: 'The tenant’s events',
              description: `The tenant's events, oldest first, one page (events.list); read ${EVENTS_URI}?after=<the last item's position> for the events after it. ${DATA_NOT_INSTRUCTIONS}`,
              mimeType: 'application/json',
            },
          ]
        : []),
      ...catalog.resources.map((resource) => ({
        uri: resource.uri,
        name: resource.name,
        description: resource.description,
        mimeType: 'application/json',
      })),
    ],
  }));

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      ...(catalog.events
        ? [
            {
              uriTemplate: `${EVENTS_URI}{?after,tenantId}`,
              name: 'events-after',
              description: `The tenant's events after a position (an item's position from an earlier page). ${DATA_NOT_INSTRUCTIONS}`,
              mimeType: 'application/json',
            },
          ]
        : []),
      ...catalog.resources.map((resource) => ({
        uriTemplate: `${resource.uri}{?tenantId}`,
        name: resource.name,
        description: resource.description,
        mimeType: 'application/json',
      })),
    ],
  }));

  function resourceOf(uri: string) {
    const read = parseResourceUri(uri, catalog.resources);
    if (!read || (read.events && !catalog.events))
      throw new McpError(RESOURCE_NOT_FOUND, `no resource ${JSON.stringify(uri.slice(0, 200))}`, {
        hint: `Read ${EVENTS_URI} or compute://<group>.<method> of resources/list, with ?tenantId= at most (and ?after= for the events).`,
      });
    return read;
  }

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    const read = resourceOf(uri);
    const result = await call(read.method, read.input);
    if ('error' in result)
      throw new McpError(API_FAILURE, failureText(result.error), { error: result.error });
    const content: { uri: string; mimeType: string; text: string; _meta?: Record<string, unknown> } = {
      uri,
      mimeType: 'application/json',
      text: JSON.stringify(result.data ?? null),
    };
    if (read.events) {
      // Where to read on from: after the page's last event, or the same place when it held none.
      const page = result.data as { items?: Array<{ position?: unknown }>; nextCursor?: unknown };
      const last = page.items?.at(-1)?.position;
      const after = typeof last === 'string' ? last : (read.input.cursor as string | undefined);
      const tenant = typeof read.input.tenantId === 'string' ? read.input.tenantId : undefined;
      const query = new URLSearchParams({
        ...(after ? { after } : {}),
        ...(tenant ? { tenantId: tenant } : {}),
      });
      content._meta = { next: `${EVENTS_URI}${query.size ? `?${query}` : ''}` };
    }
    return { contents: [content] };
  });

  if (subscribable) {
    const followers = new Map<string, { stop(): void }>();
    server.setRequestHandler(SubscribeRequestSchema, async (request) => {
      const { uri } = request.params;
      const read = resourceOf(uri);
      if (!read.events || 'cursor' in read.input)
        throw new McpError(
          ErrorCode.InvalidParams,
          `only ${EVENTS_URI} (with ?tenantId= at most) can be subscribed to`,
        );
      if (!followers.has(uri))
        followers.set(
          uri,
          followEvents({
            call,
            input: read.input,
            pollMs: options.subscribe!.pollMs,
            changed: () => void server.sendResourceUpdated({ uri }).catch(() => {}),
            log: options.log,
          }),
        );
      return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
      followers.get(request.params.uri)?.stop();
      followers.delete(request.params.uri);
      return {};
    });
    const closed = server.onclose;
    server.onclose = () => {
      for (const follower of followers.values()) follower.stop();
      followers.clear();
      closed?.();
    };
  }
  return server;
}

/** The most pages one poll reads on its way to the newest event. */
const PAGES_PER_POLL = 20;
const PAGE = 500;

/**
 * Follows the tenant's events by polling events.list: first to the newest (telling nothing), then
 * `changed()` once per poll that finds new ones. A failed poll is logged and tried again later.
 */
function followEvents(options: {
  call: McpCall;
  input: Record<string, unknown>;
  pollMs: number;
  changed(): void;
  log?: ((message: string) => void) | undefined;
}): { stop(): void } {
  let cursor: string | undefined;
  let caughtUp = false;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  async function poll(): Promise<void> {
    const following = caughtUp;
    let found = false;
    try {
      for (let page = 0; page < PAGES_PER_POLL && !stopped; page++) {
        const result = await options.call('events.list', {
          ...options.input,
          limit: PAGE,
          ...(cursor ? { cursor } : {}),
        });
        if ('error' in result) {
          options.log?.(`following ${EVENTS_URI}: ${result.error.code}: ${result.error.message}`);
          return;
        }
        const data = result.data as { items: Array<{ position: string }>; nextCursor: string | null };
        const last = data.items.at(-1);
        if (last) {
          cursor = last.position;
          found = true;
        }
        if (data.nextCursor === null) {
          caughtUp = true;
          return;
        }
      }
    } finally {
      if (found && following && !stopped) options.changed();
    }
  }
  const next = () => {
    if (stopped) return;
    timer = setTimeout(() => void poll().finally(next), options.pollMs);
    // A subscription never keeps the process alive on its own.
    timer.unref?.();
  };
  void poll().finally(next);
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
