import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApiInput, createCli, main } from '../src/cli/index.js';
import { captureIO, fakeServer, type FakeServer } from './cli-support.js';

const dir = mkdtempSync(join(tmpdir(), 'bc-api-'));
writeFileSync(join(dir, 'spec.json'), '{"gpus": 4, "nvlink": true}');
writeFileSync(join(dir, 'notes.md'), '# Notes\nrack 12\n');
const files = {
  readFile: async (path: string) => (await import('node:fs/promises')).readFile(join(dir, path), 'utf8'),
};

describe('api items', () => {
  it.each([
    [['name=gpu-a'], { name: 'gpu-a' }],
    [['limit:=10'], { limit: 10 }],
    [[`labels:=["a","b"]`], { labels: ['a', 'b'] }],
    [['spec:=@spec.json'], { spec: { gpus: 4, nvlink: true } }],
    [['notes=@notes.md'], { notes: '# Notes\nrack 12\n' }],
    [['resource.type=pool', 'resource.id=pool_1'], { resource: { type: 'pool', id: 'pool_1' } }],
    [['ids[]=a', 'ids[]=b'], { ids: ['a', 'b'] }],
    [['events[]=reservation.*'], { events: ['reservation.*'] }],
    [['type=reservation.'], { type: 'reservation.' }],
    [['url=https://hooks.example.com/compute?a=b'], { url: 'https://hooks.example.com/compute?a=b' }],
    [['empty='], { empty: '' }],
    [['flag:=true', 'nothing:=null'], { flag: true, nothing: null }],
    [['a.b.c:=1'], { a: { b: { c: 1 } } }],
    [['at=@'], { at: '@' }],
  ])('%j → %j', async (items, input) => {
    expect(await buildApiInput(items, undefined, files)).toEqual(input);
  });

  it('takes --data as JSON, @file or - (standard input), with items over it', async () => {
    expect(await buildApiInput(['b=2'], '{"a":1,"b":1}', files)).toEqual({ a: 1, b: '2' });
    expect(await buildApiInput([], '@spec.json', files)).toEqual({ gpus: 4, nvlink: true });
    expect(
      await buildApiInput(['x:=1'], '-', { ...files, stdin: async () => '{"tenantId":"acme"}' }),
    ).toEqual({ tenantId: 'acme', x: 1 });
  });

  it.each([
    [['name'], 'item "name" is not name=value or name:=json'],
    [['=x'], 'item "=x" is not name=value or name:=json'],
    [['limit:=ten'], 'item "limit:=ten" is not valid JSON'],
    [['spec:=@missing.json'], 'item "spec:=@missing.json": cannot read missing.json: ENOENT'],
    [['a=1', 'a.b=2'], 'item "a.b=2": a is already a value, not an object'],
    [['a=1', 'a[]=2'], 'item "a[]=2": a is not a list'],
    [['__proto__.x=1'], 'item "__proto__.x=1": "__proto__" is not a field name'],
    [['a..b=1'], 'item "a..b=1": "" is not a field name'],
  ])('%j is refused: %s', async (items, message) => {
    await expect(buildApiInput(items, undefined, files)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(message),
    });
  });

  it('refuses --data that is not a JSON object', async () => {
    await expect(buildApiInput([], '[1]', files)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: '--data must be a JSON object',
    });
    await expect(buildApiInput([], '-', files)).rejects.toMatchObject({ code: 'UNSUPPORTED' });
  });
});

