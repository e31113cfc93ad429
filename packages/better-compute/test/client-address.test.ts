/**
 * The client's address of a request (rateLimit.trustedProxies): the socket's peer unless it is a
 * trusted proxy; then X-Forwarded-For from the right while each hop is trusted, and the first that
 * is not is the client. What the client writes further left is never read.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { bareAddress, clientAddressResolver } from '../src/host/client-address.js';

function request(peer: string | undefined, forwardedFor?: string | string[]): IncomingMessage {
  return {
    socket: { remoteAddress: peer },
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  } as unknown as IncomingMessage;
}

describe('the client address', () => {
  it('is the peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    const of = clientAddressResolver([]);
    expect(of(request('203.0.113.7', '198.51.100.1'))).toBe('203.0.113.7');
    expect(of(request('::ffff:203.0.113.7'))).toBe('203.0.113.7');
    expect(of(request(undefined, '198.51.100.1'))).toBeNull();
  });

  it('is the peer when the peer is not a trusted proxy', () => {
    const of = clientAddressResolver(['10.0.0.0/8']);
    expect(of(request('203.0.113.7', '198.51.100.1'))).toBe('203.0.113.7');
  });

  it('is the rightmost hop no trusted proxy wrote, through a chain of them', () => {
    const of = clientAddressResolver(['10.0.0.0/8', 'fd00::/8', '192.0.2.1']);
    expect(of(request('10.0.0.5', '203.0.113.7'))).toBe('203.0.113.7');
    // The client wrote 198.51.100.1 itself; the proxies appended its real address, then their own.
    expect(of(request('10.0.0.5', '198.51.100.1, 203.0.113.7, 192.0.2.1, 10.1.1.1'))).toBe('203.0.113.7');
    expect(of(request('10.0.0.5', ['198.51.100.1', '203.0.113.7']))).toBe('203.0.113.7');
    expect(of(request('fd00::1', '[2001:db8::7]:443'))).toBe('2001:db8::7');
    expect(of(request('10.0.0.5', '203.0.113.7:51234'))).toBe('203.0.113.7');
    // Every hop trusted: the leftmost is the client (a proxy of ours called).
    expect(of(request('10.0.0.5', '10.2.2.2, 10.1.1.1'))).toBe('10.2.2.2');
    // No header: the proxy itself.
    expect(of(request('10.0.0.5'))).toBe('10.0.0.5');
  });

  it('stops at a hop that is no address: the nearest trusted proxy is the client known', () => {
    const of = clientAddressResolver(['10.0.0.0/8']);
    expect(of(request('10.0.0.5', '203.0.113.7, garbage'))).toBe('10.0.0.5');
    expect(of(request('10.0.0.5', '203.0.113.7, garbage, 10.1.1.1'))).toBe('10.1.1.1');
    expect(of(request('10.0.0.5', '\u0000, 1.2.3.4.5'))).toBe('10.0.0.5');
  });

  it('reads bare addresses from the spellings sockets and proxies use', () => {
    expect(bareAddress(' 203.0.113.7 ')).toBe('203.0.113.7');
    expect(bareAddress('[2001:DB8::1]:8080')).toBe('2001:db8::1');
    expect(bareAddress('fe80::1%eth0')).toBe('fe80::1');
    expect(bareAddress('::ffff:10.0.0.1')).toBe('10.0.0.1');
    for (const bad of ['', 'unknown', '999.1.1.1', '1.2.3.4:99999999', '[::1', 'x'.repeat(5000)])
      expect(bareAddress(bad)).toBeNull();
  });

  it('refuses a trusted proxy that is no address or range', () => {
    for (const entry of [
      '10.0.0.0/33',
      '10.0.0.0/',
      'example.com',
      '10.0.0.0/8/8',
      'fd00::/129',
      '10.0.0.0/-1',
    ])
      expect(() => clientAddressResolver([entry]), entry).toThrow(/not an IP address or CIDR range/);
  });
});
