/**
 * Faults an audit of the CLI found, each with the test that holds it fixed: --query picks from the
 * command's result whatever --format says (never from a table's columns); `join-tokens list` says
 * its count is of the uses left; the retry line of a create only where a retry with the same --key
 * can help; setting and removing one key in one call is a usage error before anything is sent; a
 * --query whose first field the result does not have is a usage error.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyQuery, createCli, formatResult, main } from '../src/cli/index.js';
import { captureIO, cliRunner, fakeServer, type FakeServer, scratchDirectory } from './cli-support.js';
import { addNode, h100x8, OPS, seedPool, suiteDeployment } from './fleet-support.js';

const scratch = scratchDirectory('.tmp-cli-audit-');

const id = (prefix: string, n: number) => `${prefix}_01k5w${String(n).padStart(21, '0')}`;
const NODE = id('node', 1);
const SITE = id('site', 1);
const POOL = id('pool', 1);

/** A node of nodes.list as the API answers it; the table shows other columns (pool, idle). */
const node = (n: number, labels: Record<string, string>) => ({
  id: id('node', n),
  name: `gpu-${n}`,
  poolId: id('pool', n),
  state: 'ready',
  labels,
  taints: [],
  gpus: [{ product: 'H100-SXM5-80GB' }],
  gpuCount: 8,
  freeGpus: 3,
  version: 1,
  lastHeartbeatAt: null,
});

