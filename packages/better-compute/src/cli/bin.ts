/**
 * The binary's entry, which `bin/better-compute.cjs` calls, built on its own into a small file:
 * parsing the CLI's bundle (every command definition, the framework) is most of a command's
 * start-up, so `version` answers from here alone and every other command line loads the CLI
 * (`program.cjs` beside this file) first (docs/decisions/cli-startup.md).
 */
import { createRequire } from 'node:module';
import { VERSION_LINE } from '@better-compute/core';

type Program = typeof import('./program.js');

/** Runs a command line; resolves to the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  if (argv.length === 1 && (argv[0] === 'version' || argv[0] === '--version')) {
    process.stdout.write(`${VERSION_LINE}\n`);
    return 0;
  }
  // A require esbuild does not follow: the CLI stays a file of its own, parsed only when needed.
  const program = createRequire(__filename)('./program.cjs') as Program;
  return program.main([...argv]);
}
