import { describe, expect, it } from 'vitest';
import {
  assertId,
  ComputeError,
  ERROR_STATUS,
  errorAnswer,
  idKindPhrase,
  formatDuration,
  formatListCursor,
  formatStreamCursor,
  hideSecrets,
  httpStatusOf,
  ID_PREFIXES,
  isId,
  newId,
  parseDuration,
  SECRET_SHOWN,
  parsePosition,
  comparePositions,
  safeCell,
  safeJson,
  safeText,
  toComputeError,
  ulid,
} from '../src/index.js';

describe('ids', () => {
  it.each(Object.entries(ID_PREFIXES))(
    'a new %s id has the prefix %s_ and a lowercase ULID',
    (kind, prefix) => {
      const id = newId(kind as keyof typeof ID_PREFIXES);
      expect(id).toMatch(new RegExp(`^${prefix}_[0-9a-z]{26}$`));
      expect(isId(kind as keyof typeof ID_PREFIXES, id)).toBe(true);
    },
  );

  it('checks the kind by its prefix', () => {
    const node = newId('node');
    expect(isId('node', node)).toBe(true);
    expect(isId('pool', node)).toBe(false);
    expect(isId('sandbox', newId('sandboxTemplate'))).toBe(false);
    expect(isId('node', 'node_01K5W0000000000000000000000')).toBe(false);
    expect(isId('node', 'node_01k5w')).toBe(false);
    expect(isId('node', 'node_01k5w00000000000000000000u')).toBe(false); // u is not Crockford
  });

  it.each([
    ['node', 'a node id'],
    ['joinToken', 'a join token id'],
    ['joinRequest', 'a join request id'],
    ['sandboxTemplate', 'a sandbox template id'],
    ['instance', 'an instance id'],
    ['apiKey', 'an API key id'],
  ] as const)('names the %s kind in words people read: %s', (kind, phrase) => {
    expect(idKindPhrase(kind)).toBe(phrase);
  });

  it('an id of the wrong shape is INVALID_ARGUMENT naming the kind in words', () => {
    expect(() => assertId('joinToken', 'jtok_bad')).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: 'joinTokenId must be a join token id like jtok_01…',
      }),
    );
    expect(() => assertId('joinRequest', 'x', 'joinRequest')).toThrow(
      'joinRequest must be a join request id like jreq_01…',
    );
  });

  it('sorts by creation time', () => {
    const source = (now: number) => ({ now: () => now, randomBytes: (n: number) => new Uint8Array(n) });
    expect(ulid(source(1000)) < ulid(source(2000))).toBe(true);
    expect(ulid(source(0))).toBe('00000000000000000000000000');
  });
});

