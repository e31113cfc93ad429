import { describe, expect, it } from 'vitest';
import { ComputeError, ERROR_STATUS, formatDuration, parseDuration } from '@better-compute/core';
import { templateColumns } from '../src/cli/commands/sandbox/shared.js';
import {
  applyQuery,
  CliError,
  exitStatusOf,
  formatResult,
  hintFor,
  printFailure,
  RemoteExitError,
  renderTable,
} from '../src/cli/index.js';

const ESC = '\u001b';
const BEL = '\u0007';
const DEL = '\u007f';
const CSI = '\u009b';
const LS = '\u2028';
const hostile = `a${ESC}[31mred${BEL}b${DEL}c${CSI}2Jd${LS}e`;

describe('the output formatter', () => {
  it('prints indented JSON by default and one line with --format compact', () => {
    expect(formatResult({ a: 1, b: ['x'] })).toBe('{\n  "a": 1,\n  "b": [\n    "x"\n  ]\n}');
    expect(formatResult({ a: 1, b: ['x'] }, { format: 'compact' })).toBe('{"a":1,"b":["x"]}');
  });

  it('prints a list as a table with the (more rows: --cursor …) footer', () => {
    const page = {
      items: [
        { id: 'rsv_1', state: 'active' },
        { id: 'rsv_2', state: 'queued', note: null },
      ],
      nextCursor: '184467:12',
    };
    expect(formatResult(page, { format: 'table' })).toBe(
      ['id     state   note', 'rsv_1  active', 'rsv_2  queued', '(more rows: --cursor 184467:12)'].join('\n'),
    );
    expect(formatResult({ items: [], nextCursor: null }, { defaultFormat: 'table' })).toBe('(no rows)');
    expect(formatResult({ items: [{ id: 'x' }], nextCursor: null }, { defaultFormat: 'table' })).toBe(
      'id\nx',
    );
  });

  it('prints an object as key and value rows in a table, and nested values as one-line JSON', () => {
    expect(formatResult({ id: 'a', labels: { gpu: 'h100' } }, { format: 'table' })).toBe(
      'key     value\nid      a\nlabels  {"gpu":"h100"}',
    );
  });

  it.each([
    ['binding', { binding: { nodeId: 'node_1' } }, '{\n  "nodeId": "node_1"\n}'],
    ['items[].id', { items: [{ id: 'a' }, { id: 'b' }] }, 'a\nb'],
    [
      'findings[].check',
      { findings: [{ check: 'database.reachable' }, { check: 'clock.skew' }] },
      'database.reachable\nclock.skew',
    ],
    ['items[1].id', { items: [{ id: 'a' }, { id: 'b' }] }, 'b'],
    ['.name', { name: 'gpu-a' }, 'gpu-a'],
    ['items[0].missing', { items: [{ id: 'a' }] }, 'null'],
  ])('--query %s', (query, value, printed) => {
    expect(formatResult(value, { query })).toBe(printed);
  });

  it('prints a selected list as JSON when --format is given', () => {
    expect(formatResult({ items: [{ id: 'a' }] }, { query: 'items[].id', format: 'compact' })).toBe('["a"]');
  });

  it.each(['json', 'compact', 'table'] as const)(
    'a --query that selects a string prints it raw under --format %s, so a script captures the value itself',
    (format) => {
      expect(formatResult({ nextCursor: '184467:12' }, { query: 'nextCursor', format })).toBe('184467:12');
      expect(formatResult({ reason: hostile }, { query: 'reason', format })).toBe('a [31mred b c 2Jd\ne');
      expect(formatResult('plain', { format })).toBe('plain');
    },
  );

  it('a --query that selects anything but a string still follows --format', () => {
    const value = { limit: 12, labels: { gpu: 'h100' }, ids: ['a'] };
    expect(formatResult(value, { query: 'limit', format: 'json' })).toBe('12');
    expect(formatResult(value, { query: 'labels', format: 'compact' })).toBe('{"gpu":"h100"}');
    expect(formatResult(value, { query: 'labels', format: 'json' })).toBe('{\n  "gpu": "h100"\n}');
    expect(formatResult(value, { query: 'ids', format: 'compact' })).toBe('["a"]');
    expect(formatResult(value, { query: 'labels', format: 'table' })).toBe('key  value\ngpu  h100');
  });

  it('refuses a malformed --query as a usage mistake', () => {
    expect(() => applyQuery({}, 'a..b')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => applyQuery({}, '')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('terminal safety', () => {
  it('a string result turns control characters into spaces and keeps line breaks and tabs', () => {
    expect(formatResult(hostile)).toBe('a [31mred b c 2Jd\ne');
    expect(formatResult('line 1\n\tline 2')).toBe('line 1\n\tline 2');
  });

  it('a --query that selects a string prints it the same way', () => {
    expect(formatResult({ reason: hostile }, { query: 'reason' })).toBe('a [31mred b c 2Jd\ne');
  });

  it('a table cell is one line without any control character', () => {
    const table = formatResult(
      { items: [{ name: hostile, note: 'two\nlines\ttab' }], nextCursor: `x${ESC}y` },
      { format: 'table' },
    )!;
    const cell = 'a [31mred b c 2Jd e';
    expect(table).toBe(
      [`${'name'.padEnd(cell.length)}  note`, `${cell}  two lines tab`, '(more rows: --cursor x y)'].join(
        '\n',
      ),
    );
    expect(table).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/);
    expect(renderTable([{ [`k${ESC}`]: `v${CSI}` }])).toBe('k\nv');
  });

  it('JSON escapes DEL, the C1 controls and U+2028 as well as the C0 controls', () => {
    const json = formatResult({ name: hostile })!;
    expect(json).toBe('{\n  "name": "a\\u001b[31mred\\u0007b\\u007fc\\u009b2Jd\\u2028e"\n}');
    expect(json).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/);
    expect(formatResult({ name: hostile }, { format: 'compact' })).toBe(
      '{"name":"a\\u001b[31mred\\u0007b\\u007fc\\u009b2Jd\\u2028e"}',
    );
  });
});

describe('the failure printer and exit statuses', () => {
  const print = (error: unknown, env: Record<string, string> = {}) => {
    const lines: string[] = [];
    printFailure(error, { out: () => undefined, err: (line) => lines.push(line), env });
    return lines;
  };

  it('prints CODE: message and a hint line', () => {
    expect(print(new ComputeError('MISSING_ENV', 'system.whoami needs a credential'))).toEqual([
      'MISSING_ENV: system.whoami needs a credential',
      'hint: Set BETTER_COMPUTE_TOKEN, or run "better-compute auth login" to save a credential.',
    ]);
  });

  it('gives TENANT_SUSPENDED the guide’s hint', () => {
    expect(print(new ComputeError('TENANT_SUSPENDED', 'tenant acme is suspended'))[1]).toBe(
      'hint: The tenant is suspended or deleted in IAM; an administrator of a parent tenant can reactivate it.',
    );
  });

  it.each(Object.keys(ERROR_STATUS))('%s has a default hint that says what to do next', (code) => {
    const hint = hintFor(new ComputeError(code, 'x'));
    expect(hint).not.toMatch(/^Run again with BETTER_COMPUTE_DEBUG=1 for details/);
    expect(hint).not.toMatch(/^The message says what failed/);
    expect(hint.length).toBeGreaterThan(20);
  });

  it.each([
    ['ALREADY_EXISTS', 'Choose another name, or list what exists; nothing was changed.'],
    [
      'CONFLICT',
      'Read it again with its get command, then retry; a --key used before needs its first request exactly, or a new key.',
    ],
    ['INVALID_STATE', "Check the resource's state with its get command; the message says what it must be."],
    [
      'QUOTA_EXCEEDED',
      'Release something you hold (reservations list shows it), or ask the pool\'s owner for a larger quota ("quotas get --pool POOL" shows yours).',
    ],
  ])('the default hint of %s fits every place the code comes from', (code, hint) => {
    expect(print(new ComputeError(code, 'x'))).toEqual([`${code}: x`, `hint: ${hint}`]);
  });

  it('a code outside the table still gets a hint that names the command', () => {
    expect(hintFor(new ComputeError('SOMETHING_NEW', 'x'), 'sites create')).toBe(
      'The message says what failed; run "better-compute help sites create" for the command\'s flags and examples.',
    );
  });

  it('keeps the error’s own hint, and makes the message terminal-safe and one line', () => {
    expect(
      print(new ComputeError('NOT_FOUND', `no pool ${hostile}`, { hint: 'Run better-compute pools list.' })),
    ).toEqual(['NOT_FOUND: no pool a [31mred b c 2Jd e', 'hint: Run better-compute pools list.']);
  });

  it('prints the stack under BETTER_COMPUTE_DEBUG=1 only', () => {
    expect(print(new ComputeError('INTERNAL', 'boom'))).toHaveLength(2);
    const debug = print(new ComputeError('INTERNAL', 'boom', { cause: new Error('root cause') }), {
      BETTER_COMPUTE_DEBUG: '1',
    });
    expect(debug.join('\n')).toMatch(/ComputeError: boom\n\s+at /);
    expect(debug.join('\n')).toMatch(/caused by: Error: root cause/);
  });

  it('keeps the message of an unexpected throw, as INTERNAL', () => {
    expect(print(new Error('EACCES: permission denied'))[0]).toBe('INTERNAL: EACCES: permission denied');
  });

  it.each([
    [new CliError('INVALID_ARGUMENT', 'x'), 2],
    [new CliError('INVALID_COMMAND', 'x'), 2],
    [new ComputeError('INVALID_ARGUMENT', 'from the server'), 2],
    [new ComputeError('ACCESS_DENIED', 'x'), 1],
    [new ComputeError('DOCTOR_FINDINGS', 'x'), 1],
    [new Error('x'), 1],
    [new RemoteExitError(42), 42],
    [new RemoteExitError(0), 255],
  ])('%s exits %i', (error, status) => {
    expect(exitStatusOf(error)).toBe(status);
  });
});

describe('durations print as the guide writes them (issue 31: 4h, not 14400s)', () => {
  it.each([
    [14_400, '4h'],
    [5_400, '1h30m'],
    [30, '30s'],
    [86_400, '1d'],
    [90_061, '1d1h1m1s'],
    [604_800, '7d'],
  ])('%i seconds print as %s, and read back as the same seconds', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
    expect(parseDuration(text)).toBe(seconds);
  });

  it('a template’s maximum lifetime prints in the table as a duration', () => {
    const row = templateColumns({
      id: 'sbxt_1',
      name: 'shell',
      runtime: 'bwrap',
      poolId: 'pool_1',
      network: 'egress',
      warm: { min: 1, max: 2, ready: 1, starting: 0 },
      maxTtlSeconds: 14_400,
    });
    expect(row['max ttl']).toBe('4h');
    expect(formatResult([row], { format: 'table' })!.split('\n')[1]).toMatch(/\s4h$/);
  });
});
