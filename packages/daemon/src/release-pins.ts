/**
 * Which release keys a daemon trusts for its own updates. Like the command root and the approver
 * set, they are pinned once: at join (`bcd join --release-pins FILE`, the deployment's published
 * `release` settings: `{ "pins": [...], "threshold": N }`), or, when the join named none, from the
 * first welcome over a session the node credential authenticated (trust on first use). After that a
 * gateway's word changes nothing: a welcome that announces other keys is logged and ignored, so a
 * control plane that was taken over cannot make the node trust a key of its own. The pins move only
 * along signed release-pin statements (`release sign-pins`) the welcome carries: each signed by a
 * threshold of the keys the daemon holds, with an epoch past theirs, or none is taken.
 */
import { readFileSync } from 'node:fs';
import {
  followReleasePinStatements,
  readReleaseTrust,
  type ReleaseTrust,
} from '@better-compute/core/release';
import { ApiError, safe } from './http.js';
import type { PinnedReleaseKeys, StateDir } from './state.js';

/** Reads `{ pins, threshold }` (a file or a welcome's field), checked as a deployment's are. */
function readReleasePinsDocument(value: unknown, where: string): { pins: string[]; threshold: number } {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new ApiError('INVALID_ARGUMENT', `${where} is not { "pins": [...], "threshold": N }`);
  const { pins, threshold, ...rest } = value as { pins?: unknown; threshold?: unknown };
  const unknown = Object.keys(rest);
  if (unknown.length)
    throw new ApiError(
      'INVALID_ARGUMENT',
      `${where} has a field it should not: ${safe(unknown[0]!).slice(0, 64)}`,
    );
  if (!Array.isArray(pins) || !pins.every((pin) => typeof pin === 'string'))
    throw new ApiError('INVALID_ARGUMENT', `${where}: pins must be a list of release key ids or public keys`);
  if (threshold !== undefined && typeof threshold !== 'number')
    throw new ApiError('INVALID_ARGUMENT', `${where}: threshold must be a number`);
  try {
    const trust = readReleaseTrust(
      pins,
      threshold as number | undefined,
      'INVALID_ARGUMENT',
      `${where}: pins`,
    );
    return { pins: trust.pins.map((pin) => pin.keyId), threshold: trust.threshold };
  } catch (error) {
    throw new ApiError('INVALID_ARGUMENT', safe((error as Error).message));
  }
}

/** A --release-pins file. */
export function readReleasePinsFile(file: string): { pins: string[]; threshold: number } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ApiError(
      'INVALID_ARGUMENT',
      `--release-pins ${safe(file).slice(0, 200)} is not a JSON file: ${safe((error as Error).message).slice(0, 200)}`,
    );
  }
  return readReleasePinsDocument(parsed, `--release-pins ${safe(file).slice(0, 200)}`);
}

/** The pinned trust, checked again as it is read; null when none is pinned; throws when the file is damaged. */
export function pinnedReleaseTrust(state: StateDir): ReleaseTrust | null {
  const saved = state.releasePins();
  if (!saved) return null;
  try {
    return readReleaseTrust(saved.pins, saved.threshold, 'INVALID_ARGUMENT', 'the pinned release keys');
  } catch (error) {
    throw new Error(
      `${state.dir}/release-pins.json holds no usable release keys (${(error as Error).message}); restore it from the deployment's release settings`,
    );
  }
}

/** The welcome's `releasePins`: pinned if none is, otherwise compared and, when different, ignored. */
export function followWelcomeReleasePins(
  state: StateDir,
  welcome: { releasePins?: unknown },
  log: (line: string) => void,
): void {
  if (welcome.releasePins === undefined || welcome.releasePins === null) return;
  let announced: { pins: string[]; threshold: number };
  try {
    announced = readReleasePinsDocument(welcome.releasePins, 'the gateway’s release keys');
  } catch (error) {
    log(`bcd: ignored the release keys the gateway announced: ${safe((error as Error).message)}`);
    return;
  }
  let saved: PinnedReleaseKeys | null;
  try {
    saved = state.releasePins();
  } catch (error) {
    log(`bcd: kept the pinned release keys as they are: ${safe((error as Error).message)}`);
    return;
  }
  if (!saved) {
    state.saveReleasePins({ ...announced, pinnedAt: new Date().toISOString(), source: 'welcome' });
    log(
      `bcd: pinned ${announced.pins.length} release key(s), ${announced.threshold} needed, from the first welcome`,
    );
    return;
  }
  // Pins moved along statements differ from the configuration's by design; only the join's are compared.
  const same =
    saved.threshold === announced.threshold &&
    saved.pins.length === announced.pins.length &&
    saved.pins.every((pin) => announced.pins.includes(pin));
  if (!same && !saved.epoch)
    log(
      'bcd: kept the pinned release keys: the gateway announces others, and release keys change only by a signed release-pin statement',
    );
}

/** The most statements a welcome's chain is read for; far past any real history of key changes. */
const MAX_STATEMENTS = 256;

/**
 * The welcome's `releasePinStatements`: followed from the pins held, when one is of a later epoch.
 * The whole chain verifies (each statement signed by a threshold of the keys before it, its epoch
 * past theirs) or the daemon keeps its pins and says why; a gateway cannot skip a step or replay an
 * old set.
 */
export function followWelcomeReleasePinStatements(
  state: StateDir,
  welcome: { releasePinStatements?: unknown },
  log: (line: string) => void,
): void {
  const statements = welcome.releasePinStatements;
  if (!Array.isArray(statements) || statements.length === 0) return;
  let saved: PinnedReleaseKeys | null;
  try {
    saved = state.releasePins();
  } catch (error) {
    log(`bcd: followed no release-pin statement: ${safe((error as Error).message)}`);
    return;
  }
  if (!saved) {
    log('bcd: followed no release-pin statement: no release keys are pinned');
    return;
  }
  const held = { pins: saved.pins, threshold: saved.threshold, epoch: saved.epoch ?? 0 };
  const epochOf = (value: unknown) => (value as { statement?: { epoch?: unknown } } | null)?.statement?.epoch;
  // Nothing past what the daemon holds: nothing to check (the usual welcome).
  if (
    !statements.some((value) => {
      const epoch = epochOf(value);
      return typeof epoch !== 'number' || epoch > held.epoch;
    })
  )
    return;
  let reached: typeof held;
  try {
    reached = followReleasePinStatements(held, statements.slice(0, MAX_STATEMENTS));
  } catch (error) {
    log(
      `bcd: kept the pinned release keys of epoch ${held.epoch}: ${safe((error as Error).message).slice(0, 500)}`,
    );
    return;
  }
  if (reached.epoch === held.epoch) return;
  state.saveReleasePins({
    pins: reached.pins,
    threshold: reached.threshold,
    epoch: reached.epoch,
    pinnedAt: new Date().toISOString(),
    source: 'statement',
  });
  log(
    `bcd: followed the signed release-pin statements from epoch ${held.epoch} to ${reached.epoch}: ${reached.pins.length} release key(s), ${reached.threshold} needed`,
  );
}
