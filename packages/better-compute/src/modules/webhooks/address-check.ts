/**
 * Where a webhook may send (SSRF rules). An endpoint is `https://`, or `http://` to loopback only;
 * no credentials in the URL; and no address outside the public internet (private, link-local,
 * CGNAT, multicast, unspecified, reserved, cloud metadata) unless the deployment allows private
 * addresses (metadata, unspecified and multicast never). The URL is checked when it is set, and
 * again at every attempt after its name is resolved: the request then connects to the address
 * checked, so a name that resolves elsewhere later (DNS rebinding) gains nothing.
 */
import { ComputeError } from '@better-compute/core';
import { BlockList, isIP } from 'node:net';
import type { ResolvedAddress } from '../../config/define-config.js';
import type { WebhookRuntime } from './settings.js';

export type AddressKind =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cgnat'
  | 'multicast'
  | 'unspecified'
  | 'reserved'
  | 'metadata';

const KIND_WORDS: Record<Exclude<AddressKind, 'public'>, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  'link-local': 'a link-local address',
  cgnat: 'a carrier-grade NAT address',
  multicast: 'a multicast address',
  unspecified: 'an unspecified address',
  reserved: 'a reserved or documentation address',
  metadata: 'a cloud metadata address',
};

function blockList(v4: [string, number][], v6: [string, number][] = []): BlockList {
  const list = new BlockList();
  for (const [net, prefix] of v4) list.addSubnet(net, prefix, 'ipv4');
  for (const [net, prefix] of v6) list.addSubnet(net, prefix, 'ipv6');
  return list;
}

// Checked in this order: the first list an address is in names its kind.
const RANGES: [Exclude<AddressKind, 'public'>, BlockList][] = [
  [
    'metadata',
    blockList(
      [
        ['169.254.169.254', 32],
        ['100.100.100.200', 32],
      ],
      [['fd00:ec2::254', 128]],
    ),
  ],
  ['unspecified', blockList([['0.0.0.0', 8]], [['::', 128]])],
  ['loopback', blockList([['127.0.0.0', 8]], [['::1', 128]])],
  [
    'private',
    blockList(
      [
        ['10.0.0.0', 8],
        ['172.16.0.0', 12],
        ['192.168.0.0', 16],
      ],
      [['fc00::', 7]],
    ),
  ],
  ['cgnat', blockList([['100.64.0.0', 10]])],
  ['link-local', blockList([['169.254.0.0', 16]], [['fe80::', 10]])],
  ['multicast', blockList([['224.0.0.0', 4]], [['ff00::', 8]])],
  [
    'reserved',
    blockList(
      [
        ['192.0.0.0', 24],
        ['192.0.2.0', 24],
        ['192.88.99.0', 24],
        ['198.18.0.0', 15],
        ['198.51.100.0', 24],
        ['203.0.113.0', 24],
        ['240.0.0.0', 4],
      ],
      [
        ['::', 96],
        ['100::', 64],
        ['2001:db8::', 32],
        ['2001::', 23],
        ['fec0::', 10],
      ],
    ),
  ],
];

