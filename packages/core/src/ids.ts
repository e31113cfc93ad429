/**
 * Resource ids: a kind prefix and a lowercase ULID (`node_01k5w…`). The ULID's first ten characters
 * are the creation time, so ids sort by age; the clock and randomness are injectable so the
 * simulator stays deterministic.
 */
import { ComputeError } from './errors.js';

/** Every id kind and its prefix. */
export const ID_PREFIXES = {
  node: 'node',
  reservation: 'rsv',
  pool: 'pool',
  site: 'site',
  instance: 'inst',
  sandbox: 'sbx',
  sandboxTemplate: 'sbxt',
  snapshot: 'snap',
  volume: 'vol',
  joinRequest: 'jreq',
  joinToken: 'jtok',
  siteToken: 'stok',
  providerAccount: 'pacct',
  providerBootstrap: 'pboot',
  workflow: 'wf',
  command: 'cmd',
  rollout: 'rollout',
  batch: 'batch',
  audit: 'aud',
  image: 'img',
  secret: 'sec',
  profile: 'prof',
  project: 'proj',
  event: 'evt',
  job: 'job',
  webhook: 'wh',
  webhookDelivery: 'msg',
  flavor: 'flv',
  release: 'rel',
  quota: 'quota',
  offer: 'offer',
  principal: 'prn',
  person: 'usr',
  serviceAccount: 'sa',
  agent: 'agt',
  session: 'ses',
  apiKey: 'key',
  role: 'role',
  binding: 'bnd',
  group: 'grp',
  request: 'req',
  sshCert: 'sshc',
  tunnel: 'tun',
  delegation: 'dlg',
  confirmation: 'cfm',
  fleetApply: 'fapl',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const ULID_PATTERN = '[0-7][0-9a-hjkmnp-tv-z]{25}';
const patterns = new Map<IdKind, RegExp>();

export interface IdSource {
  now(): number;
  randomBytes(size: number): Uint8Array;
}

// Random bytes are drawn 4 KiB at a time and handed out in slices: one call into the platform's
// generator per 256 ids instead of one per id, which showed in profiles of the busiest paths.
const RANDOM_POOL_BYTES = 4096;
let randomPool = new Uint8Array(0);
let randomOffset = 0;

const defaultSource: IdSource = {
  now: () => Date.now(),
  randomBytes: (size) => {
    if (size > RANDOM_POOL_BYTES) return crypto.getRandomValues(new Uint8Array(size));
    if (randomOffset + size > randomPool.length) {
      randomPool = crypto.getRandomValues(new Uint8Array(RANDOM_POOL_BYTES));
      randomOffset = 0;
    }
    randomOffset += size;
    return randomPool.subarray(randomOffset - size, randomOffset);
  },
};

/** A lowercase ULID: 10 characters of milliseconds, 16 of randomness. */
export function ulid(source: IdSource = defaultSource): string {
  let time = source.now();
  let head = '';
  for (let i = 0; i < 10; i++) {
    head = CROCKFORD[time % 32] + head;
    time = Math.floor(time / 32);
  }
  const random = source.randomBytes(16);
  let tail = '';
  for (let i = 0; i < 16; i++) tail += CROCKFORD[random[i]! % 32];
  return head + tail;
}

/** A new id of the given kind. */
export function newId(kind: IdKind, source?: IdSource): string {
  return `${ID_PREFIXES[kind]}_${ulid(source)}`;
}

function patternOf(kind: IdKind): RegExp {
  let pattern = patterns.get(kind);
  if (!pattern) {
    pattern = new RegExp(`^${ID_PREFIXES[kind]}_${ULID_PATTERN}$`);
    patterns.set(kind, pattern);
  }
  return pattern;
}

/** Whether `value` looks like an id of `kind`. */
export function isId(kind: IdKind, value: unknown): value is string {
  return typeof value === 'string' && patternOf(kind).test(value);
}

// Kinds whose words are not just their camelCase split: `apiKey` reads "API key".
const KIND_WORDS: Partial<Record<IdKind, string>> = { apiKey: 'API key' };

/**
 * An id kind as people read it in a message or in help, with its article: `node` → "a node id",
 * `joinToken` → "a join token id", `instance` → "an instance id". Messages name the kind this
 * way, never as the camelCase key of code.
 */
export function idKindPhrase(kind: IdKind): string {
  const words = KIND_WORDS[kind] ?? kind.replace(/[A-Z]/g, (char) => ` ${char.toLowerCase()}`);
  return `${/^[aeiou]/i.test(words) ? 'an' : 'a'} ${words} id`;
}

/** What an id of the wrong shape is told: `joinToken must be a join token id like jtok_01…`. */
export function idShapeMessage(field: string, kind: IdKind): string {
  return `${field} must be ${idKindPhrase(kind)} like ${ID_PREFIXES[kind]}_01…`;
}

/** Throws INVALID_ARGUMENT unless `value` looks like an id of `kind`. */
export function assertId(kind: IdKind, value: unknown, field: string = `${kind}Id`): string {
  if (isId(kind, value)) return value;
  throw new ComputeError('INVALID_ARGUMENT', idShapeMessage(field, kind), {
    details: { field, expected: `${ID_PREFIXES[kind]}_<ulid>` },
  });
}

/** Tenant ids are slugs: lowercase letters, digits and dashes, starting with a letter. */
export const TENANT_ID_PATTERN = /^[a-z][a-z0-9-]{0,62}$/;

export function isTenantId(value: unknown): value is string {
  return typeof value === 'string' && TENANT_ID_PATTERN.test(value);
}
