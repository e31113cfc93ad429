/**
 * `api GROUP.METHOD [items…]`: calls any method, plugin methods included, with the input built from
 * items and --data; `api --list [GROUP]` prints the deployment's live route table.
 */
import { ComputeError, isRecord } from '@better-compute/core';
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';

interface RouteRow {
  method: string;
  public: boolean;
  action: string | null;
  summary?: string;
}

function isRouteRow(value: unknown): value is RouteRow {
  if (typeof value !== 'object' || value === null) return false;
  const row = value as Record<string, unknown>;
  return (
    typeof row.method === 'string' &&
    typeof row.public === 'boolean' &&
    (row.action === null || row.action === undefined || typeof row.action === 'string') &&
    (row.summary === undefined || typeof row.summary === 'string')
  );
}

/** The rows of a system.routes answer; INVALID_RESPONSE when it is not a route table. */
function routeRows(answer: unknown, hint: string): RouteRow[] {
  const items = (answer as { items?: unknown } | null)?.items;
  if (typeof answer === 'object' && answer !== null && Array.isArray(items) && items.every(isRouteRow))
    return items;
  throw new ComputeError('INVALID_RESPONSE', "system.routes: the server's answer is not a route table", {
    hint,
  });
}

export default defineCommand({
  name: 'api',
  group: 'API',
  summary: 'Call any method (GROUP.METHOD or plugins.ID.GROUP.METHOD); --list shows the routes',
  target: 'token',
  calls: ['system.routes'],
  flags: {
    data: {
      type: 'string',
      description: 'The whole body: JSON, @file.json, or - for standard input',
      placeholder: 'JSON|@FILE|-',
    },
    list: {
      type: 'boolean',
      description: 'List the deployment’s routes (from system.routes), optionally of one group',
    },
  },
  positionals: [
    { name: 'method', description: 'GROUP.METHOD or plugins.ID.GROUP.METHOD; with --list, a group' },
    {
      name: 'items',
      description: 'name=value, name:=json, name=@file, name:=@file, a.b=value, ids[]=value',
      variadic: true,
    },
  ],
  defaultFormat: (flags) => (flags.list ? 'table' : 'json'),
  examples: [
    'better-compute api --list',
    'better-compute api --list reservations',
    'better-compute api events.list tenantId=acme type=reservation. limit:=20 --format table',
    "better-compute api webhooks.create tenantId=acme url=https://hooks.example.com/compute 'events[]=reservation.*'",
    'better-compute api reservations.get tenantId=acme reservationId=rsv_… --query binding',
  ],
  async run({ flags, args, io, api, global, log }) {
    if (flags.list) {
      if (args.items.length > 0)
        throw new CliError('INVALID_ARGUMENT', 'api --list takes at most a group', {
          details: { field: 'items' },
        });
      const group = args.method;
      const client = await api();
      const { INVALID_RESPONSE_HINT: hint } = await import('@better-compute/client');
      const routes = routeRows(await client.call('system.routes', group ? { group } : {}), hint);
      const rows = routes.filter((route) => !group || route.method.startsWith(`${group}.`));
      if (group && rows.length === 0) {
        // A group the deployment does not serve is a mistake, not an empty table: the whole table
        // is read to name the nearest group.
        const all = routeRows(await client.call('system.routes', {}), hint);
        const groups = new Set(
          all.flatMap((route) => {
            const parts = route.method.split('.');
            return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('.'));
          }),
        );
        const { didYouMean } = await import('../../suggest.js');
        const { shownWord } = await import('../../shown.js');
        const near = didYouMean(group, groups);
        throw new CliError(
          'NOT_FOUND',
          `the deployment serves no group ${shownWord(group)}${near ? `; did you mean "${near}"?` : ''}`,
          {
            hint: 'Run "better-compute api --list" for every route and its group.',
            details: { field: 'method', ...(near ? { suggestion: near } : {}) },
          },
        );
      }
      const items = rows.map((route) => ({
        method: route.method,
        access: route.public ? 'public' : 'token',
        action: route.action ?? (route.public ? '-' : 'any identity'),
        summary: route.summary ?? '',
      }));
      return { items, nextCursor: null };
    }
    if (!args.method) {
      throw new CliError('INVALID_ARGUMENT', 'api needs a method, such as system.whoami (or --list)', {
        details: { field: 'method' },
      });
    }
    const { methodRoute } = await import('@better-compute/client');
    methodRoute(args.method);
    const [{ buildApiInput }, { readFile }, { resolve }] = await Promise.all([
      import('../../api-items.js'),
      import('node:fs/promises'),
      import('node:path'),
    ]);
    const input = await buildApiInput(args.items, flags.data, {
      readFile: (path) => readFile(resolve(io.cwd, path), 'utf8'),
      stdin: io.stdin?.bind(io),
    });
    // The client fills tenantId only into methods it knows; a plugin's method takes the input its
    // plugin defines, so the acting tenant is not guessed into it, but the caller is told.
    if (global.tenant && isRecord(input) && input.tenantId === undefined) {
      const { methods } = await import('@better-compute/core/methods');
      if (!Object.hasOwn(methods, args.method))
        log(
          `note: ${args.method} is not a method this CLI knows, so the tenant ${global.tenant} is not added to its input; pass tenantId=${global.tenant} if it takes one`,
        );
    }
    return (await api()).request(args.method, input);
  },
});