/** The 16 bytes of an IPv6 address (dotted-quad tail and `::` included). */
function ipv6Bytes(address: string): number[] | null {
  let text = address.replace(/^\[|\]$/g, '').split('%')[0]!;
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const parts = quad[1]!.split('.').map(Number);
    text = `${text.slice(0, -quad[1]!.length)}${((parts[0]! << 8) | parts[1]!).toString(16)}:${((parts[2]! << 8) | parts[3]!).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const missing = 8 - headGroups.length - tailGroups.length;
  if (text.includes('::') ? missing < 0 : missing !== 0) return null;
  const groups = [
    ...headGroups,
    ...Array<string>(text.includes('::') ? missing : 0).fill('0'),
    ...tailGroups,
  ];
  const bytes: number[] = [];
  for (const group of groups) {
    const value = parseInt(group, 16);
    if (!/^[0-9a-f]{1,4}$/i.test(group) || Number.isNaN(value)) return null;
    bytes.push(value >> 8, value & 0xff);
  }
  return bytes;
}

/** The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), if any. */
function embeddedIpv4(bytes: number[]): string | null {
  const isZero = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  const quad = (at: number) => bytes.slice(at, at + 4).join('.');
  if (isZero(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return quad(12); // ::ffff:a.b.c.d
  if (bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && isZero(4, 12))
    return quad(12); // 64:ff9b::/96
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return quad(2); // 2002::/16
  return null;
}

/** What kind of address an IP literal is. */
export function classifyAddress(address: string): AddressKind {
  const bare = address.replace(/^\[|\]$/g, '');
  const family = isIP(bare);
  if (family === 4) {
    for (const [kind, list] of RANGES) if (list.check(bare, 'ipv4')) return kind;
    return 'public';
  }
  if (family === 6) {
    const bytes = ipv6Bytes(bare);
    if (!bytes) return 'reserved';
    const v4 = embeddedIpv4(bytes);
    if (v4) return classifyAddress(v4);
    for (const [kind, list] of RANGES) if (list.check(bare, 'ipv6')) return kind;
    return 'public';
  }
  return 'reserved';
}

/** Whether the deployment lets a webhook reach an address of this kind. */
export function kindAllowed(
  kind: AddressKind,
  runtime: Pick<WebhookRuntime, 'allowLoopback' | 'allowPrivateAddresses'>,
): boolean {
  switch (kind) {
    case 'public':
      return true;
    case 'loopback':
      return runtime.allowLoopback;
    case 'private':
    case 'link-local':
    case 'cgnat':
    case 'reserved':
      return runtime.allowPrivateAddresses;
    case 'metadata':
    case 'multicast':
    case 'unspecified':
      return false;
  }
}

const isLoopbackName = (host: string) => host === 'localhost' || host.endsWith('.localhost');

function refused(message: string, hint: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', message, { hint, details: { field: 'url' } });
}

/**
 * Checks an endpoint URL as a caller gives it, before anything is stored; answers the URL in its
 * normal form. Names are resolved only at delivery time (deliveryAddress).
 */
export function checkEndpoint(
  text: string,
  runtime: Pick<WebhookRuntime, 'allowLoopback' | 'allowPrivateAddresses'>,
): string {
  const hint =
    'Give an https:// URL of a public receiver, like https://hooks.example.com/compute (http:// only to 127.0.0.1, [::1] or localhost).';
  if (/[\u0000-\u0020\u007f-\u009f]/.test(text))
    throw refused('url must not contain spaces or control characters', hint);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw refused('url must be an absolute URL, like https://hooks.example.com/compute', hint);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw refused(`url must be https:// (or http:// to loopback), not ${url.protocol}//`, hint);
  if (url.username || url.password)
    throw refused(
      'url must not carry a user name or password (user:pass@); they would be sent and stored in the clear',
      'Verify deliveries by their webhook-signature header instead, or put a token in the path.',
    );
  if (url.hash) throw refused('url must not have a #fragment: it is never sent', hint);
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === '') throw refused('url must name a host', hint);
  const kind = isIP(host) ? classifyAddress(host) : isLoopbackName(host) ? 'loopback' : null;
  if (kind !== null && kind !== 'public' && !kindAllowed(kind, runtime))
    throw refused(
      `url points at ${KIND_WORDS[kind]} (${host}), which this deployment does not deliver to`,
      kind === 'metadata' || kind === 'multicast' || kind === 'unspecified'
        ? hint
        : `${hint} An operator can allow ${kind === 'loopback' ? 'loopback' : 'private'} addresses in the deployment's webhooks settings.`,
    );
  if (url.protocol === 'http:' && kind !== 'loopback')
    throw refused(`url must be https:// unless it points at loopback (got http:// to ${host})`, hint);
  return url.href;
}

/** Why an attempt was not sent: the endpoint's name resolved to an address it may not reach. */
export class AddressRefused extends Error {}

/**
 * The address an attempt connects to: the endpoint's host resolved now, every address it resolves
 * to checked (one refused address refuses them all, so a name cannot mix a public address with an
 * internal one), `http://` only to loopback.
 */
export async function deliveryAddress(url: URL, runtime: WebhookRuntime): Promise<ResolvedAddress> {
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  let addresses: ResolvedAddress[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) === 6 ? 6 : 4 }];
  else {
    try {
      addresses = await runtime.lookup(host);
    } catch (error) {
      throw new AddressRefused(
        `${host} does not resolve: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
  }
  if (addresses.length === 0) throw new AddressRefused(`${host} resolves to no address`);
  for (const { address } of addresses) {
    const kind = classifyAddress(address);
    if (!kindAllowed(kind, runtime))
      throw new AddressRefused(
        `${host} resolves to ${address}, ${KIND_WORDS[kind as Exclude<AddressKind, 'public'>]}, which this deployment does not deliver to`,
      );
    if (url.protocol === 'http:' && kind !== 'loopback')
      throw new AddressRefused(`http:// is delivered only to loopback, and ${host} resolves to ${address}`);
  }
  return addresses[0]!;
}
