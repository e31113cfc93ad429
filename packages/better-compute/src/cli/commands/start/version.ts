/** `version`: the release of this binary. Loads nothing but core's constants. */
import { VERSION_LINE } from '@better-compute/core';
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'version',
  group: 'Start',
  summary: 'Print the version of this better-compute',
  target: 'none',
  output: false,
  examples: ['better-compute version'],
  // The binary's entry prints the same line without loading the commands (cli/bin.ts).
  run: () => VERSION_LINE,
});
