#!/usr/bin/env node
'use strict';
// The start-up file is one CommonJS bundle: it loads faster than a tree of ES modules.
require('../dist/cli/bin.cjs')
  .main(process.argv.slice(2))
  .then((status) => {
    process.exitCode = status;
  });
