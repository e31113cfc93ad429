/**
 * The daemon's check of a bcd release it is sent (issue 33, the verifying half of item 4): a
 * threshold of the release keys this node pinned signed the manifest, the manifest allows the move
 * from the version running here (never below its minimumVersion; back to an older or equal version
 * only as an explicit rollback), and the artifact is the manifest's for this machine's platform,
 * by size and SHA-256. Whatever the control plane says, a release that fails any of these is
 * refused with the failing step's code (RELEASE_UNVERIFIED, DOWNGRADE_REFUSED, NOT_FOUND,
 * DIGEST_MISMATCH). The checks themselves are @better-compute/core/release's, shared with the CLI's
 * `release verify` and the server's `releases.register`; fetching, swapping and restarting are not
 * here yet.
 */
import { type ArtifactContent, type ReleaseTrust, verifyUpdate } from '@better-compute/core/release';
import { DAEMON_VERSION } from './version.js';

/** This machine's platform as manifests name it: `linux-x64`, `linux-arm64`. */
export function daemonPlatform(platform: string = process.platform, arch: string = process.arch): string {
  return `${platform}-${arch}`;
}

export interface ReleaseCheckOptions {
  /** The release keys this node pinned and how many must have signed (readReleaseTrust). */
  trust: ReleaseTrust;
  /** The version running; default this daemon's. */
  current?: string;
  /** The platform; default this machine's. */
  platform?: string;
  /** Going back to an older (or the same) version was asked for. */
  rollback?: boolean;
}

/** Checks a release envelope and the artifact fetched for it before anything is installed. */
export function checkRelease(envelope: unknown, artifact: ArtifactContent, options: ReleaseCheckOptions) {
  return verifyUpdate(envelope, {
    pins: options.trust,
    platform: options.platform ?? daemonPlatform(),
    current: options.current ?? DAEMON_VERSION,
    artifact,
    rollback: options.rollback === true,
  });
}
