/**
 * Where the server may send a request it makes on a tenant's behalf (a webhook delivery, an image a
 * node downloads): the one check of an outbound host, for every URL a tenant gives and every
 * address a name resolves to. It lives in the core, with no Node built-in, so the server's modules
 * and the node daemon can all ask the same question.
 *
 * An address is judged by the IPv4 address it carries, whatever the spelling: the WHATWG/inet_aton
 * IPv4 forms (decimal, octal, hex, fewer than four parts), IPv4-mapped, IPv4-compatible and SIIT
 * IPv6, NAT64 (well-known and local-use prefixes, every RFC 6052 position), 6to4 and Teredo (client
 * and server). A name is lower-cased and loses its trailing dots before the name rules apply, so
 * `LOCALHOST.` is `localhost`. Ranges are those of the IANA special-purpose registries (RFC 6890).
 */

/** What an address is: public, or the kind of internal address it is (or carries). */
export type AddressKind =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cgnat'
  | 'multicast'
  | 'broadcast'
  | 'unspecified'
  | 'reserved'
  | 'metadata';

/** What an outbound host is. `name`: a DNS name, to be checked again once resolved. */
export type HostKind = AddressKind | 'name';

export interface OutboundHost {
  /** The host as matched: lower-case, without brackets, zone id or trailing dots. */
  host: string;
  kind: HostKind;
  /** An address's family (`host` is then a dotted quad, or IPv6 text as given); null for a name. */
  family: 4 | 6 | null;
  /** For an IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4, Teredo…): that address. */
  carries: string | null;
}

/** How a refusal names each kind: "… points at a private address". */
export const ADDRESS_KIND_WORDS: Record<Exclude<AddressKind, 'public'>, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  'link-local': 'a link-local address',
  cgnat: 'a carrier-grade NAT address',
  multicast: 'a multicast address',
  broadcast: 'a broadcast address',
  unspecified: 'an unspecified address',
  reserved: 'a reserved or documentation address',
  metadata: 'a cloud metadata address',
};

/** A host as a refusal names it: `10.0.0.1`, or `64:ff9b:1::a00:1 (carrying 10.0.0.1)`. */
export function hostInWords(host: OutboundHost): string {
  return host.carries ? `${host.host} (carrying ${host.carries})` : host.host;
}

type Bytes = readonly number[];

/** One number of an IPv4 spelling: decimal, `0x` hex or `0`-led octal, as inet_aton and WHATWG read it. */
function ipv4Number(part: string): number | null {
  let digits = part;
  let radix = 10;
  if (/^0x/i.test(part)) {
    digits = part.slice(2);
    radix = 16;
    if (digits === '') return 0;
  } else if (part.length > 1 && part.startsWith('0')) {
    digits = part.slice(1);
    radix = 8;
  }
  const valid = radix === 16 ? /^[0-9a-f]+$/i : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!valid.test(digits)) return null;
  const value = parseInt(digits, radix);
  return value <= 0xffffffff ? value : null;
}

/** The four bytes of an IPv4 spelling (`127.0.0.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`), or null. */
function ipv4Bytes(text: string): Bytes | null {
  const parts = text.split('.');
  if (parts.length > 4 || parts.some((part) => part === '')) return null;
  const numbers = parts.map(ipv4Number);
  if (numbers.some((n) => n === null)) return null;
  const values = numbers as number[];
  const last = values.pop()!;
  if (values.some((n) => n > 255) || last >= 256 ** (4 - values.length)) return null;
  const bytes = [...values];
  for (let shift = 3 - values.length; shift >= 0; shift -= 1)
    bytes.push(Math.floor(last / 256 ** shift) % 256);
  return bytes;
}

/** The 16 bytes of IPv6 text (`::` and a dotted-quad tail included, no brackets or zone), or null. */
function ipv6Bytes(text: string): Bytes | null {
  let body = text;
  const tail: number[] = [];
  const quad = /(?:^|:)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(body);
  if (quad) {
    const parts = quad[1]!.split('.');
    if (parts.some((p) => (p.length > 1 && p.startsWith('0')) || Number(p) > 255)) return null;
    tail.push(...parts.map(Number));
    body = body.slice(0, body.length - quad[1]!.length);
    // `::1.2.3.4` leaves `::`, `::ffff:1.2.3.4` leaves `::ffff:`: drop the colon before the quad.
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1);
  }
  const halves = body.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (half: string) => (half === '' ? [] : half.split(':'));
  const head = groupsOf(halves[0]!);
  const rest = halves.length === 2 ? groupsOf(halves[1]!) : [];
  const wanted = 8 - tail.length / 2;
  const missing = wanted - head.length - rest.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...rest];
  const bytes: number[] = [];
  for (const group of groups) {
    if (!/^[0-9a-f]{1,4}$/i.test(group)) return null;
    const value = parseInt(group, 16);
    bytes.push(value >> 8, value & 0xff);
  }
  return [...bytes, ...tail];
}

