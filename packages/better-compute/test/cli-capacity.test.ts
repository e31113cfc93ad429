/**
 * The capacity, reservation, usage, events and sim commands in process: flags and local checks
 * (exit 2 before anything is sent), tables, idempotency keys, waiting while queued, and the usage
 * export's new 0600 file.
 */
import { existsSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { processIO } from '../src/cli/io.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import { cliRunner, scratchDirectory } from './cli-support.js';
import { ACME, a100x8, addNode, h100x8, OPS, seedPool, suiteDeployment } from './fleet-support.js';

const d = suiteDeployment('pglite');
let poolId = '';
const scratch = scratchDirectory('.tmp-cli-capacity-');
const cli = cliRunner(() => d.compute, scratch);
/** Runs a command line as the binary would: the exit status and what it printed. */
const run = (argv: string[], token = ACME) => cli.printed(argv, { BETTER_COMPUTE_TOKEN: token });

beforeAll(async () => {
  ({ poolId } = await seedPool(d));
  await addNode(d, poolId, 'h100-a', h100x8('nvl-a'));
  await addNode(d, poolId, 'a100-a', a100x8('nvl-b1', 'nvl-b2'));
}, 120_000);

describe('pools, quotas and drivers', () => {
  it('pools list prints a table of the pools offered to the tenant', async () => {
    const result = await run(['pools', 'list']);
    expect(result.status).toBe(0);
    const lines = result.out.split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+class\s+site\s+driver\s+state\s+owner\s+access$/);
    expect(lines[1]).toMatch(
      new RegExp(`^${poolId}  gpu-main  gpu    site_\\w+  bcd     active  root   offered$`),
    );
    expect(lines).toHaveLength(2);
  });

  it('pools list --name selects one pool by name, so a script can take its id', async () => {
    expect((await run(['pools', 'list', '--name', 'gpu-main', '--query', 'items[0].id'])).out).toBe(poolId);
    expect((await run(['pools', 'list', '--name', 'no-such-pool', '--query', 'items[].id'])).out).toBe('');
    const bad = await run(['pools', 'list', '--name', 'Bad Name']);
    expect(bad.status).not.toBe(0);
    expect(bad.err).toMatch(/^INVALID_ARGUMENT: .*name/);
  });

  it('an id of the wrong kind is a usage error before anything is sent', async () => {
    const result = await run(['pools', 'get', 'node_01k5w0000000000000000000000']);
    expect(result.status).toBe(2);
    expect(result.err.split('\n')[0]).toBe(
      'INVALID_ARGUMENT: pool must be a pool id like pool_01… (got "node_01k5w0000000000000000000000")',
    );
    const flag = await run(['quotas', 'get', '--pool', 'rsv_01k5w0000000000000000000000']);
    expect(flag.status).toBe(2);
    expect(flag.err).toMatch(/^INVALID_ARGUMENT: --pool must be a pool id like pool_01…/);
  });

  it.each([
    [['extend', 'rsv_01k5w000000000000000000000', '--by', '100d'], '--by must be at most 30d (got 100d)'],
    [['extend', 'rsv_01k5w000000000000000000000', '--by', '30s'], '--by must be at least 1m (got 30s)'],
    [
      ['reserve', '--pool', 'pool_01k5w000000000000000000000', '--gpus', '1', '--for', '31d'],
      '--for must be at most 30d (got 31d)',
    ],
    [
      ['join-tokens', 'create', '--pool', 'pool_01k5w000000000000000000000', '--ttl', '30s'],
      '--ttl must be at least 1m (got 30s)',
    ],
  ])(
    'a duration outside what the server takes is named by its flag before anything is sent: %j',
    async (argv, message) => {
      // A dead --url: anything sent would fail as UNAVAILABLE instead.
      const result = await run([...argv, '--url', 'http://127.0.0.1:9'], OPS);
      expect(result.status).toBe(2);
      expect(result.err.split('\n')[0]).toBe(`INVALID_ARGUMENT: ${message}`);
    },
  );

  it('pools offer checks the tenant; quotas set and get work as the owner', async () => {
    const bad = await run(['pools', 'offer', poolId, '--to', 'Not A Tenant'], OPS);
    expect(bad.status).toBe(2);
    expect(bad.err.split('\n')[0]).toBe(
      'INVALID_ARGUMENT: --to must be a tenant id such as acme (got "Not A Tenant")',
    );
    const limit = await run(['quotas', 'set', '--pool', poolId, '--subject', 'acme', '--limit', 'lots'], OPS);
    expect(limit.status).toBe(2);
    const set = await run(
      ['quotas', 'set', '--pool', poolId, '--subject', 'acme', '--limit', '12', '--query', 'limit'],
      OPS,
    );
    expect(set).toMatchObject({ status: 0, out: '12' });
    const got = await run(['quotas', 'get', '--pool', poolId]);
    expect(got.status).toBe(0);
    expect(got.out.split('\n')[0]).toMatch(/^tenant\s+pool\s+resource\s+limit\s+used\s+version$/);
    expect(got.out.split('\n')[1]).toMatch(new RegExp(`^acme    ${poolId}  gpus\\s+12\\s+0\\s+1$`));
    const cleared = await run(
      ['quotas', 'set', '--pool', poolId, '--subject', 'acme', '--limit', 'none', '--query', 'limit'],
      OPS,
    );
    expect(cleared).toMatchObject({ status: 0, out: 'null' });
  });

  it('pools create prints its idempotency key on stderr, and the same --key creates once', async () => {
    const site = (await d.api('sites.create', { name: 'cli-site', region: 'eu-2' })) as { id: string };
    const first = await run(
      [
        'pools',
        'create',
        '--site',
        site.id,
        '--name',
        'cli-pool',
        '--key',
        'cli-test-key-1',
        '--query',
        'id',
      ],
      OPS,
    );
    const again = await run(
      [
        'pools',
        'create',
        '--site',
        site.id,
        '--name',
        'cli-pool',
        '--key',
        'cli-test-key-1',
        '--query',
        'id',
      ],
      OPS,
    );
    expect(first.status).toBe(0);
    expect(first.err).toBe('idempotency key: cli-test-key-1');
    expect(again.out).toBe(first.out);
    const fresh = await run(
      ['pools', 'create', '--site', site.id, '--name', 'cli-pool-2', '--query', 'id'],
      OPS,
    );
    expect(fresh.err).toMatch(/^idempotency key: cli-[0-9a-f-]{36}$/);
    const archived = await run(['pools', 'archive', first.out, '--query', 'state'], OPS);
    expect(archived).toMatchObject({ status: 0, out: 'archived' });
  });

  it('drivers list is a table', async () => {
    const result = await run(['drivers', 'list']);
    expect(result.status).toBe(0);
    expect(result.out.split('\n')[0]).toMatch(/^name\s+classes\s+joins\s+simulated\s+summary$/);
  });
});

