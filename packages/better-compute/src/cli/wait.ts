/**
 * The one waiting loop of every `--wait` command (instances create, start, stop, resize and
 * delete, reserve, sandbox create). It reads the resource again until it leaves its busy states or
 * the time is up, and prints one progress line on stderr per change, with the time since the wait
 * began (`inst_…: provisioning (3.2 s)`), so stdout keeps only the answer in its --format.
 *
 * A resource that ended failed is printed like any answer and then fails the command: a
 * RESOURCE_FAILED whose message carries its reason, exit status 1 like every failure that is not a
 * usage mistake (errors.ts). One still busy when the time is up is printed as it is, exit 0, with a
 * line saying how to follow it: it may still get there. docs/decisions/cli-wait.md says why.
 */
import { ComputeError, formatDuration } from '@better-compute/core';
import type { CommandContext } from './define.js';

/** The code of a resource that a command waited for and that ended failed. */
const RESOURCE_FAILED = 'RESOURCE_FAILED';

/** What a command waits for, and how to read it. */
export interface WaitTarget<T> {
  /** The word for it in messages: `instance`, `reservation`, `sandbox`. */
  noun: string;
  /** The command that shows it, named when the time is up: `better-compute instances get inst_…`. */
  show: string;
  /** Reads it again. */
  read(): Promise<T>;
  /** Whether it is still on its way (provisioning, queued, starting). */
  busy(value: T): boolean;
  /** What happened to it when it ended failed (`failed: <reason>`), else null. */
  failure(value: T): string | null;
  /** Its state as a progress line shows it; its `state` when absent. */
  describe?(value: T): string;
  /** What to do about a failure: the hint printed under it. */
  hint: string;
}

// Polls start quick (a warm sandbox or a queued reservation often settles within a second) and
// slow down to one a second, which is plenty for a boot that takes minutes.
const FIRST_POLL_MS = 200;
const LONGEST_POLL_MS = 1000;

// Failures of one read that say nothing about the resource: a server restarting, a proxy's 502,
// a rate limit. The wait goes on through them until its time is up.
const PASSING = new Set(['UNAVAILABLE', 'INVALID_RESPONSE', 'RATE_LIMITED']);

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * Waits up to `waitSeconds` while `target.busy(first)`; answers the resource as it is then. A
 * resource that ended failed (before or during the wait) is printed and thrown as RESOURCE_FAILED.
 *
 * @example
 * return waitFor(context, created, flags.wait, instanceTarget(client, created.id));
 */
export async function waitFor<T extends { id: string; state: string }>(
  context: Pick<CommandContext, 'log' | 'print' | 'status'>,
  first: T,
  waitSeconds: number,
  target: WaitTarget<T>,
): Promise<T> {
  const describe = target.describe ?? ((value: T) => value.state);
  let current = first;
  if (waitSeconds > 0 && target.busy(current)) {
    const started = Date.now();
    const deadline = started + waitSeconds * 1000;
    let shown = describe(current);
    context.log(`${current.id}: ${shown} (${seconds(0)}); waiting up to ${formatDuration(waitSeconds)}`);
    let pause = FIRST_POLL_MS;
    let passing: string | null = null;
    // On a terminal, the time taken ticks on a status line between the lines of changes.
    const tick = () =>
      context.status(
        `${current.id}: ${shown}, ${seconds(Date.now() - started)} of ${formatDuration(waitSeconds)}`,
      );
    const ticking = setInterval(tick, 1000);
    try {
      while (target.busy(current) && Date.now() < deadline) {
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(pause, Math.max(0, deadline - Date.now()))),
        );
        pause = Math.min(LONGEST_POLL_MS, Math.round(pause * 1.5));
        try {
          current = await target.read();
          passing = null;
        } catch (error) {
          if (!(error instanceof ComputeError) || !PASSING.has(error.code) || Date.now() >= deadline)
            throw error;
          // Said once per outage, not once per read.
          if (passing !== error.code)
            context.log(`${current.id}: the server did not answer (${error.code}); still waiting`);
          passing = error.code;
          continue;
        }
        const now = describe(current);
        if (now !== shown) context.log(`${current.id}: ${now} (${seconds(Date.now() - started)})`);
        shown = now;
      }
    } finally {
      clearInterval(ticking);
      context.status(null);
    }
    if (target.busy(current))
      context.log(
        `${current.id}: still ${shown} after ${formatDuration(waitSeconds)}; see it with: ${target.show}`,
      );
  }
  const failure = target.failure(current);
  if (failure === null) return current;
  // The answer is printed as usual, so a script still gets the id it must clean up.
  context.print(current);
  throw new ComputeError(RESOURCE_FAILED, `${target.noun} ${current.id} ${failure}`, {
    hint: target.hint,
    details: { id: current.id, state: current.state },
  });
}
