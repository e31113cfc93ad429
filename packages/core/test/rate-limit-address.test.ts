/**
 * The limiter's per-address buckets and stream caps on a clock the test moves: public calls spend
 * from the client address's bucket, refused credentials from its failure bucket (checked before a
 * call runs), an IPv6 client is counted by its /64, and open streams are capped per identity and
 * per tenant until one is released.
 */
import { describe, expect, it } from 'vitest';
import {
  clientAddressKey,
  ComputeError,
  DEFAULT_RATE_LIMIT,
  isRefusedCredential,
  RateLimiter,
  rateLimited,
  tooManyStreams,
} from '../src/index.js';

function limiter(options: Partial<ConstructorParameters<typeof RateLimiter>[0]> = {}) {
  const clock = { now: 1_000_000 };
  return { clock, limiter: new RateLimiter({ ...DEFAULT_RATE_LIMIT, ...options }, () => clock.now) };
}

describe('per-address limits', () => {
  it('refuses an address whose refused credentials are used up, before the call, until one refills', () => {
    const { clock, limiter: limit } = limiter({ addressFailures: { perSecond: 0.1, burst: 3 } });
    for (let i = 0; i < 3; i++) {
      expect(limit.admitAddress('203.0.113.7')).toBeNull();
      limit.addressFailed('203.0.113.7');
    }
    expect(limit.admitAddress('203.0.113.7')).toEqual({ waitMs: 10_000, limit: 'address-failures' });
    // Another address has its own count; one at the same address is refused whatever it sends.
    expect(limit.admitAddress('198.51.100.9')).toBeNull();
    clock.now += 10_000;
    expect(limit.admitAddress('203.0.113.7')).toBeNull();
  });

  it('counts failures of calls admitted together into debt, one burst at most', () => {
    const { clock, limiter: limit } = limiter({ addressFailures: { perSecond: 1, burst: 2 } });
    for (let i = 0; i < 10; i++) expect(limit.admitAddress('203.0.113.7')).toBeNull();
    for (let i = 0; i < 10; i++) limit.addressFailed('203.0.113.7');
    // Two in debt: three tokens to wait for.
    expect(limit.admitAddress('203.0.113.7')).toEqual({ waitMs: 3000, limit: 'address-failures' });
    clock.now += 3000;
    expect(limit.admitAddress('203.0.113.7')).toBeNull();
  });

  it("spends a public call's cost from its address's bucket", () => {
    const { limiter: limit } = limiter({ address: { perSecond: 1, burst: 4 } });
    expect(limit.admitAddress('203.0.113.7', 3)).toBeNull();
    expect(limit.admitAddress('203.0.113.7', 2)).toEqual({ waitMs: 1000, limit: 'address' });
    expect(limit.admitAddress('203.0.113.7', 1)).toBeNull();
    expect(limit.admitAddress('203.0.113.8', 4)).toBeNull();
  });

  it('turns off with false, and refuses a bucket that cannot work', () => {
    const { limiter: limit } = limiter({ address: false, addressFailures: false });
    for (let i = 0; i < 1000; i++) {
      expect(limit.admitAddress('203.0.113.7')).toBeNull();
      limit.addressFailed('203.0.113.7');
    }
    expect(() => limiter({ address: { perSecond: 0 } })).toThrow(/rateLimit\.address needs/);
    expect(() => limiter({ addressFailures: { burst: 0.5 } })).toThrow(/rateLimit\.addressFailures/);
    expect(() => limiter({ streams: { perIdentity: 0 } })).toThrow(/rateLimit\.streams\.perIdentity/);
    expect(() => limiter({ streams: { perTenant: 2.5 } })).toThrow(/rateLimit\.streams\.perTenant/);
  });

  it('counts an IPv6 client by its /64 and a mapped IPv4 address as IPv4', () => {
    expect(clientAddressKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(clientAddressKey('[2001:DB8:1:2::ffff]')).toBe('2001:db8:1:2::/64');
    expect(clientAddressKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientAddressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(clientAddressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientAddressKey('203.0.113.7')).toBe('203.0.113.7');
    const { limiter: limit } = limiter({ addressFailures: { perSecond: 0.001, burst: 1 } });
    limit.addressFailed('2001:db8:1:2::1');
    expect(limit.admitAddress('2001:db8:1:2::9999')?.limit).toBe('address-failures');
    expect(limit.admitAddress('2001:db8:1:3::1')).toBeNull();
    // What is no address is still a key, bounded in length.
    expect(clientAddressKey('x'.repeat(10_000))).toHaveLength(64);
  });

  it('keeps counting the newest addresses when every call comes from a new one', () => {
    const { limiter: limit } = limiter({ addressFailures: { perSecond: 0.001, burst: 1 } });
    for (let i = 0; i < 250_000; i++)
      limit.addressFailed(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    // The newest addresses are still counted.
    expect(limit.admitAddress('10.3.208.143')?.limit).toBe('address-failures');
  });

  it('calls a refused credential a failure, and a sign-in asked for its second factor not', () => {
    expect(isRefusedCredential(new ComputeError('UNAUTHENTICATED', 'no'))).toBe(true);
    expect(
      isRefusedCredential(
        new ComputeError('UNAUTHENTICATED', 'a TOTP code is required', { details: { mfaRequired: true } }),
      ),
    ).toBe(false);
    expect(
      isRefusedCredential(
        new ComputeError('UNAUTHENTICATED', 'invalid TOTP code', {
          details: { mfaRequired: true, codeRejected: true },
        }),
      ),
    ).toBe(true);
    expect(isRefusedCredential(new ComputeError('INVALID_ARGUMENT', 'no'))).toBe(false);
    expect(isRefusedCredential(new Error('UNAUTHENTICATED'))).toBe(false);
  });

  it('words each refusal for the limit that refused', () => {
    const address = rateLimited(2500, 'address-failures');
    expect(address.code).toBe('RATE_LIMITED');
    expect(address.details).toEqual({ retryAfterMs: 2500, limit: 'address-failures' });
    expect(address.message).toMatch(/refused credentials from this address/);
    expect(address.hint).toMatch(/Wait 3 s.*per client address.*docs\/rate-limits\.md/);
    expect(rateLimited(1000, 'address').message).toMatch(/from this address/);
    expect(rateLimited(1000).message).toMatch(/from this identity/);
  });
});

describe('open stream caps', () => {
  it('caps open streams per identity and per tenant, and a released slot is free again', () => {
    const { limiter: limit } = limiter({ streams: { perIdentity: 2, perTenant: 3 } });
    const a1 = limit.openStream('alice', 'acme');
    const a2 = limit.openStream('alice', 'acme');
    expect('release' in a1 && 'release' in a2).toBe(true);
    expect(limit.openStream('alice', 'acme')).toEqual({ limit: 'identity', max: 2 });
    const b1 = limit.openStream('bob', 'acme');
    expect('release' in b1).toBe(true);
    expect(limit.openStream('bob', 'acme')).toEqual({ limit: 'tenant', max: 3 });
    expect('release' in limit.openStream('carol', 'globex')).toBe(true);
    if (!('release' in a1)) throw new Error('unreachable');
    a1.release();
    a1.release(); // twice is harmless: it frees one place only
    expect('release' in limit.openStream('alice', 'acme')).toBe(true);
    expect(limit.openStream('alice', 'acme')).toEqual({ limit: 'identity', max: 2 });
    const refusal = tooManyStreams({ limit: 'identity', max: 2 });
    expect(refusal.code).toBe('RATE_LIMITED');
    expect(refusal.details).toMatchObject({
      limit: 'identity',
      maxStreams: 2,
      retryAfterMs: expect.any(Number),
    });
    expect(refusal.hint).toMatch(/Close a stream/);
  });

  it('has no cap with streams: false', () => {
    const { limiter: limit } = limiter({ streams: false });
    for (let i = 0; i < 1000; i++) expect('release' in limit.openStream('alice', 'acme')).toBe(true);
  });
});