describe('capacity', () => {
  it('capacity prints a row per pool and per GPU model', async () => {
    const result = await run(['capacity']);
    expect(result.status).toBe(0);
    expect(result.out).toBe(
      [
        'pool                             name      model  total  reserved  free  unavailable  queued',
        `${poolId}  gpu-main  *      16     0         16    0            0`,
        `${poolId}  gpu-main  A100   8      0         8     0`,
        `${poolId}  gpu-main  H100   8      0         8     0`,
      ].join('\n'),
    );
  });

  it('capacity --preview --tolerate counts a tainted node, as reserve --tolerate does', async () => {
    const node = await addNode(d, poolId, 'h100-tainted', h100x8('nvl-t'), { rack: 'tainted' });
    await d.api('nodes.taint', { nodeId: node.nodeId, add: [{ key: 'maintenance' }] });
    const preview = (extra: string[]) =>
      run([
        'capacity',
        '--preview',
        '--pool',
        poolId,
        '--gpus',
        '8',
        '--for',
        '1h',
        '--selector',
        'rack = tainted',
        '--query',
        'fits',
        ...extra,
      ]);
    expect((await preview([])).out).toBe('false');
    expect((await preview(['--tolerate', 'maintenance'])).out).toBe('true');
    const stray = await run(['capacity', '--tolerate', 'maintenance']);
    expect(stray.status).toBe(2);
    expect(stray.err.split('\n')[0]).toBe('INVALID_ARGUMENT: --tolerate needs --preview');
    await d.api('nodes.retire', { nodeId: node.nodeId, force: true });
  });

  it('capacity --preview needs --pool, --gpus and --for, and checks the selector locally', async () => {
    const missing = await run(['capacity', '--preview', '--pool', poolId, '--gpus', '8']);
    expect(missing.status).toBe(2);
    expect(missing.err.split('\n')[0]).toBe('INVALID_ARGUMENT: capacity --preview needs --for');
    const stray = await run(['capacity', '--gpus', '8']);
    expect(stray.status).toBe(2);
    expect(stray.err.split('\n')[0]).toBe('INVALID_ARGUMENT: --gpus needs --preview');
    const selector = await run([
      'capacity',
      '--preview',
      '--pool',
      poolId,
      '--gpus',
      '8',
      '--for',
      '1d',
      '--selector',
      'vramGiB >= big',
    ]);
    expect(selector.status).toBe(2);
    expect(selector.err.split('\n')[0]).toBe(
      'INVALID_ARGUMENT: --selector: vramGiB takes a whole number of GiB, not "big"',
    );
    const fits = await run([
      'capacity',
      '--preview',
      '--pool',
      poolId,
      '--gpus',
      '8',
      '--for',
      '1d',
      '--selector',
      'vramGiB >= 80',
      '--format',
      'compact',
    ]);
    expect(fits.status).toBe(0);
    const answer = JSON.parse(fits.out);
    expect(answer).toMatchObject({ fits: true, queuedAhead: 0, reason: null });
    expect(answer.placement).toEqual([
      expect.objectContaining({
        gpuModel: 'H100',
        gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7],
        nvlinkDomain: 'nvl-a',
      }),
    ]);
  });
});

