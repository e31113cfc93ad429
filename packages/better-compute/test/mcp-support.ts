/**
 * The MCP SDK's Streamable HTTP client, loaded as Node loads it outside the tests. The suites run
 * with `--conditions source` (our packages' TypeScript sources), and the SDK's client depends on
 * eventsource-parser, whose `source` export is TypeScript Node cannot load: a resolve hook leaves
 * that one condition out for that one package.
 */
import { register } from 'node:module';

const HOOK = `
export async function resolve(specifier, context, next) {
  if (specifier === 'eventsource-parser' || specifier.startsWith('eventsource-parser/'))
    return next(specifier, { ...context, conditions: context.conditions.filter((c) => c !== 'source') });
  return next(specifier, context);
}`;

register(`data:text/javascript,${encodeURIComponent(HOOK)}`);

export const { StreamableHTTPClientTransport } =
  await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
