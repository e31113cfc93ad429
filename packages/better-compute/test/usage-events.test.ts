/**
 * usage list pages by key (a page after a cursor starts strictly after the row it ended on, however
 * usage changed in between), usage list and export use --from and --to as given and cut their
 * windows to them, and events list refuses a --type that could match nothing, in the API and the
 * CLI alike (docs/decisions/usage-paging.md).
 */
import { testDatabaseKinds } from '@better-compute/db/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { cliRunner, scratchDirectory } from './cli-support.js';
import {
  a100x8,
  ACME,
  addNode,
  type FleetDeployment,
  GLOBEX,
  h100x8,
  l40sx4,
  OPS,
  seedPool,
  suiteDeployment,
} from './fleet-support.js';
import type { UsageRow as Usage } from '../src/modules/fleet/usage.js';

const kinds = await testDatabaseKinds();
const HOUR = 3600;

/** Moves the clock to the next whole hour and returns it. */
function nextHour(d: FleetDeployment): number {
  const now = d.clock.now().getTime();
  const hour = (Math.floor(now / (HOUR * 1000)) + 1) * HOUR * 1000;
  d.clock.advance((hour - now) / 1000);
  return hour;
}

const at = (ms: number) => new Date(ms).toISOString();
const CURSOR_REFUSED = 'cursor: must be a cursor from a previous page';
const TYPE_REFUSED =
  'type: must be an event type like reservation.created, or a prefix ending with . or .* like reservation. or node.*';

