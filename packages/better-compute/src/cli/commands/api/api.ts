/**
 * `api GROUP.METHOD [items…]`: calls any method, plugin methods included, with the input built from
 * items and --data; `api --list [GROUP]` prints the deployment's live route table.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';

interface RouteRow {
  method: string;
  public: boolean;
  action: string | null;
  summary: string;
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
  async run({ flags, args, io, api }) {
    if (flags.list) {
      if (args.items.length > 0)
        throw new CliError('INVALID_ARGUMENT', 'api --list takes at most a group', {
          details: { field: 'items' },
        });
      const group = args.method;
      const routes = (await (await api()).call('system.routes', group ? { group } : {})) as {
        items: RouteRow[];
      };
      const items = routes.items
        .filter((route) => !group || route.method.startsWith(`${group}.`))
        .map((route) => ({
          method: route.method,
          access: route.public ? 'public' : 'token',
          action: route.action ?? (route.public ? '-' : 'any identity'),
          summary: route.summary,
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
    return (await api()).request(args.method, input);
  },
});