function parseRange(text: string, bits: number): { bytes: Bytes; bits: number } {
  const bytes = text.includes(':') ? ipv6Bytes(text) : ipv4Bytes(text);
  if (!bytes) throw new Error(`bad range ${text}`);
  return { bytes, bits };
}

function inRange(bytes: Bytes, range: { bytes: Bytes; bits: number }): boolean {
  if (bytes.length !== range.bytes.length) return false;
  for (let bit = 0; bit < range.bits; bit += 8) {
    const take = Math.min(8, range.bits - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((bytes[bit / 8]! & mask) !== (range.bytes[bit / 8]! & mask)) return false;
  }
  return true;
}

/** Ranges checked in order: the first an address is in names its kind. */
function ranges(list: [Exclude<AddressKind, 'public'>, string, number][]) {
  return list.map(([kind, text, bits]) => ({ kind, ...parseRange(text, bits) }));
}

const IPV4_RANGES = ranges([
  ['metadata', '169.254.169.254', 32], // AWS, GCP, Azure, OpenStack instance metadata
  ['metadata', '100.100.100.200', 32], // Alibaba Cloud metadata
  ['metadata', '192.0.0.192', 32], // Oracle Cloud's former metadata address
  ['metadata', '168.63.129.16', 32], // Azure's host endpoint (WireServer), reachable only from inside Azure
  ['broadcast', '255.255.255.255', 32], // RFC 919, RFC 8190 limited broadcast
  ['unspecified', '0.0.0.0', 8], // RFC 1122 "this network"
  ['loopback', '127.0.0.0', 8], // RFC 1122
  ['private', '10.0.0.0', 8], // RFC 1918
  ['private', '172.16.0.0', 12], // RFC 1918
  ['private', '192.168.0.0', 16], // RFC 1918
  ['cgnat', '100.64.0.0', 10], // RFC 6598
  ['link-local', '169.254.0.0', 16], // RFC 3927
  ['multicast', '224.0.0.0', 4], // RFC 5771
  ['reserved', '192.0.0.0', 24], // RFC 6890 IETF protocol assignments
  ['reserved', '192.0.2.0', 24], // RFC 5737 TEST-NET-1
  ['reserved', '198.51.100.0', 24], // RFC 5737 TEST-NET-2
  ['reserved', '203.0.113.0', 24], // RFC 5737 TEST-NET-3
  ['reserved', '192.88.99.0', 24], // RFC 7526 former 6to4 relay anycast
  ['reserved', '198.18.0.0', 15], // RFC 2544 benchmarking
  ['reserved', '240.0.0.0', 4], // RFC 1112 class E
]);

const IPV6_RANGES = ranges([
  ['metadata', 'fd00:ec2::254', 128], // AWS instance metadata over IPv6
  ['unspecified', '::', 128], // RFC 4291 2.5.2
  ['loopback', '::1', 128], // RFC 4291 2.5.3
  ['private', 'fc00::', 7], // RFC 4193 unique local
  ['private', 'fec0::', 10], // RFC 3879 site-local (deprecated; still routed inside sites)
  ['link-local', 'fe80::', 10], // RFC 4291 2.5.6
  ['multicast', 'ff00::', 8], // RFC 4291 2.7
  ['reserved', '100::', 64], // RFC 6666 discard-only
  ['reserved', '2001::', 23], // RFC 2928 IETF protocol assignments (benchmarking 2001:2::/48, ORCHID…)
  ['reserved', '2001:db8::', 32], // RFC 3849 documentation
  ['reserved', '3fff::', 20], // RFC 9637 documentation
  ['reserved', '5f00::', 16], // RFC 9602 SRv6 SIDs
]);

const GLOBAL_UNICAST = parseRange('2000::', 3); // RFC 4291 2.4: all else is reserved by the IETF

function ipv4Kind(bytes: Bytes): AddressKind {
  return IPV4_RANGES.find((range) => inRange(bytes, range))?.kind ?? 'public';
}

const prefix = (text: string, bits: number) => {
  const range = parseRange(text, bits);
  return (bytes: Bytes) => inRange(bytes, range);
};
const isMapped = prefix('::ffff:0:0', 96); // RFC 4291 2.5.5.2
const isTranslated = prefix('::ffff:0:0:0', 96); // RFC 2765 2.1 (SIIT), RFC 7915
const isCompatible = prefix('::', 96); // RFC 4291 2.5.5.1 (deprecated)
const isNat64 = prefix('64:ff9b::', 96); // RFC 6052 2.1 well-known prefix
const isLocalNat64 = prefix('64:ff9b:1::', 48); // RFC 8215 local-use prefix
const is6to4 = prefix('2002::', 16); // RFC 3056 2
const isTeredo = prefix('2001::', 32); // RFC 4380 4

/** Where RFC 6052 2.2 puts the IPv4 address for each prefix length (byte 8, bits 64–71, stays 0). */
const RFC6052_POSITIONS = [
  [12, 13, 14, 15], // /96
  [9, 10, 11, 12], // /64
  [7, 9, 10, 11], // /56
  [6, 7, 9, 10], // /48
];

const pick = (bytes: Bytes, at: number[]) => at.map((i) => bytes[i]!);
const dotted = (bytes: Bytes) => bytes.join('.');

/**
 * The IPv4 addresses an IPv6 address carries, and what the IPv6 address is when all of them are
 * public: routed to that address (mapped, NAT64's well-known prefix, 6to4) or not routed at all.
 */
function carried(bytes: Bytes): { v4: Bytes[]; ifPublic: AddressKind } | null {
  const last = pick(bytes, [12, 13, 14, 15]);
  if (isMapped(bytes)) return { v4: [last], ifPublic: 'public' };
  if (isTranslated(bytes)) return { v4: [last], ifPublic: 'reserved' };
  // `::` and `::1` are addresses of their own, not IPv4-compatible forms of 0.0.0.0 and 0.0.0.1.
  if (isCompatible(bytes) && last.slice(0, 3).some((b) => b !== 0))
    return { v4: [last], ifPublic: 'reserved' };
  if (isNat64(bytes)) return { v4: [last], ifPublic: 'public' };
  // A local-use prefix may be any length from /48 to /96 (RFC 8215 §4): every position is judged.
  if (isLocalNat64(bytes))
    return { v4: RFC6052_POSITIONS.map((at) => pick(bytes, at)), ifPublic: 'reserved' };
  if (is6to4(bytes)) return { v4: [pick(bytes, [2, 3, 4, 5])], ifPublic: 'public' };
  if (isTeredo(bytes))
    // The client's address is the last 32 bits inverted; the Teredo server's is bits 32–63.
    return { v4: [last.map((b) => b ^ 0xff), pick(bytes, [4, 5, 6, 7])], ifPublic: 'reserved' };
  return null;
}

function ipv6Kind(bytes: Bytes): { kind: AddressKind; carries: string | null } {
  const exact = IPV6_RANGES.find((range) => range.bits === 128 && inRange(bytes, range));
  if (exact) return { kind: exact.kind, carries: null };
  const inner = carried(bytes);
  if (inner) {
    const judged = inner.v4.map((v4) => ({ kind: ipv4Kind(v4), carries: dotted(v4) }));
    // Of several readings (a local-use NAT64 prefix), the zero bytes of the others' places read
    // as 0.0.0.x: only a reading that names a host speaks for the address.
    const telling = judged.length > 1 ? judged.filter((j) => j.kind !== 'unspecified') : judged;
    return telling.find((j) => j.kind !== 'public') ?? { kind: inner.ifPublic, carries: judged[0]!.carries };
  }
  const range = IPV6_RANGES.find((r) => inRange(bytes, r));
  if (range) return { kind: range.kind, carries: null };
  return { kind: inRange(bytes, GLOBAL_UNICAST) ? 'public' : 'reserved', carries: null };
}

/** Names that mean an internal host wherever they are resolved. */
const NAME_RULES: { kind: Exclude<AddressKind, 'public'>; matches: (name: string) => boolean }[] = [
  // RFC 6761 6.3: localhost and every name under it are loopback.
  { kind: 'loopback', matches: (name) => name === 'localhost' || name.endsWith('.localhost') },
  // Google Cloud's metadata server by name.
  { kind: 'metadata', matches: (name) => name === 'metadata.google.internal' || name === 'metadata.goog' },
];

/**
 * What an outbound host is: a URL's `hostname` (brackets and all) or an address a name resolved
 * to. An IP address in any spelling is judged by every IPv4 address it carries; a name by the name
 * rules, else `name` (the caller resolves it and asks again for each address). A host that is
 * neither (a colon or `%` that makes no IPv6 address, nothing left after the dots) is `reserved`.
 */
export function classifyHost(input: string): OutboundHost {
  let host = input.trim().toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  const zone = host.indexOf('%');
  if (zone >= 0 || host.includes(':')) {
    const bare = zone >= 0 ? host.slice(0, zone) : host;
    const bytes = ipv6Bytes(bare);
    if (!bytes) return { host: bare, kind: 'reserved', family: null, carries: null };
    const { kind, carries } = ipv6Kind(bytes);
    // A zone id scopes an address to one link of this machine (RFC 4007, RFC 6874).
    return { host: bare, kind: zone >= 0 && kind === 'public' ? 'link-local' : kind, family: 6, carries };
  }
  host = host.replace(/\.+$/, '');
  if (host === '') return { host, kind: 'reserved', family: null, carries: null };
  const v4 = ipv4Bytes(host);
  if (v4) return { host: dotted(v4), kind: ipv4Kind(v4), family: 4, carries: null };
  const rule = NAME_RULES.find((r) => r.matches(host));
  return { host, kind: rule?.kind ?? 'name', family: null, carries: null };
}