describe.each(kinds)('usage and events on %s', (kind) => {
  const d = suiteDeployment(kind);

  /** Every page of usage.list, following nextCursor. */
  async function allPages(input: Record<string, unknown>, token = OPS): Promise<Usage[]> {
    const rows: Usage[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: Usage[]; nextCursor: string | null } = await d.api(
        'usage.list',
        { ...input, ...(cursor ? { cursor } : {}) },
        token,
      );
      rows.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    return rows;
  }

  it('a usage page after a cursor starts after the row it ended on, though rows appeared before it', async () => {
    const hour = nextHour(d);
    const { poolId } = await seedPool(d, 'paging');
    await addNode(d, poolId, 'paging-h100', h100x8('paging-nvl-h'));
    await addNode(d, poolId, 'paging-a100', a100x8('paging-nvl-a0', 'paging-nvl-a1'));
    await addNode(d, poolId, 'paging-l40s', l40sx4());
    for (const gpuModel of ['A100', 'H100', 'L40S'])
      await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: 4 * HOUR, gpuModel }, GLOBEX);
    d.clock.advance(600);
    const query = { poolId, from: at(hour), to: at(hour + HOUR * 1000) };
    const first = await d.api('usage.list', { ...query, limit: 2 });
    expect(first.items.map((u: Usage) => `${u.tenantId} ${u.gpuModel}`)).toEqual([
      'globex A100',
      'globex H100',
    ]);
    expect(first.nextCursor).toEqual(expect.any(String));

    // acme's row sorts before every globex row: an offset would now start at globex H100 again.
    await d.api(
      'reservations.create',
      { poolId, gpus: 1, durationSeconds: 4 * HOUR, gpuModel: 'H100' },
      ACME,
    );
    d.clock.advance(60);
    const second = await d.api('usage.list', { ...query, limit: 2, cursor: first.nextCursor });
    expect(second.items.map((u: Usage) => `${u.tenantId} ${u.gpuModel}`)).toEqual(['globex L40S']);
    expect(second.nextCursor).toBeNull();

    // One row a page still gives every row once, in order, and the export holds the same rows.
    const paged = await allPages({ ...query, limit: 1 });
    expect(paged.map((u) => `${u.tenantId} ${u.gpuModel}`)).toEqual([
      'acme H100',
      'globex A100',
      'globex H100',
      'globex L40S',
    ]);
    const exported = await d.api('usage.export', { ...query, format: 'jsonl' });
    expect(exported.rows).toBe(4);
    expect(
      exported.content
        .trim()
        .split('\n')
        .map((line: string) => JSON.parse(line)),
    ).toEqual(paged);
    expect((await d.api('usage.export', { ...query, format: 'csv' })).rows).toBe(4);
  });

  it('a usage cursor the list did not give is refused, naming the cursor', async () => {
    const { poolId } = await seedPool(d, 'cursors');
    const hour = nextHour(d);
    await addNode(d, poolId, 'cursors-h100', h100x8('cursors-nvl'));
    await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: 4 * HOUR }, GLOBEX);
    d.clock.advance(2 * HOUR);
    const query = { poolId, from: at(hour), to: at(hour + 2 * HOUR * 1000) };
    const page = await d.api('usage.list', { ...query, limit: 1 });
    expect(page.items).toHaveLength(1);
    const good: string = page.nextCursor;
    const json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    for (const cursor of [
      '1', // the old offset form
      'garbage',
      '184467:12', // an events list position
      `${good}=`, // base64 padding: another spelling of the same bytes
      good.slice(0, -2),
      json({ hour: 1 }),
      json([1, 'globex', poolId]),
      json([1.5, 'globex', poolId, 'H100']),
      json([1, 'Not A Tenant', poolId, 'H100']),
      json([1, 'globex', 'node_01k5w0000000000000000000000', 'H100']),
      json([1, 'globex', poolId, '']),
      'W'.repeat(401),
    ]) {
      const refused = await d.fails('usage.list', { ...query, cursor });
      expect(refused, cursor).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: CURSOR_REFUSED,
        details: { field: 'cursor' },
      });
    }
    expect((await d.api('usage.list', { ...query, limit: 1, cursor: good })).items).toHaveLength(1);
  });

  it('usage uses --from and --to as given, and each window says where it was cut', async () => {
    const { poolId } = await seedPool(d, 'bounds');
    const hour = nextHour(d);
    await addNode(d, poolId, 'bounds-h100', h100x8('bounds-nvl'));
    await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: 6 * HOUR }, ACME);
    d.clock.advance(3 * HOUR);
    const min = 60_000;
    const list = async (from: number, to: number) =>
      (await d.api('usage.list', { poolId, from: at(from), to: at(to) }, ACME)).items as Usage[];
    const windows = (rows: Usage[]) => rows.map((u) => [u.windowStart, u.windowEnd, u.gpuSeconds]);

    // One second is one second of usage, not the half hour before it.
    expect(windows(await list(hour + 29 * min + 59_000, hour + 30 * min))).toEqual([
      [at(hour + 29 * min + 59_000), at(hour + 30 * min), 2],
    ]);
    // Cut at both ends; the whole hours between stay whole.
    const cut = await list(hour + 30 * min, hour + 135 * min);
    expect(windows(cut)).toEqual([
      [at(hour + 30 * min), at(hour + 60 * min), 2 * 1800],
      [at(hour + 60 * min), at(hour + 120 * min), 2 * 3600],
      [at(hour + 120 * min), at(hour + 135 * min), 2 * 900],
    ]);
    // The same instant with an offset is the same bound.
    const plusTwo = (ms: number) => at(ms + 2 * HOUR * 1000).replace('Z', '+02:00');
    const local = await d.api(
      'usage.list',
      { poolId, from: plusTwo(hour + 150 * min), to: plusTwo(hour + 4 * HOUR * 1000) },
      ACME,
    );
    expect(windows(local.items)).toEqual([[at(hour + 150 * min), at(hour + 180 * min), 2 * 1800]]);
    // A window past now ends at its hour: only the bound cuts it, and usage stops at now.
    expect(windows(await list(hour + 150 * min, hour + 5 * HOUR * 1000))).toEqual([
      [at(hour + 150 * min), at(hour + 180 * min), 2 * 1800],
    ]);

    // The export follows the same rule, row for row.
    const jsonl = await d.api(
      'usage.export',
      { poolId, from: at(hour + 30 * min), to: at(hour + 135 * min), format: 'jsonl' },
      ACME,
    );
    expect(
      jsonl.content
        .trim()
        .split('\n')
        .map((line: string) => JSON.parse(line)),
    ).toEqual(cut);
    const csv = await d.api(
      'usage.export',
      { poolId, from: at(hour + 30 * min), to: at(hour + 135 * min), format: 'csv' },
      ACME,
    );
    expect(csv.content.split('\n')[3]).toBe(
      `${at(hour + 120 * min)},${at(hour + 135 * min)},acme,${poolId},H100,1800`,
    );

    const empty = await d.fails(
      'usage.list',
      { poolId, from: at(hour + 30 * min), to: at(hour + 30 * min) },
      ACME,
    );
    expect(empty).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'from must be before to' });
  });

  it('events.list takes a type, a prefix ending with . or .*, and refuses anything else', async () => {
    const { poolId } = await seedPool(d, 'types');
    await addNode(d, poolId, 'types-h100', h100x8('types-nvl'));
    await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR }, ACME);
    const types = async (type: string, token = ACME) =>
      ((await d.api('events.list', { type, limit: 500 }, token)).items as { type: string }[]).map(
        (e) => e.type,
      );
    await expect.poll(() => types('reservation.created')).toContain('reservation.created');
    for (const prefix of ['reservation.', 'reservation.*']) {
      const found = await types(prefix);
      expect(found.length, prefix).toBeGreaterThan(0);
      expect(
        found.every((t) => t.startsWith('reservation.')),
        prefix,
      ).toBe(true);
    }
    for (const prefix of ['node.', 'node.*', 'pool.*'])
      expect((await types(prefix, OPS)).length, prefix).toBeGreaterThan(0);
    expect(await types('node.inventory.changed', OPS)).toEqual(expect.any(Array));
    expect(await types('node.inventory.*', OPS)).toEqual(expect.any(Array));

    for (const type of [
      'node*',
      '*',
      '.',
      'node..',
      'node.*.changed',
      'bad type!',
      '',
      'reservation',
      '.created',
      'node.**',
    ]) {
      const refused = await d.fails('events.list', { type }, OPS);
      expect(refused, type).toMatchObject({ code: 'INVALID_ARGUMENT', message: TYPE_REFUSED });
    }
    expect((await d.fails('events.list', { type: `a.${'b'.repeat(99)}` })).message).toBe(
      'type: must be at most 100 characters',
    );
  });
});

