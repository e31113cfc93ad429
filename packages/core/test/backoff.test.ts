import { describe, expect, it } from 'vitest';
import { backoffDelay, jittered } from '../src/index.js';

describe('the one retry rule', () => {
  it('doubles from the first wait up to the cap, and waits nothing before a failure', () => {
    expect([0, 1, 2, 3, 6, 7, 40].map((n) => backoffDelay(n, 500, 30_000))).toEqual([
      0, 500, 1000, 2000, 16_000, 30_000, 30_000,
    ]);
    // A huge count neither overflows to Infinity nor passes the cap.
    expect(backoffDelay(1e9, 1000, 60_000)).toBe(60_000);
  });

  it('spreads a wait between half and all of its ceiling', () => {
    expect(jittered(1000, () => 0)).toBe(500);
    expect(jittered(1000, () => 0.5)).toBe(750);
    expect(jittered(1000, () => 0.999_999)).toBe(1000);
  });
});
