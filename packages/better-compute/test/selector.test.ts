/** The selector grammar: every valid form parses to its terms, every invalid one is a clear INVALID_ARGUMENT. */
import { ComputeError } from '@better-compute/core';
import { describe, expect, it } from 'vitest';
import { matchesSelector, parseSelector } from '../src/modules/fleet/index.js';
import { ACME, createFleetDeployment, seedPool } from './fleet-support.js';

describe('selector grammar', () => {
  it.each([
    [
      'gpuProduct in (H100-SXM5-80GB), vramGiB >= 80',
      [
        { key: 'gpuProduct', field: 'gpuProduct', operator: 'in', values: ['H100-SXM5-80GB'] },
        { key: 'vramGiB', field: 'vramGiB', operator: '>=', values: ['80'] },
      ],
    ],
    ['gpuModel = H100', [{ key: 'gpuModel', field: 'gpuModel', operator: '=', values: ['H100'] }]],
    ['gpuModel == H100', [{ key: 'gpuModel', field: 'gpuModel', operator: '=', values: ['H100'] }]],
    ['gpuModel!=A100', [{ key: 'gpuModel', field: 'gpuModel', operator: '!=', values: ['A100'] }]],
    [
      'gpuModel notin (A100, L40S)',
      [{ key: 'gpuModel', field: 'gpuModel', operator: 'notin', values: ['A100', 'L40S'] }],
    ],
    [
      'vramGiB > 40, vramGiB < 100, vramGiB <= 80',
      [
        { key: 'vramGiB', field: 'vramGiB', operator: '>', values: ['40'] },
        { key: 'vramGiB', field: 'vramGiB', operator: '<', values: ['100'] },
        { key: 'vramGiB', field: 'vramGiB', operator: '<=', values: ['80'] },
      ],
    ],
    [
      'zone in (a,b), example.com/rack >= 3',
      [
        { key: 'zone', field: null, operator: 'in', values: ['a', 'b'] },
        { key: 'example.com/rack', field: null, operator: '>=', values: ['3'] },
      ],
    ],
    ['  ', []],
  ])('%j parses', (selector, terms) => {
    expect(parseSelector(selector)).toEqual(terms);
  });

  it.each([
    ['gpuProduct in (H100-SXM5-80GB),', 'an empty term'],
    [', vramGiB >= 80', 'an empty term'],
    ['vramGiB >= 80,, zone = a', 'an empty term'],
    ['vramGiB >= lots', 'vramGiB takes a whole number of GiB, not "lots"'],
    ['vramGiB >= 80.5', 'vramGiB takes a whole number'],
    ['gpuModel >= H100', 'gpuModel compares with = != in notin, not >='],
    ['gpuProduct in H100', 'in and notin take a list in parentheses'],
    ['gpuProduct in (H100', 'unbalanced "("'],
    ['gpuProduct in H100)', 'unbalanced ")"'],
    ['gpuProduct in ()', 'the list of in is empty'],
    ['gpuProduct in ((H100))', 'nested parentheses'],
    ['gpuProduct in (H100) x', 'nothing may follow'],
    ['gpuModel', 'has no operator'],
    ['= H100', 'has no key'],
    ['gpuModel =', 'has no value'],
    ['gpuModel => H100', 'unknown operator "=>"'],
    ['gpuModel =< H100', 'unknown operator "=<"'],
    ['zone > b', '"b" in "zone > b" is not a number'],
    ['bad key! = x', 'is not a field (gpuModel, gpuProduct, vramGiB) or a label key'],
    ['zone = a;b', 'is not a valid value'],
    ['zone in (a, )', 'has no value'],
  ])('%j is refused: %s', (selector, message) => {
    let caught: unknown;
    try {
      parseSelector(selector);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ComputeError);
    const error = caught as ComputeError;
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain(message);
    expect(error.message.startsWith('selector: ')).toBe(true);
    expect(error.details).toMatchObject({ field: 'selector', selector });
  });

  it('matches GPUs and node labels as the database filter does', () => {
    const terms = parseSelector(
      'gpuProduct in (H100-SXM5-80GB), vramGiB >= 80, zone != eu-2, rack notin (9)',
    );
    const h100 = { model: 'H100', product: 'H100-SXM5-80GB', vramGiB: 80 };
    expect(matchesSelector(terms, h100, { zone: 'eu-1' })).toBe(true);
    expect(matchesSelector(terms, h100, {})).toBe(true);
    expect(matchesSelector(terms, h100, { zone: 'eu-2' })).toBe(false);
    expect(matchesSelector(terms, h100, { rack: '9' })).toBe(false);
    expect(matchesSelector(terms, { ...h100, vramGiB: 40 }, {})).toBe(false);
  });

  it('an invalid selector is INVALID_ARGUMENT from reserve and preview', async () => {
    const d = await createFleetDeployment('pglite');
    try {
      const { poolId } = await seedPool(d);
      for (const method of ['reservations.create', 'capacity.preview']) {
        const error = await d.fails(
          method,
          { poolId, gpus: 1, durationSeconds: 3600, selector: 'vramGiB >= lots' },
          ACME,
        );
        expect(error).toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: 'selector: vramGiB takes a whole number of GiB, not "lots"',
          details: { field: 'selector' },
        });
      }
    } finally {
      await d.close();
    }
  });
});
