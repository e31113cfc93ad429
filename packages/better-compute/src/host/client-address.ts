/**
 * The client's address of a request that reached this server: the socket's peer, unless the peer
 * is a proxy the configuration trusts (`rateLimit.trustedProxies`); then X-Forwarded-For is read
 * from the right, hop by hop, while each hop is trusted too, and the first that is not is the
 * client. From any other peer the header is ignored: whoever connects writes it
 * (docs/rate-limits.md).
 */
import { BlockList, isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { ComputeError } from '@better-compute/core';

/** The client's address of a request, or null when the socket has none (it is already gone). */
export type ClientAddressOf = (request: IncomingMessage) => string | null;

/** Hops of X-Forwarded-For looked at, at most: a longer chain of trusted proxies is no real one. */
const MAX_HOPS = 32;

/**
 * An address as a socket or a proxy writes it, bare: `[2001:db8::1]:443` and `1.2.3.4:80` lose
 * their port, `::ffff:1.2.3.4` is the IPv4 address it carries; null when it is no address.
 */
export function bareAddress(text: string): string | null {
  let value = text.trim();
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(value);
  if (bracketed) value = bracketed[1]!;
  else if (/^\d{1,3}(?:\.\d{1,3}){3}:\d{1,5}$/.test(value)) value = value.slice(0, value.lastIndexOf(':'));
  const zone = value.indexOf('%');
  if (zone !== -1) value = value.slice(0, zone);
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(value);
  if (mapped) value = mapped[1]!;
  return isIP(value) ? value.toLowerCase() : null;
}

function family(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 4 ? 'ipv4' : 'ipv6';
}

/** The trusted proxies as a BlockList; INVALID_CONFIG names an entry that is no address or range. */
function trustedList(trustedProxies: readonly string[]): BlockList {
  const list = new BlockList();
  for (const [index, entry] of trustedProxies.entries()) {
    const invalid = () =>
      new ComputeError(
        'INVALID_CONFIG',
        `rateLimit.trustedProxies[${index}] is not an IP address or CIDR range: ${JSON.stringify(String(entry).slice(0, 60))}`,
        { hint: "Name your proxies' addresses or ranges, such as '10.0.0.0/8', 'fd00::/8' or '127.0.0.1'." },
      );
    if (typeof entry !== 'string') throw invalid();
    const [base, bits, ...rest] = entry.split('/');
    const address = bareAddress(base ?? '');
    if (!address || rest.length) throw invalid();
    if (bits === undefined) {
      list.addAddress(address, family(address));
      continue;
    }
    const prefix = Number(bits);
    const max = family(address) === 'ipv4' ? 32 : 128;
    if (!/^\d{1,3}$/.test(bits) || prefix > max) throw invalid();
    list.addSubnet(address, prefix, family(address));
  }
  return list;
}

/** The rule for a deployment's trusted proxies; throws INVALID_CONFIG for an entry it cannot read. */
export function clientAddressResolver(trustedProxies: readonly string[] = []): ClientAddressOf {
  const trusted = trustedList(trustedProxies);
  const isTrusted = (address: string) => trustedProxies.length > 0 && trusted.check(address, family(address));
  return (request) => {
    const peer = bareAddress(request.socket.remoteAddress ?? '');
    if (!peer || !isTrusted(peer)) return peer;
    const header = request.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',');
    let client = peer;
    for (let i = hops.length - 1; i >= 0 && i >= hops.length - MAX_HOPS; i--) {
      const hop = bareAddress(hops[i]!);
      // What a trusted proxy wrote that is no address: the proxy is the nearest client known.
      if (!hop) return client;
      client = hop;
      if (!isTrusted(hop)) return hop;
    }
    return client;
  };
}

/** The resolver of a deployment's configuration (`rateLimit.trustedProxies`). */
export function configuredClientAddress(config: {
  rateLimit?: false | { trustedProxies?: readonly string[] | undefined } | undefined;
}): ClientAddressOf {
  const proxies = config.rateLimit ? (config.rateLimit.trustedProxies ?? []) : [];
  if (!Array.isArray(proxies))
    throw new ComputeError(
      'INVALID_CONFIG',
      'rateLimit.trustedProxies must be a list of addresses or ranges',
      {
        hint: "For example rateLimit: { trustedProxies: ['10.0.0.0/8'] }.",
      },
    );
  return clientAddressResolver(proxies);
}
