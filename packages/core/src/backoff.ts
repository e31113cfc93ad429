/**
 * The retry waits of every loop that reconnects or retries (the job runner, the client's and the
 * console's event streams, the node daemon's gateway session): one rule, doubling from a first
 * wait up to a cap, and one spread so that many clients cut off at once do not return at once.
 */

/** The wait before the `failures`-th retry in a row: initial × 2^(failures−1), at most `capMs`; 0 before any failure. */
export function backoffDelay(failures: number, initialMs = 1000, capMs = 60_000): number {
  if (failures <= 0) return 0;
  return Math.min(capMs, initialMs * 2 ** Math.min(failures - 1, 30));
}

/** A wait between half and all of `ceilingMs`, whole milliseconds: the spread of a fleet's retries. */
export function jittered(ceilingMs: number, random: () => number = Math.random): number {
  return Math.round(ceilingMs / 2 + random() * (ceilingMs / 2));
}