describe('errors', () => {
  it('maps every code to one HTTP status', () => {
    expect(httpStatusOf('PAYLOAD_TOO_LARGE')).toBe(413);
    expect(httpStatusOf('UNAUTHENTICATED')).toBe(401);
    expect(httpStatusOf('RATE_LIMITED')).toBe(429);
    expect(httpStatusOf('SOMETHING_NEW')).toBe(500);
    for (const code of [
      'INVALID_ARGUMENT',
      'NOT_FOUND',
      'ALREADY_EXISTS',
      'CONFLICT',
      'INVALID_STATE',
      'ACCESS_DENIED',
      'CONFIRMATION_REQUIRED',
      'UNSUPPORTED',
      'INVALID_CONFIG',
      'TENANT_SUSPENDED',
      'MISSING_ENV',
      'CONFIG_NOT_FOUND',
      'INTERNAL',
    ]) {
      expect(ERROR_STATUS).toHaveProperty(code);
    }
  });

  it('serialises without its cause', () => {
    const error = new ComputeError('INTERNAL', 'internal error', { cause: new Error('password=hunter2') });
    expect(JSON.stringify(error)).toBe('{"code":"INTERNAL","message":"internal error"}');
  });

  it('the error envelope carries the hint, so a client can print the server’s advice', () => {
    const error = new ComputeError('CONFLICT', 'this idempotency key was used with a different input', {
      details: { idempotencyKey: 'k' },
      hint: 'Use a new --key for a different request, or repeat the first request exactly.',
    });
    const answer = errorAnswer(error, 'req_1');
    expect(answer.status).toBe(409);
    expect(JSON.parse(answer.body)).toEqual({
      error: {
        code: 'CONFLICT',
        message: 'this idempotency key was used with a different input',
        details: { idempotencyKey: 'k' },
        hint: 'Use a new --key for a different request, or repeat the first request exactly.',
        requestId: 'req_1',
      },
    });
    expect(JSON.parse(errorAnswer(new ComputeError('NOT_FOUND', 'no pool'), 'req_2').body)).toEqual({
      error: { code: 'NOT_FOUND', message: 'no pool', requestId: 'req_2' },
    });
  });

  it('an operator-only error keeps its code in an answer, never its message or details', () => {
    const outage = new ComputeError(
      'UNAVAILABLE',
      'the database postgres://compute:***@db.internal:5432/compute cannot be used: nothing listens there (ECONNREFUSED)',
      { details: { code: 'ECONNREFUSED' }, operatorOnly: true },
    );
    const answered = toComputeError(outage);
    expect(answered).not.toBe(outage);
    expect(answered.cause).toBe(outage);
    expect(JSON.parse(errorAnswer(answered, 'req_3').body)).toEqual({
      error: {
        code: 'UNAVAILABLE',
        message: 'the deployment cannot serve this call now (UNAVAILABLE)',
        hint: 'Try again shortly; the server log tells its operators why.',
        requestId: 'req_3',
      },
    });
    // Any other ComputeError is answered as it is; an unknown throw is INTERNAL.
    const plain = new ComputeError('NOT_FOUND', 'no pool');
    expect(toComputeError(plain)).toBe(plain);
    expect(toComputeError(new Error('db.internal refused')).message).toBe('internal error');
  });
});

