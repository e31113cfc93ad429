#!/usr/bin/env node
import { main } from '../dist/cli/bin.js';

process.exitCode = await main(process.argv.slice(2));