describe('the usage and events commands', () => {
  const d = suiteDeployment('pglite');
  let poolId = '';
  let hour = 0;
  const cli = cliRunner(() => d.compute, scratchDirectory('.tmp-usage-events-'));
  const run = (argv: string[], token = ACME) => cli.printed(argv, { BETTER_COMPUTE_TOKEN: token });

  beforeAll(async () => {
    ({ poolId } = await seedPool(d));
    hour = nextHour(d);
    await addNode(d, poolId, 'cli-h100', h100x8('cli-nvl'));
    await addNode(d, poolId, 'cli-a100', a100x8('cli-nvl-a0', 'cli-nvl-a1'));
    for (const gpuModel of ['A100', 'H100'])
      await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: 4 * HOUR, gpuModel }, ACME);
    d.clock.advance(2 * HOUR);
  }, 120_000);

  it('usage list pages with the cursor each page ends with, and refuses one it did not give', async () => {
    const bounds = ['--from', at(hour), '--to', at(hour + 2 * HOUR * 1000)];
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await run([
        'usage',
        'list',
        ...bounds,
        '--limit',
        '1',
        ...(cursor ? ['--cursor', cursor] : []),
      ]);
      expect(page.status).toBe(0);
      const lines = page.out.split('\n');
      seen.push(lines[1]!.split(/\s+/).slice(0, 4).join(' '));
      cursor = /^\(more rows: --cursor (\S+)\)$/.exec(lines.at(-1)!)?.[1];
      if (!cursor) break;
    }
    expect(seen).toEqual([
      `${at(hour)} acme ${poolId} A100`,
      `${at(hour)} acme ${poolId} H100`,
      `${at(hour + HOUR * 1000)} acme ${poolId} A100`,
      `${at(hour + HOUR * 1000)} acme ${poolId} H100`,
    ]);
    const refused = await run(['usage', 'list', '--cursor', '2']);
    expect(refused.status).toBe(2);
    expect(refused.err.split('\n').slice(0, 2)).toEqual([
      `INVALID_ARGUMENT: ${CURSOR_REFUSED}`,
      'hint: Pass the cursor a previous page of usage list ended with, or leave it out for the first page.',
    ]);
  });

  it('usage list --to cuts the last window, and says so', async () => {
    const listed = await run([
      'usage',
      'list',
      '--from',
      at(hour + 15 * 60_000),
      '--to',
      at(hour + 30 * 60_000),
      '--format',
      'compact',
      '--query',
      'items',
    ]);
    expect(listed.status).toBe(0);
    expect(JSON.parse(listed.out).map((u: Usage) => [u.windowStart, u.windowEnd, u.gpuSeconds])).toEqual([
      [at(hour + 15 * 60_000), at(hour + 30 * 60_000), 900],
      [at(hour + 15 * 60_000), at(hour + 30 * 60_000), 900],
    ]);
  });

  it('events list --type refuses a pattern that could match nothing, with a hint, before sending', async () => {
    expect((await run(['events', 'list', '--type', 'reservation.created'])).status).toBe(0);
    expect((await run(['events', 'list', '--type', 'reservation.'])).status).toBe(0);
    expect((await run(['events', 'list', '--type', 'node.*'], OPS)).status).toBe(0);
    const forms =
      'must be an event type like reservation.created, or a prefix ending with . or .* like reservation. or node.*';
    for (const [type, hint] of [
      [
        'node*',
        'hint: For every node event pass --type node.*; for one type, the whole type (reservation.created).',
      ],
      [
        'node..',
        'hint: For every node event pass --type node.*; for one type, the whole type (reservation.created).',
      ],
      [
        'reservation',
        'hint: For every reservation event pass --type reservation.*; for one type, the whole type (reservation.created).',
      ],
      ...['*', '.', 'node.*.changed', 'bad type!', ''].map((t) => [
        t,
        'hint: Pass one type (reservation.created) or a prefix ending with . or .* (reservation., node.*); leave --type out for every event.',
      ]),
    ] as const) {
      const refused = await run(['events', 'list', '--type', type]);
      expect(refused, type).toEqual({
        status: 2,
        out: '',
        err: [`INVALID_ARGUMENT: --type ${forms} (got "${type}")`, hint].join('\n'),
      });
    }
    // api events.list is refused by the same rule, by the server.
    const api = await run(['api', 'events.list', 'type=node*']);
    expect(api.status).toBe(2);
    expect(api.err.split('\n')[0]).toBe(`INVALID_ARGUMENT: ${TYPE_REFUSED}`);
    expect((await run(['api', 'events.list', 'type=reservation.'])).status).toBe(0);
  });
});
