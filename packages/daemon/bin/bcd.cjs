#!/usr/bin/env node
'use strict';
// One CommonJS bundle with its dependencies inlined: a node installs it with no build and no npm.
require('../dist/bcd.cjs')
  .main(process.argv.slice(2))
  .then((status) => {
    process.exitCode = status;
  });