describe('reservations', () => {
  it('reserve refuses a bad selector (exit 2) and sends nothing', async () => {
    for (const [selector, message] of [
      [
        'gpuProduct in H100',
        '"gpuProduct in H100": in and notin take a list in parentheses, like gpuModel in (H100, A100)',
      ],
      ['gpuModel >= 3', 'gpuModel compares with = != in notin, not >='],
      ['vramGiB >= 80,', 'an empty term (two commas, or a comma at the start or end)'],
    ] as const) {
      const result = await run([
        'reserve',
        '--pool',
        poolId,
        '--gpus',
        '1',
        '--for',
        '1h',
        '--selector',
        selector,
      ]);
      expect(result.status).toBe(2);
      expect(result.err.split('\n')[0]).toBe(`INVALID_ARGUMENT: --selector: ${message}`);
    }
    expect((await d.api('reservations.list', {}, ACME)).items).toEqual([]);
  });

  it('reserve prints the key it used on stderr and the reservation on stdout; the same --key reserves once', async () => {
    const args = [
      'reserve',
      '--pool',
      poolId,
      '--gpus',
      '4',
      '--for',
      '8h',
      '--nvlink',
      '--selector',
      'gpuProduct in (H100-SXM5-80GB), vramGiB >= 80',
    ];
    const first = await run([...args, '--format', 'compact']);
    expect(first.status).toBe(0);
    const key = /^idempotency key: (cli-[0-9a-f-]{36})$/.exec(first.err)?.[1];
    expect(key).toBeDefined();
    const reservation = JSON.parse(first.out);
    expect(reservation).toMatchObject({ state: 'active', gpus: 4, nvlink: true, durationSeconds: 28_800 });
    const again = await run([...args, '--key', key!, '--query', 'id']);
    expect(again).toMatchObject({ status: 0, out: reservation.id });

    const binding = await run([
      'reservations',
      'get',
      reservation.id,
      '--query',
      'binding',
      '--format',
      'compact',
    ]);
    expect(JSON.parse(binding.out)).toEqual([
      expect.objectContaining({
        gpuModel: 'H100',
        gpuIndices: [0, 1, 2, 3],
        nvlinkDomain: 'nvl-a',
        nodeState: 'ready',
      }),
    ]);
    const list = await run(['reservations', 'list', '--state', 'active']);
    expect(list.out.split('\n')).toEqual([
      expect.stringMatching(
        /^id\s+state\s+pool\s+gpus\s+nvlink\s+for\s+queue\s+health\s+endsAt\s+nodes\s+endReason\s+owner$/,
      ),
      // The owner is the caller (issue 15: lists show who a reservation belongs to).
      expect.stringMatching(
        new RegExp(
          `^${reservation.id}  active  ${poolId}  4     yes     8h\\s+ok\\s+\\S+Z  1\\s+${reservation.ownerId}$`,
        ),
      ),
    ]);
    const extended = await run(['extend', reservation.id, '--by', '4h', '--query', 'durationSeconds']);
    expect(extended).toMatchObject({ status: 0, out: String(12 * 3600) });
    const badBy = await run(['extend', reservation.id, '--by', 'forever']);
    expect(badBy.status).toBe(2);
    const released = await run(['release', reservation.id, '--format', 'compact']);
    expect(JSON.parse(released.out)).toMatchObject({ state: 'ended', endReason: 'released' });
    const wrongKind = await run(['release', poolId]);
    expect(wrongKind.status).toBe(2);
    expect(wrongKind.err.split('\n')[0]).toBe(
      `INVALID_ARGUMENT: reservation must be a reservation id like rsv_01… (got "${poolId}")`,
    );
  });

  it('a reserve that reuses --key with another input prints the server’s hint, in process and over --url', async () => {
    const server = createNodeServer(d.compute);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const key = 'cli-hint-key-1';
      const args = ['reserve', '--pool', poolId, '--for', '1h', '--wait', '0', '--key', key];
      const first = await run([...args, '--gpus', '1', '--query', 'id']);
      expect(first.status).toBe(0);
      for (const where of [[], ['--url', url]]) {
        const reused = await run([...args, '--gpus', '2', ...where]);
        expect(reused.status).toBe(1);
        expect(reused.out).toBe('');
        expect(reused.err.split('\n')).toEqual([
          `idempotency key: ${key}`,
          'CONFLICT: this idempotency key was used with a different input',
          'hint: Use a new --key for a different request, or repeat the first request exactly.',
          expect.stringMatching(/^request id: req_[0-9a-f]{32}$/),
        ]);
      }
      expect((await run(['release', first.out, '--query', 'state'])).out).toBe('ended');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('reserve waits up to --wait seconds while queued, with progress on stderr, then prints the reservation as it is', async () => {
    const big = await run(['reserve', '--pool', poolId, '--gpus', '16', '--for', '1h', '--query', 'id']);
    expect(big.status).toBe(0);
    const started = Date.now();
    const queued = await run([
      'reserve',
      '--pool',
      poolId,
      '--gpus',
      '2',
      '--for',
      '1h',
      '--wait',
      '1',
      '--format',
      'compact',
    ]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(queued.status).toBe(0);
    const reservation = JSON.parse(queued.out);
    expect(reservation).toMatchObject({ state: 'queued', queuePosition: 1 });
    // stdout is the answer alone; stderr the key, where the wait began, and how it ended.
    expect(queued.out.split('\n')).toHaveLength(1);
    expect(queued.err.split('\n').slice(1)).toEqual([
      `${reservation.id}: queued, position 1 (0.0 s); waiting up to 1s`,
      `${reservation.id}: still queued, position 1 after 1s; see it with: better-compute reservations get ${reservation.id}`,
    ]);
    const noWait = await run([
      'reserve',
      '--pool',
      poolId,
      '--gpus',
      '2',
      '--for',
      '1h',
      '--wait',
      '0',
      '--query',
      'state',
    ]);
    expect(noWait.out).toBe('queued');
    expect(noWait.err.split('\n')).toHaveLength(1);
    const list = await run(['reservations', 'list', '--state', 'queued', '--query', 'items[].id']);
    for (const id of list.out.split('\n')) await run(['release', id]);
    await run(['release', big.out]);
  });

  /** The queued reservation a `reserve` running beside the test made, once it is there. */
  async function queuedOne(): Promise<string> {
    for (let i = 0; i < 200; i++) {
      const ids = (await run(['reservations', 'list', '--state', 'queued', '--query', 'items[].id'])).out;
      if (ids) return ids.split('\n')[0]!;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error('no queued reservation appeared');
  }

  it('on a terminal the wait ticks on a status line, cleared at the end; the lines on stderr stay as they are', async () => {
    const big = await run(['reserve', '--pool', poolId, '--gpus', '16', '--for', '1h', '--query', 'id']);
    const shown: (string | null)[] = [];
    const queued = await cli.printed(
      ['reserve', '--pool', poolId, '--gpus', '2', '--for', '1h', '--wait', '3', '--query', 'id'],
      { BETTER_COMPUTE_TOKEN: ACME },
      { status: (line) => shown.push(line) },
    );
    expect(queued.status).toBe(0);
    const id = queued.out;
    const ticks = shown.filter((line): line is string => line !== null);
    expect(ticks.length).toBeGreaterThanOrEqual(2);
    for (const line of ticks)
      expect(line).toMatch(new RegExp(`^${id}: queued, position 1, \\d+\\.\\d s of 3s$`));
    expect(shown.at(-1)).toBeNull();
    expect(queued.err).not.toContain(' of 3s');
    expect(queued.err.split('\n').slice(1)).toEqual([
      `${id}: queued, position 1 (0.0 s); waiting up to 3s`,
      `${id}: still queued, position 1 after 3s; see it with: better-compute reservations get ${id}`,
    ]);
    // Where stderr is not a terminal (as here) the process's IO has no status line at all.
    expect(processIO().status).toBeUndefined();
    await run(['release', id]);
    await run(['release', big.out]);
  });

  it('a queued reservation that starts during --wait: one progress line per change, exit 0 (issue 31)', async () => {
    const big = await run(['reserve', '--pool', poolId, '--gpus', '16', '--for', '1h', '--query', 'id']);
    const waiting = run([
      'reserve',
      '--pool',
      poolId,
      '--gpus',
      '2',
      '--for',
      '1h',
      '--wait',
      '30',
      '--format',
      'compact',
    ]);
    const id = await queuedOne();
    expect((await run(['release', big.out, '--query', 'state'])).out).toBe('ended');
    const result = await waiting;
    expect(result.status).toBe(0);
    expect(JSON.parse(result.out)).toMatchObject({ id, state: 'active' });
    const progress = result.err.split('\n').slice(1);
    expect(progress[0]).toBe(`${id}: queued, position 1 (0.0 s); waiting up to 30s`);
    expect(progress.at(-1)).toMatch(new RegExp(`^${id}: active \\(\\d+\\.\\d s\\)$`));
    expect(progress).toHaveLength(2);
    await run(['release', id]);
  });

  it('a queued reservation that ends without starting fails the reserve with its reason, and prints it (issue 31)', async () => {
    const big = await run(['reserve', '--pool', poolId, '--gpus', '16', '--for', '1h', '--query', 'id']);
    const waiting = run([
      'reserve',
      '--pool',
      poolId,
      '--gpus',
      '2',
      '--for',
      '1h',
      '--wait',
      '30',
      '--format',
      'compact',
    ]);
    const id = await queuedOne();
    await run(['release', id]);
    const result = await waiting;
    expect(result.status).toBe(1);
    // The answer is still printed, so a script has the id; the failure says what happened to it.
    expect(JSON.parse(result.out)).toMatchObject({
      id,
      state: 'ended',
      endReason: 'cancelled',
      activatedAt: null,
    });
    const lines = result.err.split('\n');
    expect(lines.slice(1, 3)).toEqual([
      `${id}: queued, position 1 (0.0 s); waiting up to 30s`,
      expect.stringMatching(new RegExp(`^${id}: ended \\(cancelled\\) \\(\\d+\\.\\d s\\)$`)),
    ]);
    expect(lines[3]).toBe(
      `RESOURCE_FAILED: reservation ${id} ended (cancelled) while queued, without starting`,
    );
    expect(lines[4]).toMatch(/^hint: "better-compute reservations get rsv_\w+" shows it; reserve again/);
    await run(['release', big.out]);
  });
});

describe('a credential pasted as a value is never printed back, by the CLI or the server', () => {
  const secret = 'Zq3xW8vN2kLp5RtY7uB0cD4eF6gH9jKmA1sT-u_X';
  const joinToken = `jtok_01m8y835dq99ammqcng4whf1b6.${secret}`;
  it.each([
    ['events list --cursor', ['events', 'list', '--cursor', joinToken]],
    ['usage list --from', ['usage', 'list', '--from', joinToken]],
    [
      'reserve --selector',
      ['reserve', '--pool', 'POOL', '--gpus', '1', '--for', '1h', '--selector', joinToken],
    ],
    ['api events.list cursor=', ['api', 'events.list', 'tenantId=acme', `cursor=${joinToken}`]],
    [
      'api capacity.preview selector=',
      [
        'api',
        'capacity.preview',
        'tenantId=acme',
        'poolId=POOL',
        'gpus:=1',
        'durationSeconds:=60',
        `selector=${joinToken}`,
      ],
    ],
  ])('%s', async (_, argv) => {
    const result = await run(
      argv.map((word) => (word === 'POOL' ? poolId : word.replace('poolId=POOL', `poolId=${poolId}`))),
    );
    expect(result.status).not.toBe(0);
    expect(result.err).toMatch(/^INVALID_ARGUMENT: /);
    expect(result.err).not.toContain(secret);
    expect(result.out).not.toContain(secret);
  });
});

describe('events and usage', () => {
  it('events list is a table; --cursor takes only the colon form', async () => {
    const listed = await run(['events', 'list', '--type', 'reservation.', '--limit', '2']);
    expect(listed.status).toBe(0);
    const lines = listed.out.split('\n');
    expect(lines[0]).toMatch(/^position\s+type\s+subject\s+actor\s+occurredAt$/);
    expect(lines[1]).toMatch(/^\d+:\d+\s+reservation\.created\s+rsv_\w+\s+usr_alice\s+\S+Z$/);
    const next = /^\(more rows: --cursor (\d+:\d+)\)$/.exec(lines[3]!)?.[1];
    expect(next).toBeDefined();
    const page = await run(['events', 'list', '--type', 'reservation.', '--limit', '2', '--cursor', next!]);
    expect(page.status).toBe(0);
    const dotted = await run(['events', 'list', '--cursor', next!.replace(':', '.')]);
    expect(dotted.status).toBe(2);
    expect(dotted.err.split('\n')).toEqual([
      `INVALID_ARGUMENT: --cursor must be an outbox position like 184467:12 (got "${next!.replace(':', '.')}")`,
      `hint: events list takes the colon form: --cursor ${next}`,
    ]);
  });

  it('usage list is a table; usage export writes a new 0600 file and never over one', async () => {
    const listed = await run(['usage', 'list']);
    expect(listed.status).toBe(0);
    expect(listed.out.split('\n')[0]).toMatch(
      /^(window\s+tenant\s+pool\s+model\s+gpuSeconds\s+gpuHours|\(no rows\))$/,
    );
    const badTime = await run(['usage', 'list', '--from', 'yesterday']);
    expect(badTime.status).toBe(2);

    const out = join(scratch, 'usage.csv');
    const exported = await run([
      'usage',
      'export',
      '--export-format',
      'csv',
      '--out',
      'usage.csv',
      '--format',
      'compact',
    ]);
    expect(exported.status).toBe(0);
    const summary = JSON.parse(exported.out);
    expect(summary).toMatchObject({ out, format: 'csv' });
    expect(Object.keys(summary)).toEqual(['out', 'format', 'rows', 'bytes']);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(readFileSync(out, 'utf8').length).toBe(summary.bytes);

    const existing = join(scratch, 'existing.jsonl');
    writeFileSync(existing, 'keep me');
    const refused = await run(['usage', 'export', '--export-format', 'jsonl', '--out', 'existing.jsonl']);
    expect(refused.status).toBe(1);
    expect(refused.err.split('\n')[0]).toBe(
      'ALREADY_EXISTS: existing.jsonl already exists; usage export never writes over a file',
    );
    expect(refused.out).toBe('');
    expect(readFileSync(existing, 'utf8')).toBe('keep me');
    expect(existsSync(join(scratch, 'missing.jsonl'))).toBe(false);
  });

  it('usage export --out into a directory that does not exist is a usage error with a hint; nothing is created', async () => {
    const before = readdirSync(scratch);
    const missing = await run(['usage', 'export', '--out', 'no-such-dir/usage.csv']);
    expect(missing).toEqual({
      status: 2,
      out: '',
      err: [
        `INVALID_ARGUMENT: the directory of --out no-such-dir/usage.csv does not exist: ${join(scratch, 'no-such-dir')}`,
        'hint: Create the directory first, or pass --out a path in an existing one.',
      ].join('\n'),
    });
    writeFileSync(join(scratch, 'a-file'), '');
    const notDirectory = await run(['usage', 'export', '--out', 'a-file/usage.csv']);
    expect(notDirectory.status).toBe(2);
    expect(notDirectory.err.split('\n')).toEqual([
      `INVALID_ARGUMENT: the directory of --out a-file/usage.csv is not a directory: a part of ${join(scratch, 'a-file')} is a file`,
      'hint: Pass --out a path in an existing directory.',
    ]);
    rmSync(join(scratch, 'a-file'));
    expect(readdirSync(scratch)).toEqual(before);
  });

  it('usage export refuses an existing --out with the file’s own hint', async () => {
    writeFileSync(join(scratch, 'taken.csv'), 'keep me');
    const refused = await run(['usage', 'export', '--out', 'taken.csv']);
    expect(refused).toEqual({
      status: 1,
      out: '',
      err: [
        'ALREADY_EXISTS: taken.csv already exists; usage export never writes over a file',
        'hint: Pass --out the name of a file that does not exist yet, or move the existing one away.',
      ].join('\n'),
    });
    expect(readFileSync(join(scratch, 'taken.csv'), 'utf8')).toBe('keep me');
  });

  it('usage export leaves no file behind when the call fails', async () => {
    const refused = await run(['usage', 'export', '--out', 'refused.csv'], 'not-a-token');
    expect(refused.status).toBe(1);
    expect(refused.err.split('\n')[0]).toMatch(/^UNAUTHENTICATED: /);
    expect(existsSync(join(scratch, 'refused.csv'))).toBe(false);
  });
});

describe('sim', () => {
  it('prints the JSON report and exits 0 when every invariant holds', async () => {
    const result = await run(['sim', '--seed', '3', '--nodes', '6', '--steps', '30', '--format', 'compact']);
    expect(result.status).toBe(0);
    const report = JSON.parse(result.out);
    expect(report).toMatchObject({ ok: true, seed: 3, nodes: 6, steps: 30, violations: [] });
    expect(report.stateHash).toMatch(/^[0-9a-f]{64}$/);
    const bad = await run(['sim', '--nodes', '0']);
    expect(bad.status).toBe(2);
  }, 120_000);
});
