/**
 * bcd's check of a release it is sent (issue 33, the verifying half of item 4), with real Ed25519
 * release keys and this checkout's real daemon build as the artifact: a manifest two pinned keys
 * signed passes; one signature where two are pinned, a signer nobody pinned, a tampered artifact,
 * a build for another platform and a downgrade are each refused with their own code, whatever the
 * control plane would say.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ComputeError } from '@better-compute/core';
import {
  addReleaseSignature,
  generateReleaseKey,
  readReleaseKey,
  readReleaseTrust,
  type ReleaseEnvelope,
  type ReleaseManifest,
} from '@better-compute/core/release';
import { describe, expect, it } from 'vitest';
import { DAEMON_VERSION } from '../src/agent.js';
import { checkRelease, daemonPlatform } from '../src/release-check.js';

// The real daemon bundle the build wrote (test/global-setup.ts builds before any suite runs).
const build = new Uint8Array(readFileSync(join(import.meta.dirname, '..', 'dist', 'bcd.cjs')));
const platform = daemonPlatform();
const key = () => readReleaseKey(generateReleaseKey().privatePem, 'release.pem');
const [first, second, stranger] = [key(), key(), key()];
const trust = readReleaseTrust([first.keyId, second.keyId], 2);

function manifest(version: string, minimumVersion: string): ReleaseManifest {
  return {
    version,
    artifacts: [
      { platform, size: build.length, sha256: createHash('sha256').update(build).digest('hex') },
      { platform: 'linux-riscv64', size: 1, sha256: '0'.repeat(64) },
    ],
    minimumVersion,
    notes: 'The next bcd.',
    createdAt: '2026-05-01T12:00:00.000Z',
  };
}

const signed = (m: ReleaseManifest, ...keys: (typeof first)[]): ReleaseEnvelope =>
  keys.reduce((envelope, k) => addReleaseSignature(envelope, k), {
    manifest: m,
    signatures: [],
  } as ReleaseEnvelope);

function refusal(run: () => unknown): { code: string; message: string } {
  try {
    run();
  } catch (error) {
    if (error instanceof ComputeError) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('it was not refused');
}

const next = manifest('0.2.0', DAEMON_VERSION);

describe('bcd checks a release before it installs it', () => {
  it('accepts a manifest a threshold of its pinned keys signed, for its platform and its version', () => {
    const release = checkRelease(signed(next, first, second), build, { trust });
    expect(release).toMatchObject({
      signers: [first.keyId, second.keyId],
      artifact: { platform, size: build.length },
      step: { from: DAEMON_VERSION, to: '0.2.0', rollback: false },
    });
  });

  it('one signature where two are pinned is RELEASE_UNVERIFIED, and so is a second signer nobody pinned', () => {
    expect(refusal(() => checkRelease(signed(next, first), build, { trust })).code).toBe(
      'RELEASE_UNVERIFIED',
    );
    const unpinned = refusal(() => checkRelease(signed(next, first, stranger), build, { trust }));
    expect(unpinned.code).toBe('RELEASE_UNVERIFIED');
    expect(unpinned.message).toContain('by keys not pinned, which do not count');
  });

  it('a tampered artifact is DIGEST_MISMATCH; a release without a build for this platform is NOT_FOUND', () => {
    const tampered = new Uint8Array(build);
    tampered[tampered.length - 2] = tampered[tampered.length - 2]! ^ 0x20;
    expect(refusal(() => checkRelease(signed(next, first, second), tampered, { trust })).code).toBe(
      'DIGEST_MISMATCH',
    );
    expect(
      refusal(() => checkRelease(signed(next, first, second), build, { trust, platform: 'darwin-arm64' }))
        .code,
    ).toBe('NOT_FOUND');
  });

  it('a downgrade, or a release whose minimum is above the running version, is DOWNGRADE_REFUSED', () => {
    const older = manifest('0.0.9', '0.0.1');
    expect(refusal(() => checkRelease(signed(older, first, second), build, { trust })).code).toBe(
      'DOWNGRADE_REFUSED',
    );
    const jump = manifest('0.3.0', '0.2.0');
    expect(refusal(() => checkRelease(signed(jump, first, second), build, { trust })).message).toBe(
      `release 0.3.0 replaces 0.2.0 or later; this machine runs ${DAEMON_VERSION}`,
    );
    // Going back is allowed when asked for as a rollback, and only then.
    expect(checkRelease(signed(older, first, second), build, { trust, rollback: true }).step).toEqual({
      from: DAEMON_VERSION,
      to: '0.0.9',
      rollback: true,
    });
  });
});
