// Hostile inputs for a method, derived from its input schema (as JSON Schema): shared by the fuzz
// test (a fixed seed, in `npm test`) and bench/fuzz.mjs (100,000 requests to a running server).
// Each input starts from a plausible object (ids of the right kind, the caller's tenant) so that it
// gets past the first checks, then breaks one to three fields, adds unknown ones, or replaces the
// whole body: controls, NUL, lone surrogates, bidirectional overrides, huge and negative numbers,
// deep nesting and long strings under the body limit.
import fc from 'fast-check';

const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfff',
  '\ud83d',
  '\u202eexe.txt',
  '\u2028',
  '\u001b[31m',
  '\u007f\u0085\u009b',
  '%',
  '%zz%00',
  '../../etc/passwd',
  '\\',
  '"',
  "'; drop table x; --",
  '🙂',
  '2147483648',
  '-1',
  '1e309',
  'null',
  '9999-12-31T23:59:59.999Z',
  '+275760-09-13T00:00:00.000Z',
  '0000-01-01T00:00:00Z',
  'P99999999D',
  '999999999999h',
  'a.b.c',
  'biam_key_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
];

const HOSTILE_NUMBERS = [
  0,
  -1,
  -0,
  0.5,
  1.5,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31) - 1,
  2 ** 53,
  2 ** 53 + 2,
  1e308,
  -1e308,
  5e-324,
];

/** A nested value `depth` levels deep: arrays or objects. */
function nested(depth, asObject) {
  let value = 'bottom';
  for (let i = 0; i < depth; i++) value = asObject ? { a: value } : [value];
  return value;
}

const hostileString = fc.oneof(
  fc.constantFrom(...HOSTILE_STRINGS),
  // Any UTF-16 code unit, lone surrogates and controls included.
  fc
    .array(fc.integer({ min: 0, max: 0xffff }), { minLength: 1, maxLength: 40 })
    .map((units) => String.fromCharCode(...units)),
  fc.string({ maxLength: 30 }).map((text) => `${text}\u0000${text}`),
  fc.integer({ min: 200, max: 20_000 }).map((length) => 'x'.repeat(length)),
);

const hostileValue = fc.oneof(
  { weight: 5, arbitrary: hostileString },
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_NUMBERS) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}) },
  { weight: 1, arbitrary: fc.integer({ min: 50, max: 400 }).map((depth) => nested(depth, depth % 2 === 0)) },
  { weight: 1, arbitrary: fc.array(hostileString, { maxLength: 30 }) },
  { weight: 1, arbitrary: fc.dictionary(hostileString, hostileString, { maxKeys: 8 }) },
  { weight: 1, arbitrary: fc.constant('y'.repeat(60_000)) },
);

/** A Crockford ULID-shaped tail, so an id passes its kind's check and reaches the store. */
const ulid = fc
  .array(fc.constantFrom(...'0123456789abcdefghjkmnpqrstvwxyz'), { minLength: 25, maxLength: 25 })
  .map((chars) => `01${chars.join('').slice(1)}`);

/**
 * A plausible value for a field: `options.idPrefix(field)` gives the prefix of an id field
 * (`nodeId` → `node`), `options.tenantId` fills `tenantId`; otherwise the JSON schema's type.
 */
function plausible(schema, field, options, depth = 0) {
  if (field === 'tenantId') return fc.constant(options.tenantId);
  const prefix = field ? options.idPrefix(field) : undefined;
  if (prefix) return ulid.map((tail) => `${prefix}_${tail}`);
  if (!schema || typeof schema !== 'object' || depth > 4) return hostileValue;
  if (Array.isArray(schema.enum) && schema.enum.length) return fc.constantFrom(...schema.enum);
  if (schema.const !== undefined) return fc.constant(schema.const);
  const variants = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(variants) && variants.length)
    return fc.oneof(...variants.map((variant) => plausible(variant, field, options, depth + 1)));
  switch (schema.type) {
    case 'string':
      return fc.oneof({ weight: 4, arbitrary: validString(schema) }, { weight: 1, arbitrary: hostileString });
    case 'integer':
    case 'number':
      return fc.oneof(
        fc.integer({
          min: Math.max(schema.minimum ?? -1000, -(2 ** 31)),
          max: Math.min(schema.maximum ?? 1000, 2 ** 31 - 1),
        }),
        fc.constantFrom(...HOSTILE_NUMBERS),
      );
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(plausible(schema.items, undefined, options, depth + 1), { maxLength: 4 });
    case 'object':
      return objectOf(schema, options, depth + 1);
    default:
      return hostileValue;
  }
}

/** A string the schema accepts, as far as its JSON form says: its pattern, format and length. */
function validString(schema) {
  const minLength = schema.minLength ?? 1;
  const maxLength = Math.max(minLength, Math.min(schema.maxLength ?? 24, 64));
  if (schema.format === 'date-time' || schema.format === 'datetime')
    return fc
      .date({
        min: new Date('2020-01-01T00:00:00Z'),
        max: new Date('2040-01-01T00:00:00Z'),
        noInvalidDate: true,
      })
      .map((date) => date.toISOString());
  if (schema.format === 'email') return fc.emailAddress();
  if (typeof schema.pattern === 'string') {
    try {
      return fc
        .stringMatching(new RegExp(schema.pattern))
        .filter((text) => text.length >= minLength && text.length <= (schema.maxLength ?? Infinity));
    } catch {
      // A pattern JavaScript cannot compile as written falls through to any text.
    }
  }
  return fc.string({ minLength, maxLength, unit: 'grapheme-ascii' });
}

function objectOf(schema, options, depth) {
  const properties = schema.properties ?? {};
  const record = {};
  for (const [key, value] of Object.entries(properties)) record[key] = plausible(value, key, options, depth);
  return fc.record(record, { requiredKeys: schema.required ?? [] });
}

/**
 * Hostile inputs for one method's input JSON schema. `options`: `{ tenantId, idPrefix(field) }`.
 */
export function hostileInputs(schema, options) {
  const keys = Object.keys(schema?.properties ?? {});
  const base = schema?.type === 'object' ? objectOf(schema, options, 0) : fc.constant({});
  const fieldNames = keys.length ? keys : ['x'];
  const broken = base.chain((input) =>
    fc
      .record({
        fields: fc.subarray(fieldNames, { minLength: 1, maxLength: Math.min(3, fieldNames.length) }),
        values: fc.array(hostileValue, { minLength: 3, maxLength: 3 }),
        extra: fc.option(fc.dictionary(hostileString, hostileValue, { maxKeys: 3 }), { nil: undefined }),
      })
      .map(({ fields, values, extra }) => {
        const copy = { ...input, ...extra };
        fields.forEach((field, i) => (copy[field] = values[i]));
        // The caller's tenant, kept or broken, is the only tenant a call names.
        if (copy.tenantId === undefined && keys.includes('tenantId')) copy.tenantId = options.tenantId;
        return copy;
      }),
  );
  return fc.oneof(
    { weight: 6, arbitrary: broken },
    { weight: 2, arbitrary: base },
    { weight: 1, arbitrary: hostileValue },
  );
}

/** Raw bodies that are not JSON objects at all. */
export const hostileBodies = fc.oneof(
  fc.constantFrom(
    '',
    '{',
    '[]',
    'null',
    '"\u0000"',
    '{"a":',
    '\uFEFF{}',
    '{"__proto__":{"x":1}}',
    '{}'.repeat(30_000),
  ),
  fc.string({ maxLength: 200 }),
);
