/**
 * Which release keys a daemon trusts for its own updates. Like the command root and the approver
 * set, they are pinned once: at join (`bcd join --release-pins FILE`, the deployment's published
 * `release` settings: `{ "pins": [...], "threshold": N }`), or, when the join named none, from the
 * first welcome over a session the node credential authenticated (trust on first use). After that a
 * gateway's word changes nothing: a welcome that announces other keys is logged and ignored, so a
 * control plane that was taken over cannot make the node trust a key of its own.
 */
import { readFileSync } from 'node:fs';
import { readReleaseTrust, type ReleaseTrust } from '@better-compute/core/release';
import { ApiError, safe } from './http.js';
import type { PinnedReleaseKeys, StateDir } from './state.js';

/** Reads `{ pins, threshold }` (a file or a welcome's field), checked as a deployment's are. */
export function readReleasePinsDocument(
  value: unknown,
  where: string,
): { pins: string[]; threshold: number } {
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
  const same =
    saved.threshold === announced.threshold &&
    saved.pins.length === announced.pins.length &&
    saved.pins.every((pin) => announced.pins.includes(pin));
  if (!same)
    log(
      'bcd: kept the pinned release keys: the gateway announces others, and release keys change only by re-pinning on the node',
    );
}
