/**
 * What a machine checks before it installs a release, beside the signatures: that the artifact it
 * holds is the one the manifest names for its platform (size and SHA-256), and that the move from
 * the version it runs is one the manifest allows. `verifyUpdate` is the daemon's whole check, in
 * the order that trusts nothing unsigned: signatures, then the version rule, then the bytes.
 * Node only (node:crypto).
 */
import { createHash } from 'node:crypto';
import { ComputeError } from '../errors.js';
import type { ReleaseArtifact, ReleaseManifest } from './manifest.js';
import { compareSemver, isSemver } from './semver.js';
import {
  type ReleasePinInput,
  type ReleaseTrust,
  type VerifiedRelease,
  verifyRelease,
} from './signatures.js';

/** The artifact's bytes, or its SHA-256 (64 lowercase hex digits) with its size. */
export type ArtifactContent = Uint8Array | { sha256: string; size: number };

/**
 * The manifest's artifact for `platform`, once the content is shown to be it: NOT_FOUND when the
 * release has no build for the platform, DIGEST_MISMATCH when the size or the SHA-256 differs.
 */
export function checkArtifact(
  manifest: ReleaseManifest,
  platform: string,
  content: ArtifactContent,
): ReleaseArtifact {
  const artifact = manifest.artifacts.find((candidate) => candidate.platform === platform);
  if (!artifact)
    throw new ComputeError('NOT_FOUND', `release ${manifest.version} has no build for ${platform}`, {
      details: { version: manifest.version, platform, platforms: manifest.artifacts.map((a) => a.platform) },
      hint: `It carries ${manifest.artifacts.map((a) => a.platform).join(', ')}: roll it out only to machines of those platforms.`,
    });
  const size = content instanceof Uint8Array ? content.length : content.size;
  const sha256 =
    content instanceof Uint8Array ? createHash('sha256').update(content).digest('hex') : content.sha256;
  if (size !== artifact.size || sha256 !== artifact.sha256)
    throw new ComputeError(
      'DIGEST_MISMATCH',
      size !== artifact.size
        ? `the ${platform} artifact is ${size} bytes; release ${manifest.version} names ${artifact.size}`
        : `the ${platform} artifact's SHA-256 is ${sha256}; release ${manifest.version} names ${artifact.sha256}`,
      {
        details: {
          version: manifest.version,
          platform,
          size,
          sha256,
          expected: { size: artifact.size, sha256: artifact.sha256 },
        },
        hint: 'Do not install it: these are not the bytes the release keys signed for. Fetch the artifact again.',
      },
    );
  return artifact;
}

/** What an allowed move is: from the running version to the release's, and whether it goes back. */
export interface UpgradeStep {
  from: string;
  to: string;
  rollback: boolean;
}

/**
 * Whether a machine running `current` may install `manifest`: never when `current` is below the
 * manifest's minimumVersion (the release does not replace it), and to a lower or equal version only
 * when the move is explicitly a rollback. Refusals are DOWNGRADE_REFUSED.
 */
export function checkUpgrade(
  current: string,
  manifest: ReleaseManifest,
  options: { rollback?: boolean } = {},
): UpgradeStep {
  if (!isSemver(current))
    throw new ComputeError('INVALID_ARGUMENT', `the running version "${current}" is not a semantic version`, {
      details: { field: 'current' },
    });
  const step = { from: current, to: manifest.version, rollback: options.rollback === true };
  if (compareSemver(current, manifest.minimumVersion) < 0)
    throw new ComputeError(
      'DOWNGRADE_REFUSED',
      `release ${manifest.version} replaces ${manifest.minimumVersion} or later; this machine runs ${current}`,
      {
        details: { ...step, minimumVersion: manifest.minimumVersion },
        hint: `Install a release that replaces ${current} first (one whose minimumVersion is ${current} or lower).`,
      },
    );
  const order = compareSemver(manifest.version, current);
  if (order <= 0 && !step.rollback)
    throw new ComputeError(
      'DOWNGRADE_REFUSED',
      order === 0
        ? `this machine already runs ${current}`
        : `release ${manifest.version} is older than the ${current} this machine runs`,
      {
        details: { ...step, minimumVersion: manifest.minimumVersion },
        hint: 'Going back to an older (or the same) version must be asked for as a rollback.',
      },
    );
  return step;
}

export interface UpdateCheck {
  pins: readonly ReleasePinInput[] | ReleaseTrust;
  threshold?: number;
  /** The machine's platform, such as linux-x64. */
  platform: string;
  /** The version the machine runs now. */
  current: string;
  artifact: ArtifactContent;
  rollback?: boolean;
}

/**
 * The daemon's check of a release it was sent: a threshold of its pinned keys signed the manifest,
 * the move from its version is allowed, and the artifact is the manifest's for its platform. Each
 * refusal is the error of the step that failed (RELEASE_UNVERIFIED, DOWNGRADE_REFUSED, NOT_FOUND,
 * DIGEST_MISMATCH), whatever the control plane said.
 */
export function verifyUpdate(
  envelope: unknown,
  check: UpdateCheck,
): VerifiedRelease & { artifact: ReleaseArtifact; step: UpgradeStep } {
  const release = verifyRelease(
    envelope,
    check.threshold === undefined ? { pins: check.pins } : { pins: check.pins, threshold: check.threshold },
  );
  const step = checkUpgrade(check.current, release.manifest, { rollback: check.rollback === true });
  const artifact = checkArtifact(release.manifest, check.platform, check.artifact);
  return { ...release, artifact, step };
}
