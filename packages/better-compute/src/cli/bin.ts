/** The binary's entry: `bin/better-compute.cjs` calls `main` and exits with its status. */
export { main } from './program.js';
