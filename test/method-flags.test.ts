/**
 * The client's method flags (packages/client/src/method-flags.ts) are generated from the method
 * table, so calls load no schema: this fails while the file is behind the table, and says how to
 * bring it up to date.
 */
import { readFileSync } from 'node:fs';
import { methods } from '@better-compute/core/methods';
import { expect, it } from 'vitest';
import { METHOD_FLAGS_FILE, renderMethodFlags } from '../scripts/method-flags.mjs';

it('packages/client/src/method-flags.ts matches the method table', async () => {
  const expected = await renderMethodFlags(methods);
  expect(
    readFileSync(METHOD_FLAGS_FILE, 'utf8') === expected,
    'the method flags are behind the method table: run node scripts/build.mjs && node scripts/method-flags.mjs',
  ).toBe(true);
});
