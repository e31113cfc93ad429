/** The binary's entry: `bin/better-compute.mjs` calls `main` and exits with its status. */
export { main } from './program.js';