describe('the CLI against a recorded fake server', () => {
  let server: FakeServer;
  /** What the create routes answer; each test sets it. */
  let createAnswer: { status?: number; data?: unknown; error?: { code: string; message: string } };
  const cli = createCli({ projectCommands: false });

  beforeAll(async () => {
    const create = () => createAnswer;
    server = await fakeServer({
      '/api/compute/nodes/list': () => ({
        data: { items: [node(1, { zone: 'eu-1' }), node(2, { rack: 'r12' })], nextCursor: null },
      }),
      '/api/compute/sites/list': () => ({
        data: {
          items: [
            { id: SITE, name: 'fra-1', region: null, labels: {}, description: 'Frankfurt', version: 1 },
          ],
          nextCursor: null,
        },
      }),
      '/api/compute/pools/list': () => ({
        data: {
          items: [{ id: POOL, name: 'gpu-main', offeredTo: ['acme', 'globex'], access: 'owner' }],
          nextCursor: null,
        },
      }),
      '/api/compute/sites/create': create,
      '/api/compute/projects/create': create,
      '/api/compute/pools/create': create,
      '/api/compute/reservations/create': create,
      '/api/compute/joinTokens/create': create,
    });
  });
  afterAll(() => server.close());
  beforeEach(() => void (server.calls.length = 0));

  async function run(argv: string[], extra = {}) {
    const env = { BETTER_COMPUTE_URL: server.url, BETTER_COMPUTE_TOKEN: 't', HOME: scratch };
    const { io, out, err } = captureIO(env, { cwd: scratch, ...extra });
    const status = await main(argv, cli, io);
    return { status, out: out.join('\n'), err };
  }

  describe('--query picks from the result, whatever --format (fault 1)', () => {
    it('with --format table it reads the API’s fields, not the table’s columns', async () => {
      // The columns are `pool` and no `labels`: these printed blank lines and a lone "value" header.
      expect(await run(['nodes', 'list', '--format', 'table', '--query', 'items[].poolId'])).toMatchObject({
        status: 0,
        out: `${id('pool', 1)}\n${id('pool', 2)}`,
      });
      expect((await run(['nodes', 'list', '--format', 'table', '--query', 'items[].labels'])).out).toBe(
        'zone  rack\neu-1\n      r12',
      );
      expect((await run(['sites', 'list', '--format', 'table', '--query', 'items[].description'])).out).toBe(
        'Frankfurt',
      );
      expect((await run(['pools', 'list', '--format', 'table', '--query', 'items[].offeredTo'])).out).toBe(
        'value\n["acme","globex"]',
      );
    });

    it('prints the same selection with --format table as without --format', async () => {
      for (const query of ['items[].id', 'items[].poolId', 'items[0].labels.zone']) {
        const plain = await run(['nodes', 'list', '--query', query]);
        expect((await run(['nodes', 'list', '--format', 'table', '--query', query])).out).toBe(plain.out);
      }
    });

    it('a column the table shows is not a field of the result: idle is freeGpus of gpuCount', async () => {
      expect((await run(['nodes', 'list', '--format', 'compact', '--query', 'items[].idle'])).out).toBe(
        '[null,null]',
      );
      expect((await run(['nodes', 'list', '--format', 'table', '--query', 'items[].idle'])).out).toBe(
        'null\nnull',
      );
      expect((await run(['nodes', 'list', '--format', 'compact', '--query', 'items[].freeGpus'])).out).toBe(
        '[3,3]',
      );
      // Without --query the table still shows its readable columns.
      expect((await run(['nodes', 'list'])).out.split('\n')[0]).toMatch(
        /^id\s+name\s+pool\s+state\s+cpus\s+memory\s+gpus\s+idle/,
      );
    });

    it('a command’s own table rows shape its whole result, never a --query’s selection', async () => {
      // iam setup's rows read `.policies` of the result: on the selected list they threw a TypeError.
      const { io, out } = captureIO({}, { cwd: scratch });
      expect(
        await main(['iam', 'setup', '--format', 'table', '--query', 'policies[0].bindings'], cli, io),
      ).toBe(0);
      expect(out.join('\n')).toMatch(/^role\s+/);
    });
  });

  describe('the retry line of a create (fault 3)', () => {
    const KEY = 'cli-audit-key-1';
    const creates: [string, string[]][] = [
      ['sites create', ['sites', 'create', 'fra-1']],
      ['projects create', ['projects', 'create', 'training']],
      ['pools create', ['pools', 'create', '--site', SITE, '--name', 'gpu-x']],
      ['reserve', ['reserve', '--pool', POOL, '--gpus', '1', '--for', '1h', '--wait', '0']],
      ['join-tokens create', ['join-tokens', 'create', '--pool', POOL]],
    ];
    const RETRY = `repeat with --key ${KEY} to retry without creating twice`;

    describe.each(creates)('%s', (_name, argv) => {
      it.each([
        'INVALID_ARGUMENT',
        'NOT_FOUND',
        'ACCESS_DENIED',
        'QUOTA_EXCEEDED',
        'CONFLICT',
        'ALREADY_EXISTS',
      ])('refused with %s: the key, no retry line (the same key would be refused again)', async (code) => {
        createAnswer = { error: { code, message: `refused: ${code}` } };
        const result = await run([...argv, '--key', KEY]);
        expect(result.status).toBe(code === 'INVALID_ARGUMENT' ? 2 : 1);
        expect(result.err.slice(0, 2)).toEqual([`idempotency key: ${KEY}`, `${code}: refused: ${code}`]);
        expect(result.err[2]).toMatch(/^hint: /);
        expect(result.err.join('\n')).not.toContain('to retry');
        expect(server.calls).toHaveLength(1);
      });

      it.each(['UNAVAILABLE', 'RATE_LIMITED', 'INTERNAL', 'CONFIRMATION_REQUIRED'])(
        'failed with %s: the retry line under the hint',
        async (code) => {
          createAnswer = { error: { code, message: `failed: ${code}` } };
          const result = await run([...argv, '--key', KEY]);
          expect(result.status).toBe(1);
          expect(result.err).toEqual([
            `idempotency key: ${KEY}`,
            `${code}: failed: ${code}`,
            expect.stringMatching(/^hint: /),
            RETRY,
            expect.stringMatching(/^request id: /),
          ]);
        },
      );

      it('an answer that is not the API’s (a proxy’s 504): the retry line', async () => {
        createAnswer = { status: 504 };
        const result = await run([...argv, '--key', KEY]);
        expect(result.status).toBe(1);
        expect(result.err[1]).toMatch(/^INVALID_RESPONSE: /);
        expect(result.err[3]).toBe(RETRY);
      });

      it('no answer at all: the retry line, with the key the CLI made', async () => {
        const result = await run(argv, {
          fetch: async () => {
            throw new TypeError('fetch failed');
          },
        });
        expect(result.status).toBe(1);
        const key = /^idempotency key: (cli-[0-9a-f-]{36})$/.exec(result.err[0]!)?.[1];
        expect(key).toBeDefined();
        expect(result.err[1]).toMatch(/^UNAVAILABLE: .*could not reach/);
        expect(result.err[3]).toBe(`repeat with --key ${key} to retry without creating twice`);
      });

      it('a success prints only the key it used', async () => {
        createAnswer = { data: { id: 'x', state: 'active', joinToken: { id: 'jtok_x' }, token: 'jtok_x.s' } };
        const result = await run([...argv, '--key', KEY, '--query', 'id']);
        expect(result.status).toBe(0);
        expect(result.err).toEqual([`idempotency key: ${KEY}`]);
      });
    });
  });

  describe('setting and removing one key in one call (fault 4)', () => {
    it.each([
      [
        ['nodes', 'label', NODE, 'x=1', 'zone=eu', '--remove', 'x'],
        'the label "x" is both set (x=…) and removed (--remove x); nothing was sent',
      ],
      [
        ['nodes', 'taint', NODE, 't=1:NoSchedule', '--remove', 'other,t'],
        'the taint "t" is both set (t=…) and removed (--remove t); nothing was sent',
      ],
      [
        ['sites', 'update', SITE, '--label', 'a=1', '--remove-label', 'a'],
        'the label "a" is both set (--label a=…) and removed (--remove-label a); nothing was sent',
      ],
      [
        ['pools', 'update', POOL, '--label', 'b=2', '--label', 'a=1', '--remove-label', 'a'],
        'the label "a" is both set (--label a=…) and removed (--remove-label a); nothing was sent',
      ],
    ])('%j is INVALID_ARGUMENT naming the key, exit 2, before anything is sent', async (argv, message) => {
      const result = await run(argv);
      expect(result.status).toBe(2);
      expect(result.err[0]).toBe(`INVALID_ARGUMENT: ${message}`);
      expect(result.err[1]).toMatch(
        /^hint: Give "[a-z]" once: leave out .* to remove the (label|taint), or /,
      );
      expect(server.calls).toEqual([]);
    });
  });

  describe('a --query that selects nothing (fault 5)', () => {
    it('whose first field the result does not have is INVALID_ARGUMENT naming it and the fields', async () => {
      for (const format of [[], ['--format', 'table'], ['--format', 'compact']]) {
        const result = await run(['sites', 'list', ...format, '--query', 'nosuch']);
        expect(result).toMatchObject({ status: 2, out: '' });
        expect(result.err[0]).toBe(
          'INVALID_ARGUMENT: --query "nosuch": the result has no field "nosuch"; its fields are items, nextCursor',
        );
        expect(result.err[1]).toMatch(/^hint: Start the path with one of the result's fields/);
      }
      expect((await run(['sites', 'list', '--query', 'item[].id'])).err[0]).toContain('no field "item"');
    });

    it('past the first field, absent fields and indexes past the end still select null', async () => {
      expect(await run(['sites', 'list', '--query', 'items[5].id'])).toMatchObject({
        status: 0,
        out: 'null',
      });
      expect(await run(['sites', 'list', '--query', 'items.id'])).toMatchObject({ status: 0, out: 'null' });
      expect(await run(['sites', 'list', '--query', 'items[0].nosuch'])).toMatchObject({
        status: 0,
        out: 'null',
      });
    });

    it('names what the result is when it has no fields', () => {
      expect(() => applyQuery([{ id: 'a' }], 'id')).toThrow(
        '--query "id": the result has no field "id"; it is a list: start the path with [] or [N]',
      );
      expect(() => applyQuery('text', '.id')).toThrow('the result has no field "id"; it is a string');
      expect(() => applyQuery({}, 'id')).toThrow('the result has no field "id"; it has no fields');
      expect(applyQuery([{ id: 'a' }], '[].id')).toEqual({ value: ['a'], many: true });
      expect(applyQuery({ limit: null }, 'limit')).toEqual({ value: null, many: false });
    });
  });
});

describe('the output formatter under --format table with --query (fault 1)', () => {
  it('a list of records is a table; records without keys print as values, not blank lines', () => {
    const page = { items: [{ labels: {} }, { labels: {} }], nextCursor: null };
    expect(formatResult(page, { query: 'items[].labels', format: 'table' })).toBe('value\n{}\n{}');
    expect(formatResult(page, { query: 'items[].labels', format: 'compact' })).toBe('[{},{}]');
  });

  it('a field absent from some items prints null on its line, never a blank line', () => {
    const page = { items: [{ id: 'a', note: 'x' }, { id: 'b' }], nextCursor: null };
    expect(formatResult(page, { query: 'items[].note' })).toBe('x\nnull');
    expect(formatResult(page, { query: 'items[].note', format: 'table' })).toBe('x\nnull');
    expect(formatResult(page, { query: 'items[].note', format: 'compact' })).toBe('["x",null]');
  });

  it('never passes the selection to the command’s table rows', () => {
    const tableRows = (result: unknown) => (result as { rows: unknown[] }).rows;
    const value = { rows: [{ shown: 1 }], items: [{ id: 'a' }] };
    expect(formatResult(value, { format: 'table', tableRows })).toBe('shown\n1');
    expect(formatResult(value, { format: 'table', tableRows, query: 'items' })).toBe('id\na');
  });
});

describe('the CLI against a real deployment (faults 1 and 2)', () => {
  const d = suiteDeployment('pglite');
  let poolId = '';
  const { printed: run } = cliRunner(() => d.compute, scratch, { BETTER_COMPUTE_TOKEN: OPS });

  beforeAll(async () => {
    ({ poolId } = await seedPool(d));
    await addNode(d, poolId, 'h100-a', h100x8('nvl-a'), { zone: 'eu-1' });
  }, 120_000);

  it('nodes list --format table --query reads the nodes, not the columns', async () => {
    expect(await run(['nodes', 'list', '--format', 'table', '--query', 'items[].poolId'])).toMatchObject({
      status: 0,
      out: poolId,
    });
    expect((await run(['nodes', 'list', '--format', 'table', '--query', 'items[].labels'])).out).toBe(
      'zone\neu-1',
    );
    expect((await run(['pools', 'list', '--format', 'table', '--query', 'items[].id'])).out).toBe(poolId);
  });

  it('join-tokens list says its count is of the uses left: a spent token is 0/1 under usesLeft', async () => {
    // addNode joined with a one-use token, so none is left.
    const table = (await run(['join-tokens', 'list'])).out.split('\n');
    expect(table[0]).toMatch(/^id\s+pool\s+state\s+usesLeft\s+preApproved\s+expiresAt\s+description$/);
    expect(table[1]).toMatch(new RegExp(`^jtok_\\w+\\s+${poolId}\\s+used\\s+0/1\\s+true\\s`));
    // JSON is the method's answer, unchanged.
    const json = JSON.parse((await run(['join-tokens', 'list', '--format', 'compact'])).out);
    expect(json.items[0]).toMatchObject({ usesAllowed: 1, usesLeft: 0, state: 'used' });
    expect(json.items[0]).not.toHaveProperty('uses');
  });
});
