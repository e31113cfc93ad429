/**
 * The MCP server (docs/mcp.md): tools and resources derived from the method table, served over
 * Streamable HTTP beside the API (`{basePath}/mcp`) and over stdio by `better-compute mcp`. What
 * loads the SDK stays behind `import()`, so a deployment or a command that never speaks MCP never
 * loads it.
 */
export { createMcpEndpoint, personRefused } from './http.js';
export type { McpCall } from './server.js';

/** The server and the stdio transport, for `better-compute mcp`. */
export async function loadStdioServer() {
  const [{ createMcpServer }, { LineTransport, MAX_STDIO_MESSAGE_BYTES }] = await Promise.all([
    import('./server.js'),
    import('./stdio.js'),
  ]);
  return { createMcpServer, LineTransport, MAX_STDIO_MESSAGE_BYTES };
}
