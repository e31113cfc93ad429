/**
 * Runs in the browser before any of the console's code (Next.js loads it first on every page).
 *
 * The client checks the API's answers with zod, which, when its first object schema is built (as
 * the client's modules load), probes whether it may compile its checks with `new Function`. The
 * pages' policy forbids that (no 'unsafe-eval', lib/mount.mjs): the probe's failure is caught, but
 * the browser still reports a violation on every page. Told here, before any schema exists, zod
 * skips the probe and interprets its checks. Only in the browser: the server's zod keeps compiling.
 */
import { config } from 'zod';

config({ jitless: true });