describe('durations', () => {
  it.each([
    ['30m', 1800],
    ['4h', 14400],
    ['1d', 86400],
    ['1h30m', 5400],
    ['90s', 90],
    ['45', 45],
  ])('%s is %i seconds', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  it.each(['', '0', '0m', '1.5h', '4x', 'h', '-1h', '1m1h'])('%j is refused', (text) => {
    expect(() => parseDuration(text, '--for')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it('formats in the largest units', () => {
    expect(formatDuration(5400)).toBe('1h30m');
    expect(formatDuration(86400 + 1)).toBe('1d1s');
    expect(formatDuration(0)).toBe('0s');
  });
});

describe('outbox positions', () => {
  it('writes the two forms', () => {
    expect(formatListCursor({ tx: '184467', index: 12 })).toBe('184467:12');
    expect(formatStreamCursor({ tx: '184467', index: 12 })).toBe('184467.12');
  });

  it('events list takes only the colon form; a watch either', () => {
    expect(parsePosition('184467:12', 'list')).toEqual({ tx: '184467', index: 12 });
    expect(() => parsePosition('184467.12', 'list')).toThrow(/184467:12/);
    expect(parsePosition('184467.12', 'either')).toEqual({ tx: '184467', index: 12 });
    expect(() => parsePosition('abc', 'either')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it('orders beyond 2^53', () => {
    expect(
      comparePositions({ tx: '9007199254740993', index: 0 }, { tx: '9007199254740992', index: 5 }),
    ).toBeGreaterThan(0);
    expect(comparePositions({ tx: '7', index: 1 }, { tx: '7', index: 2 })).toBeLessThan(0);
  });
});

describe('terminal-safe text', () => {
  const hostile = 'a\u001b[31mred\u0007\tb\nc\u007fd\u009be\u2028f\r\n';
  it('strings keep line breaks and tabs, and lose every other control', () => {
    expect(safeText(hostile)).toBe('a [31mred \tb\nc d e\nf\n');
  });
  it('cells are one line without any control', () => {
    expect(safeCell(hostile)).toBe('a [31mred  b c d e f  ');
  });
  it('JSON escapes DEL, C1 and the Unicode separators that JSON leaves raw', () => {
    expect(safeJson(JSON.stringify(hostile))).toBe(
      '"a\\u001b[31mred\\u0007\\tb\\nc\\u007fd\\u009be\\u2028f\\r\\n"',
    );
  });
  it('the bidirectional overrides and isolates are neutralised in all three forms (issue 15)', () => {
    // "txt.exe" shown reversed as "exe.txt" by U+202E: a name must not read as other than it is.
    const bidi = 'file\u202eexe.txt \u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069end';
    expect(safeText(bidi)).toBe('file exe.txt         end');
    expect(safeCell(bidi)).toBe('file exe.txt         end');
    expect(safeJson(JSON.stringify(bidi))).toBe(
      '"file\\u202eexe.txt \\u202a\\u202b\\u202c\\u202d\\u2066\\u2067\\u2068\\u2069end"',
    );
  });
});

describe('ComputeError across copies', () => {
  it('an error from another copy of core is a ComputeError; a subclass still checks its own prototype', async () => {
    const brand = Symbol.for('better-compute.ComputeError');
    // What another bundled copy of the class produces: a different class with the same brand.
    class OtherCopy extends Error {
      readonly [brand] = true;
      readonly code = 'NOT_FOUND';
    }
    expect(new OtherCopy('x') instanceof ComputeError).toBe(true);
    expect(new Error('x') instanceof ComputeError).toBe(false);
    class UsageError extends ComputeError {}
    expect(new UsageError('INVALID_ARGUMENT', 'x') instanceof UsageError).toBe(true);
    expect(new ComputeError('INVALID_ARGUMENT', 'x') instanceof UsageError).toBe(false);
    expect(new UsageError('INVALID_ARGUMENT', 'x') instanceof ComputeError).toBe(true);
  });
});

describe('the method table', async () => {
  const { methodList } = await import('../src/methods/index.js');
  const { methodAction, methodKey } = await import('../src/contract.js');
  it('names every IAM action compute:<kebab-group>:<verb>, as IAM requires', () => {
    for (const method of methodList) {
      const action = methodAction(method);
      if (action) expect(action, methodKey(method)).toMatch(/^compute:[a-z0-9-]+:[a-z0-9-]+$/);
    }
  });
  it('declares each method once, under its own group and name', async () => {
    const { methods } = await import('../src/methods/index.js');
    for (const [key, method] of Object.entries(methods)) expect(methodKey(method)).toBe(key);
  });
});

describe('hideSecrets: a credential quoted in a message is described, never shown', () => {
  const secret = 'Zq3xW8vN2kLp5RtY7uB0cD4eF6gH9jKmA1sT-u_X';
  it('hides a join token’s secret and an API key, and keeps ids, hashes and UUIDs readable', () => {
    expect(hideSecrets(`cursor "jtok_01m8y835dq99ammqcng4whf1b6.${secret}" is not a position`)).toBe(
      `cursor "jtok_01m8y835dq99ammqcng4whf1b6.${SECRET_SHOWN}" is not a position`,
    );
    expect(hideSecrets(`got biam_key_Ro9uqeYNVXrP8XtYZQTdXZD55An4r685P_Amzc8zp88`)).toBe(
      `got ${SECRET_SHOWN}`,
    );
    const plain =
      'node node_01m8y835dq99ammqcng4whf1b6, key 3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f, root 9efd4829a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c';
    expect(hideSecrets(plain)).toBe(plain);
  });

  it('an error answer hides them in its message and hint', () => {
    const answer = errorAnswer(
      new ComputeError('INVALID_ARGUMENT', `selector "${secret}" does not parse`, { hint: `not ${secret}` }),
      'req_1',
    );
    expect(answer.body).not.toContain(secret);
    expect(JSON.parse(answer.body).error).toMatchObject({
      message: `selector "${SECRET_SHOWN}" does not parse`,
      hint: `not ${SECRET_SHOWN}`,
    });
  });

  it('and everywhere in its details: values, keys and nested arrays (issue 15)', () => {
    const answer = errorAnswer(
      new ComputeError('INVALID_ARGUMENT', 'the input is not valid', {
        details: {
          issues: [{ path: ['labels', secret], code: 'unstorable', message: `got ${secret}` }],
          [secret]: { got: secret, count: 3, ok: true, none: null },
        },
      }),
      'req_1',
    );
    expect(answer.body).not.toContain(secret);
    expect(JSON.parse(answer.body).error.details).toEqual({
      issues: [{ path: ['labels', SECRET_SHOWN], code: 'unstorable', message: `got ${SECRET_SHOWN}` }],
      [SECRET_SHOWN]: { got: SECRET_SHOWN, count: 3, ok: true, none: null },
    });
  });
});
