/** `version`: the release of this binary. Loads nothing but core's constants. */
import { PRODUCT, VERSION } from '@better-compute/core';
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'version',
  group: 'Start',
  summary: 'Print the version of this better-compute',
  target: 'none',
  output: false,
  examples: ['better-compute version'],
  run: () => `${PRODUCT} ${VERSION}`,
});
