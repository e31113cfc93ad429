#!/usr/bin/env node
'use strict';
// One CommonJS bundle with its dependencies inlined: a node installs it with no build and no npm.
// `bcd run --supervise` runs the supervisor, a bundle of its own that a self-update never replaces
// (docs/rollouts.md): it starts `bcd run` as its child through this file, and returns to the
// previous dist/bcd.cjs when a new one does not come back healthy.
const args = process.argv.slice(2);
const run =
  args[0] === 'run' && args.includes('--supervise')
    ? require('../dist/supervisor.cjs').supervise(
        __filename,
        args.slice(1).filter((arg) => arg !== '--supervise'),
      )
    : require('../dist/bcd.cjs').main(args);
run.then((status) => {
  process.exitCode = status;
});
