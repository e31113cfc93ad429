/**
 * The binary's entry, which `bin/better-compute.cjs` calls, built on its own into a small file:
 * parsing the CLI's bundle (every command definition, the framework) is most of a command's
 * start-up, so `version` answers from here alone, and so do the built-in commands' help pages and
 * the completion scripts, from `help.json` and `help-index.json` (their manifest, and its names and
 * summaries, written beside this file at build time) when no configuration is in reach. Every
 * other command line loads the CLI (`program.cjs` beside this file) first
 * (docs/decisions/cli-startup.md).
 */
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { VERSION_LINE } from '@better-compute/core';

type Program = typeof import('./program.js');
type HelpFast = typeof import('./help-fast.js');

/** A line the manifest may answer: a help page or a completion script. */
function asksManifest(argv: readonly string[]): boolean {
  const first = argv[0];
  const last = argv[argv.length - 1];
  return (
    first === undefined ||
    first === 'help' ||
    first === '--help' ||
    first === '-h' ||
    first === 'completion' ||
    last === '--help' ||
    last === '-h'
  );
}

/** Runs a command line; resolves to the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  if (argv.length === 1 && (argv[0] === 'version' || argv[0] === '--version')) {
    process.stdout.write(`${VERSION_LINE}\n`);
    return 0;
  }
  // Required apart (`help-fast.cjs`, beside this file), so `version` parses none of it.
  const help = asksManifest(argv)
    ? (createRequire(__filename)('./help-fast.cjs') as HelpFast).answerFromBuiltManifest(argv)
    : undefined;
  if (help !== undefined) {
    const data = Buffer.from(`${help}\n`, 'utf8');
    let offset = 0;
    try {
      while (offset < data.length) offset += writeSync(1, data, offset);
    } catch {
      // A descriptor that would block, or a closed pipe: the rest through console, as io.ts does.
      console.log(data.subarray(offset).toString('utf8').replace(/\n$/, ''));
    }
    return 0;
  }
  // A require esbuild does not follow: the CLI stays a file of its own, parsed only when needed.
  const program = createRequire(__filename)('./program.cjs') as Program;
  return program.main([...argv]);
}
