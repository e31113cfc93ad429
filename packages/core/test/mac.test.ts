/**
 * MAC addresses in their one normal form (core's mac.ts): what people type is read (upper case,
 * `-` or `:`), what is not a network card's unicast address is refused with INVALID_ARGUMENT, and
 * the refusal never repeats a long or unprintable input.
 */
import { describe, expect, it } from 'vitest';
import { checkMac, normalizeMac } from '../src/index.js';

describe('MAC addresses', () => {
  it.each([
    ['52:54:00:12:34:56', '52:54:00:12:34:56'],
    ['52-54-00-AB-CD-EF', '52:54:00:ab:cd:ef'],
    [' 0c:c4:7A:00:00:01 ', '0c:c4:7a:00:00:01'],
  ])('%s is %s', (input, normal) => {
    expect(normalizeMac(input)).toBe(normal);
    expect(checkMac(input)).toBe(normal);
  });

  it.each([
    ['five octets', '52:54:00:12:34'],
    ['mixed separators', '52:54-00:12:34:56'],
    ['no separators', '525400123456'],
    ['a letter past f', '52:54:00:12:34:5g'],
    ['a NUL byte', '52:54:00:12:34:5\u0000'],
    ['multicast', '01:00:5e:00:00:01'],
    ['broadcast', 'ff:ff:ff:ff:ff:ff'],
    ['all zeros', '00:00:00:00:00:00'],
    ['a huge value', '52:54:00:12:34:56'.repeat(5000)],
  ])('%s is refused with INVALID_ARGUMENT', (_, input) => {
    expect(normalizeMac(input)).toBeNull();
    let thrown: unknown;
    try {
      checkMac(input);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((thrown as Error).message.length).toBeLessThan(200);
    expect((thrown as Error).message).not.toContain('\u0000');
  });
});
