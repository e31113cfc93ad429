/**
 * `mcp`: the MCP server over stdio for an AI agent, as the agent's own credential. Each tool call is
 * the same call `api` makes (`--url` over HTTP, else the configuration's handler in process), so IAM
 * decides it exactly as it decides the agent's direct calls. A person's credential is refused before
 * anything is served. Only protocol goes to standard output; diagnostics go to standard error.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';

/** How often a subscription to compute://events asks events.list for new events. */
const EVENTS_POLL_MS = 2000;

export default defineCommand({
  name: 'mcp',
  group: 'API',
  summary: 'Serve the API to an AI agent as MCP tools over stdio, with the agent’s own credential',
  description:
    'Tools, resources and compute://events are derived from the method table the server serves; each tool call goes through IAM as the agent. Refuses a person’s credential. See docs/mcp.md.',
  target: 'token',
  output: false,
  calls: ['system.whoami', 'system.routes'],
  examples: [
    'BETTER_COMPUTE_TOKEN=<agent key> better-compute mcp --url https://compute.example.com',
    'BETTER_COMPUTE_TOKEN=<agent key> better-compute mcp --url http://127.0.0.1:8080 --tenant acme',
  ],
  async run({ api, io, log }) {
    const terminal = io.terminal;
    if (!terminal) {
      throw new CliError(
        'UNSUPPORTED',
        'mcp serves over standard input and output, which this program does not give it',
        {
          hint: 'Run better-compute mcp as a program an MCP client starts (its command and arguments).',
        },
      );
    }
    const [{ ComputeError, BODY_LIMIT_BYTES, payloadTooLarge, toComputeError }, { methodList }, mcp] =
      await Promise.all([
        import('@better-compute/core'),
        import('@better-compute/core/methods'),
        import('../../../mcp/index.js'),
      ]);
    const client = await api();
    const whoami = await client.call('system.whoami', {});
    if (whoami.principalKind === 'person') throw mcp.personRefused();
    // The tools are the methods this CLI knows that the server serves (a plugin's are left out).
    const routes = await client.call('system.routes', {});
    const served = new Set(routes.items.map((route) => route.method));
    const methods = methodList.filter((method) => served.has(`${method.group}.${method.name}`));

    // A method's own body limit (fleet.plan takes a whole document), else the API's.
    const limits = new Map(methods.map((m) => [`${m.group}.${m.name}`, m.maxBodyBytes ?? BODY_LIMIT_BYTES]));
    const call: import('../../../mcp/index.js').McpCall = async (method, input) => {
      // Refused here as the API would: a body it refuses need not cross the network first.
      if (JSON.stringify(input).length > (limits.get(method) ?? BODY_LIMIT_BYTES))
        return { error: payloadTooLarge().toJSON() };
      try {
        return { data: await client.request(method, input) };
      } catch (error) {
        const failure = error instanceof ComputeError ? error : toComputeError(error);
        const requestId = (error as { requestId?: unknown }).requestId;
        return {
          error: { ...failure.toJSON(), ...(typeof requestId === 'string' ? { requestId } : {}) },
        };
      }
    };
    const { createMcpServer, LineTransport } = await mcp.loadStdioServer();
    const server = createMcpServer({
      call,
      methods,
      identity: { ...whoami, actingFor: undefined },
      subscribe: { pollMs: EVENTS_POLL_MS },
      log,
    });
    const transport = new LineTransport({
      onInput: (listener) => terminal.onInput(listener),
      write: (data) => terminal.write(data, 'stdout'),
      log,
    });
    const signal = io.signal;
    const ended = new Promise<void>((resolve) => {
      const closed = server.onclose;
      server.onclose = () => {
        closed?.();
        resolve();
      };
      signal?.addEventListener('abort', () => resolve(), { once: true });
    });
    await server.connect(transport);
    log(
      `mcp: serving ${methods.length} methods to ${whoami.principalKind} ${whoami.principalId} of ${whoami.actingTenantId} over stdio`,
    );
    await ended;
    await server.close();
  },
});