describe('better-compute api over --url', () => {
  let server: FakeServer;
  const cli = createCli({ projectCommands: false });
  const routes = {
    items: [
      {
        method: 'system.version',
        path: '/system/version',
        kind: 'query',
        public: true,
        action: null,
        module: 'core',
        summary: 'The version',
      },
      {
        method: 'system.whoami',
        path: '/system/whoami',
        kind: 'query',
        public: false,
        action: null,
        module: 'core',
        summary: 'Who',
      },
      {
        method: 'events.list',
        path: '/events/list',
        kind: 'query',
        public: false,
        action: 'compute:events:read',
        module: 'events',
        summary: 'Events',
      },
      {
        method: 'plugins.acme.invoices.list',
        path: '/plugins/acme/invoices/list',
        kind: 'query',
        public: false,
        action: 'acme:invoices:read',
        module: 'acme',
        summary: 'Invoices',
      },
    ],
    nextCursor: null,
  };
  beforeAll(async () => {
    server = await fakeServer({
      '/api/compute/system/version': () => ({
        data: { product: 'better-compute', version: '0.1.0', apiVersion: 1 },
      }),
      '/api/compute/system/routes': () => ({ data: routes }),
      '/api/compute/events/list': (call) => ({
        data: {
          items: [{ id: 'evt_1', type: 'reservation.activated', tenantId: call.body.tenantId }],
          nextCursor: '184467:12',
        },
      }),
      '/api/compute/plugins/acme/invoices/list': (call) => ({ data: { got: call.body } }),
      '/api/compute/reservations/get': () => ({
        status: 403,
        error: { code: 'TENANT_SUSPENDED', message: 'tenant acme is suspended' },
      }),
    });
  });
  afterAll(() => server.close());
  const env = () => ({ BETTER_COMPUTE_URL: server.url, BETTER_COMPUTE_TOKEN: 'biam_test', HOME: dir });

  it('calls a method with items, fills tenantId from --tenant, and prints a table with the cursor footer', async () => {
    const { io, out } = captureIO(env());
    await cli.run(
      ['api', 'events.list', 'type=reservation.', 'limit:=20', '--tenant', 'acme', '--format', 'table'],
      io,
    );
    expect(server.calls.at(-1)!.body).toEqual({ type: 'reservation.', limit: 20, tenantId: 'acme' });
    expect(server.calls.at(-1)!.headers.authorization).toBe('Bearer biam_test');
    expect(out).toEqual([
      'id     type                   tenantId\nevt_1  reservation.activated  acme\n(more rows: --cursor 184467:12)',
    ]);
  });

  it('fills tenantId from BETTER_COMPUTE_TENANT', async () => {
    const { io } = captureIO({ ...env(), BETTER_COMPUTE_TENANT: 'globex' });
    await cli.run(['api', 'events.list'], io);
    expect(server.calls.at(-1)!.body).toEqual({ tenantId: 'globex' });
  });

  it('calls plugin methods at /plugins/ID/GROUP/METHOD', async () => {
    const { io, out } = captureIO(env());
    await cli.run(['api', 'plugins.acme.invoices.list', 'month=2026-01', '--format', 'compact'], io);
    expect(out).toEqual(['{"got":{"month":"2026-01"}}']);
  });

  it('says, rather than guesses, that --tenant is not added to a plugin method’s input', async () => {
    const told = captureIO({ ...env(), BETTER_COMPUTE_TENANT: 'globex' });
    await cli.run(['api', 'plugins.acme.invoices.list', 'month=2026-01', '--format', 'compact'], told.io);
    expect(told.out).toEqual(['{"got":{"month":"2026-01"}}']);
    expect(told.err).toEqual([
      'note: plugins.acme.invoices.list is not a method this CLI knows, so the tenant globex is not added to its input; pass tenantId=globex if it takes one',
    ]);
    const given = captureIO(env());
    await cli.run(['api', 'plugins.acme.invoices.list', 'tenantId=globex', '--tenant', 'globex'], given.io);
    expect(given.err).toEqual([]);
    expect(server.calls.at(-1)!.body).toEqual({ tenantId: 'globex' });
  });

  it('needs no credential for a public method, and stops with MISSING_ENV for the others', async () => {
    const { io, out } = captureIO({ BETTER_COMPUTE_URL: server.url, HOME: dir });
    await cli.run(['api', 'system.version', '--query', 'version'], io);
    expect(out).toEqual(['0.1.0']);
    const before = server.calls.length;
    const failed = captureIO({ BETTER_COMPUTE_URL: server.url, HOME: dir });
    expect(await main(['api', 'events.list'], cli, failed.io)).toBe(1);
    expect(failed.err[0]).toMatch(/^MISSING_ENV: events.list needs a credential/);
    expect(failed.err[1]).toBe(
      `hint: Set BETTER_COMPUTE_TOKEN, or run "better-compute auth login --url ${server.url}".`,
    );
    expect(server.calls.length).toBe(before);
  });

  it('lists the live route table, marking public routes and showing the IAM action', async () => {
    const { io, out } = captureIO(env());
    await cli.run(['api', '--list'], io);
    expect(out[0]).toBe(
      [
        'method                      access  action               summary',
        'system.version              public  -                    The version',
        'system.whoami               token   any identity         Who',
        'events.list                 token   compute:events:read  Events',
        'plugins.acme.invoices.list  token   acme:invoices:read   Invoices',
      ].join('\n'),
    );
    const one = captureIO(env());
    await cli.run(['api', '--list', 'events', '--query', 'items[].method'], one.io);
    expect(one.out).toEqual(['events.list']);
    expect(server.calls.at(-1)!.body).toEqual({ group: 'events' });
  });

  it('prints a server failure with its code, the hint and the request id, and exits 1', async () => {
    const { io, err } = captureIO(env());
    expect(await main(['api', 'reservations.get', 'tenantId=acme', 'reservationId=rsv_x'], cli, io)).toBe(1);
    expect(err[0]).toBe('TENANT_SUSPENDED: tenant acme is suspended');
    expect(err[1]).toBe(
      'hint: The tenant is suspended or deleted in IAM; an administrator of a parent tenant can reactivate it.',
    );
    expect(err[2]).toMatch(/^request id: req_[0-9a-f]{32}$/);
  });

  it('refuses plain http to another machine and a malformed method before sending anything', async () => {
    const before = server.calls.length;
    const plain = captureIO({ BETTER_COMPUTE_TOKEN: 't', HOME: dir });
    expect(await main(['api', 'system.whoami', '--url', 'http://compute.example.com'], cli, plain.io)).toBe(
      2,
    );
    expect(plain.err[0]).toMatch(/^INVALID_ARGUMENT: plain http is allowed only for localhost/);
    const bad = captureIO(env());
    expect(await main(['api', 'system'], cli, bad.io)).toBe(2);
    expect(bad.err[0]).toBe(
      'INVALID_ARGUMENT: "system" is not a method name like group.method or plugins.ID.GROUP.METHOD',
    );
    const tenant = captureIO(env());
    expect(await main(['api', 'events.list', '--tenant', 'Not A Tenant'], cli, tenant.io)).toBe(2);
    expect(server.calls.length).toBe(before);
  });

  it('never echoes a token pasted where the method or an item was meant', async () => {
    const pasted = 'biam_key_FAKEFAKEFAKEFAKEFAKEFAKE';
    const method = captureIO(env());
    expect(await main(['api', pasted], cli, method.io)).toBe(2);
    expect(method.err[0]).toBe(
      'INVALID_ARGUMENT: a value that looks like a credential (not shown) is not a method name like group.method or plugins.ID.GROUP.METHOD',
    );
    const item = captureIO(env());
    expect(await main(['api', 'system.whoami', pasted], cli, item.io)).toBe(2);
    expect(item.err[0]).toBe(
      'INVALID_ARGUMENT: item a value that looks like a credential (not shown) is not name=value or name:=json',
    );
    expect([...method.err, ...item.err].join('\n')).not.toContain('FAKE');
  });

  it('api --list GROUP of a group the deployment does not serve is NOT_FOUND with the nearest group', async () => {
    const { io, out, err } = captureIO(env());
    expect(await main(['api', '--list', 'evnts'], cli, io)).toBe(1);
    expect(out).toEqual([]);
    expect(err).toEqual([
      'NOT_FOUND: the deployment serves no group "evnts"; did you mean "events"?',
      'hint: Run "better-compute api --list" for every route and its group.',
    ]);
    const plugin = captureIO(env());
    await cli.run(['api', '--list', 'plugins.acme', '--query', 'items[].method'], plugin.io);
    expect(plugin.out).toEqual(['plugins.acme.invoices.list']);
  });

  it('an empty --url is a usage error, while an empty BETTER_COMPUTE_URL means unset', async () => {
    const { io, out, err } = captureIO({ BETTER_COMPUTE_TOKEN: 't', HOME: dir });
    expect(await main(['api', 'system.version', '--url', ''], cli, io)).toBe(2);
    expect(out).toEqual([]);
    expect(err).toEqual([
      'INVALID_ARGUMENT: --url needs a URL (got an empty value)',
      'hint: Pass --url with an origin such as https://compute.example.com, or leave it out to run in process.',
    ]);
    const status = captureIO({ HOME: dir, BETTER_COMPUTE_URL: '' });
    expect(await main(['auth', 'status', '--url='], cli, status.io)).toBe(2);
    expect(status.err[0]).toBe('INVALID_ARGUMENT: --url needs a URL (got an empty value)');
    const unset = captureIO({ HOME: dir, BETTER_COMPUTE_URL: '' });
    await cli.run(['auth', 'status', '--query', 'target'], unset.io);
    expect(unset.out).toEqual(['in-process']);
  });

  it('reads --data - from the CliIO’s standard input', async () => {
    const { io, out } = captureIO(env(), { stdin: async () => '{"month":"2026-02"}' });
    await cli.run(['api', 'plugins.acme.invoices.list', '--data', '-', '--format', 'compact'], io);
    expect(out).toEqual(['{"got":{"month":"2026-02"}}']);
  });
});

describe('api --list against a malformed route table', () => {
  let server: FakeServer;
  const cli = createCli({ projectCommands: false });
  beforeAll(async () => {
    server = await fakeServer({
      '/api/compute/system/routes': () => ({ data: { routes: [{ method: 'system.version' }] } }),
    });
  });
  afterAll(() => server.close());

  it('is INVALID_RESPONSE with the hint of every other malformed answer, not INTERNAL', async () => {
    const { io, out, err } = captureIO({
      BETTER_COMPUTE_URL: server.url,
      BETTER_COMPUTE_TOKEN: 't',
      HOME: dir,
    });
    expect(await main(['api', '--list'], cli, io)).toBe(1);
    expect(out).toEqual([]);
    expect(err).toEqual([
      "INVALID_RESPONSE: system.routes: the server's answer is not a route table",
      'hint: Check that the URL points at a better-compute API (an origin, or the full endpoint such as https://host/api/compute).',
    ]);
  });
});
