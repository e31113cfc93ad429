import { describe, expect, it } from 'vitest';
import {
  CHANGE_COST,
  ComputeError,
  DEFAULT_RATE_LIMIT,
  READ_COST,
  RateLimiter,
  rateLimited,
} from '../src/index.js';

/** A limiter on a clock the test moves. */
function limiter(options: ConstructorParameters<typeof RateLimiter>[0]) {
  const clock = { now: 1_000_000 };
  return { clock, limiter: new RateLimiter(options, () => clock.now) };
}

describe('RateLimiter', () => {
  it('lets one CI key reserve and release 50 times a second for a minute under the defaults', () => {
    const { clock, limiter: limit } = limiter(DEFAULT_RATE_LIMIT);
    // 50 pairs a second, each a reserve, a read of it, and a release: one pair every 20 ms.
    const pair = [
      limit.costOf('reservations.create', 'mutation'),
      limit.costOf('reservations.get', 'query'),
      limit.costOf('reservations.release', 'mutation'),
    ];
    const refusals = [];
    for (let i = 0; i < 50 * 60; i++) {
      clock.now += 20;
      for (const cost of pair) {
        const refused = limit.charge('key_ci', { tenantId: 'acme', cost });
        if (refused) refusals.push(refused);
      }
    }
    expect(refusals).toEqual([]);
  });

  it('charges reads less than changes and heavy methods more, with costs from the configuration first', () => {
    const { limiter: limit } = limiter({
      perSecond: 1,
      burst: 10,
      costs: { 'usage.export': 9, 'pools.get': 3 },
    });
    expect(limit.costOf('pools.list', 'query')).toBe(READ_COST);
    expect(limit.costOf('reservations.create', 'mutation')).toBe(CHANGE_COST);
    expect(limit.costOf('capacity.get', 'query')).toBeGreaterThan(READ_COST);
    expect(limit.costOf('usage.export', 'query')).toBe(9);
    expect(limit.costOf('pools.get', 'query')).toBe(3);
  });

  it('spends a burst, then refuses with the wait until the call fits, and refills with time', () => {
    const { clock, limiter: limit } = limiter({ perSecond: 2, burst: 4, tenant: false });
    for (let i = 0; i < 8; i++) expect(limit.charge('a', { cost: READ_COST })).toBeNull();
    expect(limit.charge('a', { cost: 1 })).toEqual({ waitMs: 500, limit: 'identity' });
    // Another identity has its own bucket.
    expect(limit.charge('b', { cost: 4 })).toBeNull();
    clock.now += 500;
    expect(limit.charge('a', { cost: 1 })).toBeNull();
    expect(limit.take('a')).toBe(500);
  });

  it('limits a tenant across its identities, and charges neither bucket when one refuses', () => {
    const { clock, limiter: limit } = limiter({
      perSecond: 10,
      burst: 10,
      tenant: { perSecond: 1, burst: 3 },
    });
    expect(limit.charge('a', { tenantId: 'acme', cost: 1 })).toBeNull();
    expect(limit.charge('b', { tenantId: 'acme', cost: 1 })).toBeNull();
    expect(limit.charge('c', { tenantId: 'acme', cost: 1 })).toBeNull();
    expect(limit.charge('d', { tenantId: 'acme', cost: 1 })).toEqual({ waitMs: 1000, limit: 'tenant' });
    // Another tenant is not affected, and d's identity bucket was not charged by the refusal.
    expect(limit.charge('e', { tenantId: 'globex', cost: 1 })).toBeNull();
    clock.now += 1000;
    expect(limit.charge('d', { tenantId: 'acme', cost: 1 })).toBeNull();
    for (let i = 0; i < 9; i++) {
      clock.now += 1000;
      expect(limit.charge('d', { tenantId: 'acme' })).toBeNull();
    }
  });

  it('charges a cost above the burst as the burst, and a zero cost never', () => {
    const { limiter: limit } = limiter({ perSecond: 1, burst: 2, tenant: false });
    expect(limit.charge('a', { cost: 50 })).toBeNull();
    expect(limit.charge('a', { cost: 1 })).toEqual({ waitMs: 1000, limit: 'identity' });
    expect(limit.charge('a', { cost: 0 })).toBeNull();
  });

  it('refuses a configuration that could never allow a call', () => {
    expect(() => new RateLimiter({ perSecond: 0, burst: 10 })).toThrow(ComputeError);
    expect(() => new RateLimiter({ perSecond: 1, burst: 0.5 })).toThrow(/burst >= 1/);
    expect(() => new RateLimiter({ perSecond: 1, burst: 1, tenant: { perSecond: -1, burst: 1 } })).toThrow(
      /rateLimit.tenant/,
    );
    expect(() => new RateLimiter({ perSecond: 1, burst: 1, costs: { 'pools.list': -1 } })).toThrow(
      /rateLimit.costs.pools.list/,
    );
  });

  it('says which limit refused, with retryAfterMs', () => {
    const error = rateLimited(1500, 'tenant');
    expect(error.code).toBe('RATE_LIMITED');
    expect(error.details).toEqual({ retryAfterMs: 1500, limit: 'tenant' });
    expect(error.hint).toMatch(/Wait 2 s/);
    expect(rateLimited(10).details).toEqual({ retryAfterMs: 10, limit: 'identity' });
  });
});
