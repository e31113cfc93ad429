/**
 * Release manifests (`@better-compute/core/release`, issue 33): canonical bytes, versions, Ed25519
 * release keys named by the project's pin form, threshold verification over distinct pinned keys,
 * and the checks a machine makes before installing (artifact digest, version rule).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ComputeError } from '../src/errors.js';
import {
  addReleaseSignature,
  canonicalJson,
  checkArtifact,
  checkUpgrade,
  compareSemver,
  generateReleaseKey,
  parseSemver,
  readReleaseDocument,
  readReleaseKey,
  readReleaseTrust,
  releaseDigest,
  type ReleaseEnvelope,
  type ReleaseManifest,
  verifyRelease,
  verifyUpdate,
} from '../src/release/index.js';

const build = new TextEncoder().encode('#!/bin/sh\necho bcd 1.1.0\n');
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

const manifest: ReleaseManifest = {
  version: '1.1.0',
  artifacts: [
    {
      platform: 'linux-x64',
      size: build.length,
      sha256: sha(build),
      url: 'https://releases.example.com/bcd-1.1.0',
    },
    { platform: 'linux-arm64', size: 10, sha256: 'a'.repeat(64) },
  ],
  minimumVersion: '1.0.0',
  notes: 'Faster joins.\nFixes the heartbeat race.',
  createdAt: '2026-05-01T12:00:00.000Z',
};

function key() {
  const files = generateReleaseKey();
  return { ...readReleaseKey(files.privatePem, 'key.pem'), publicPem: files.publicPem };
}
const [a, b, c] = [key(), key(), key()];
const signed = (...keys: (typeof a)[]): ReleaseEnvelope =>
  keys.reduce((envelope, k) => addReleaseSignature(envelope, k), {
    manifest,
    signatures: [],
  } as ReleaseEnvelope);

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return error instanceof ComputeError ? error.code : `not a ComputeError: ${String(error)}`;
  }
  return undefined;
}

describe('canonical bytes and versions', () => {
  it('sorts keys, drops whitespace, keeps strings as JSON writes them', () => {
    expect(canonicalJson({ b: [1, { z: null, a: true }], a: 'é\n"' })).toBe(
      '{"a":"é\\n\\"","b":[1,{"a":true,"z":null}]}',
    );
    expect(() => canonicalJson({ x: 1.5 })).toThrow(RangeError);
    // Key order in the file does not change the digest.
    const { notes, ...rest } = manifest;
    const shuffled = JSON.parse(
      JSON.stringify({ notes, ...Object.fromEntries(Object.entries(rest).reverse()) }),
    ) as ReleaseManifest;
    expect(JSON.stringify(shuffled)).not.toBe(JSON.stringify(manifest));
    expect(releaseDigest(shuffled)).toBe(releaseDigest(manifest));
  });

  it('compares semantic versions by precedence', () => {
    const ordered = [
      '0.9.9',
      '1.0.0-alpha',
      '1.0.0-alpha.1',
      '1.0.0-alpha.beta',
      '1.0.0-beta.2',
      '1.0.0-beta.11',
      '1.0.0-rc.1',
      '1.0.0',
      '1.2.0',
      '1.10.0',
      '10.0.0',
    ];
    for (let i = 1; i < ordered.length; i++)
      expect(compareSemver(ordered[i - 1]!, ordered[i]!), ordered[i]).toBe(-1);
    expect(compareSemver('1.2.3', '1.2.3')).toBe(0);
    for (const bad of ['1.2', '01.2.3', '1.2.3+build.5', 'v1.2.3', '1.2.3-', ''])
      expect(parseSemver(bad), bad).toBeNull();
  });
});

describe('reading manifests and envelopes', () => {
  it('refuses an unknown field, at any depth, naming it', () => {
    expect(codeOf(() => readReleaseDocument({ ...manifest, channel: 'beta' }))).toBe('INVALID_ARGUMENT');
    expect(() =>
      readReleaseDocument(
        { manifest: { ...manifest, artifacts: [{ ...manifest.artifacts[0], arch: 'x' }] }, signatures: [] },
        'e.json',
      ),
    ).toThrow(
      /^e\.json is not a release envelope: envelope\.manifest\.artifacts\.0 has a field the format does not know: arch$/,
    );
  });

  it.each([
    ['a version that is not semver', { version: '1.1' }],
    ['a platform twice', { artifacts: [manifest.artifacts[0], manifest.artifacts[0]] }],
    ['no artifact', { artifacts: [] }],
    ['an upper-case digest', { artifacts: [{ ...manifest.artifacts[0], sha256: 'A'.repeat(64) }] }],
    [
      'a URL with credentials',
      { artifacts: [{ ...manifest.artifacts[0], url: 'https://u:p@example.com/x' }] },
    ],
    ['a NUL in the notes', { notes: 'a\u0000b' }],
    ['a time not in toISOString form', { createdAt: '2026-05-01T12:00:00Z' }],
  ])('refuses %s', (_, change) => {
    expect(codeOf(() => readReleaseDocument({ ...manifest, ...change }))).toBe('INVALID_ARGUMENT');
  });
});

describe('signatures and the threshold', () => {
  it('key ids are the project’s pin form', () => {
    expect(a.keyId).toMatch(/^sha256\/[A-Za-z0-9+/]{43}=$/);
    expect(readReleaseTrust([a.publicPem], undefined).pins[0]!.keyId).toBe(a.keyId);
  });

  it('2 of 2 pinned keys verify; one of them is RELEASE_UNVERIFIED', () => {
    const both = signed(a, b);
    expect(verifyRelease(both, { pins: [a.keyId, b.keyId], threshold: 2 })).toMatchObject({
      signers: [a.keyId, b.keyId],
      threshold: 2,
      digest: releaseDigest(manifest),
    });
    expect(codeOf(() => verifyRelease(signed(a), { pins: [a.keyId, b.keyId], threshold: 2 }))).toBe(
      'RELEASE_UNVERIFIED',
    );
    // The default threshold is every pin.
    expect(codeOf(() => verifyRelease(signed(a), { pins: [a.keyId, b.keyId] }))).toBe('RELEASE_UNVERIFIED');
    expect(verifyRelease(signed(a), { pins: [a.keyId, b.keyId], threshold: 1 }).signers).toEqual([a.keyId]);
  });

  it('a key counts once, and keys nobody pinned count for nothing', () => {
    const once = signed(a);
    const twice = { ...once, signatures: [once.signatures[0]!, once.signatures[0]!] };
    expect(codeOf(() => verifyRelease(twice, { pins: [a.keyId, b.keyId], threshold: 2 }))).toBe(
      'RELEASE_UNVERIFIED',
    );
    expect(codeOf(() => verifyRelease(signed(a, c), { pins: [a.keyId, b.keyId], threshold: 2 }))).toBe(
      'RELEASE_UNVERIFIED',
    );
    expect(verifyRelease(signed(c, a), { pins: [a.keyId], threshold: 1 }).signers).toEqual([a.keyId]);
  });

  it('a manifest changed after signing is refused, whatever the change', () => {
    const both = signed(a, b);
    for (const manifestChange of [
      { version: '1.1.1' },
      { minimumVersion: '0.1.0' },
      { artifacts: [{ ...manifest.artifacts[0]!, sha256: 'b'.repeat(64) }, manifest.artifacts[1]!] },
      { notes: `${manifest.notes} ` },
    ]) {
      const tampered = { ...both, manifest: { ...manifest, ...manifestChange } };
      expect(codeOf(() => verifyRelease(tampered, { pins: [a.keyId, b.keyId], threshold: 1 }))).toBe(
        'RELEASE_UNVERIFIED',
      );
      // And nobody can add a signature to it.
      expect(codeOf(() => addReleaseSignature(tampered, c))).toBe('RELEASE_UNVERIFIED');
    }
  });

  it('a signature carrying another key than its id names is refused; a pinned public key is used as pinned', () => {
    const one = signed(a);
    const swapped = {
      ...one,
      signatures: [{ ...one.signatures[0]!, publicKey: signed(b).signatures[0]!.publicKey }],
    };
    expect(codeOf(() => verifyRelease(swapped, { pins: [a.keyId], threshold: 1 }))).toBe(
      'RELEASE_UNVERIFIED',
    );
    // Pinned by its public half, the key verifies whatever key the entry carries.
    expect(verifyRelease(swapped, { pins: [a.publicPem], threshold: 1 }).signers).toEqual([a.keyId]);
  });

  it('a key that already signed is ALREADY_EXISTS; pins and thresholds are checked', () => {
    expect(codeOf(() => addReleaseSignature(signed(a), a))).toBe('ALREADY_EXISTS');
    expect(codeOf(() => readReleaseTrust([], 1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => readReleaseTrust([a.keyId, a.keyId], 1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => readReleaseTrust([a.keyId], 2))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => readReleaseTrust(['sha256/nope'], 1, 'INVALID_CONFIG'))).toBe('INVALID_CONFIG');
    expect(codeOf(() => verifyRelease({ manifest, signatures: [] }, { pins: [a.keyId] }))).toBe(
      'RELEASE_UNVERIFIED',
    );
  });
});

describe('the checks before installing', () => {
  it('the artifact must be the manifest’s for the platform, by size and SHA-256', () => {
    expect(checkArtifact(manifest, 'linux-x64', build).sha256).toBe(sha(build));
    expect(checkArtifact(manifest, 'linux-x64', { sha256: sha(build), size: build.length }).platform).toBe(
      'linux-x64',
    );
    const tampered = new Uint8Array(build);
    tampered[3] = tampered[3]! ^ 1;
    expect(codeOf(() => checkArtifact(manifest, 'linux-x64', tampered))).toBe('DIGEST_MISMATCH');
    expect(codeOf(() => checkArtifact(manifest, 'linux-x64', build.subarray(1)))).toBe('DIGEST_MISMATCH');
    expect(codeOf(() => checkArtifact(manifest, 'darwin-arm64', build))).toBe('NOT_FOUND');
  });

  it('upgrades only from minimumVersion on, and goes back only as a rollback', () => {
    expect(checkUpgrade('1.0.0', manifest)).toEqual({ from: '1.0.0', to: '1.1.0', rollback: false });
    expect(codeOf(() => checkUpgrade('0.9.0', manifest))).toBe('DOWNGRADE_REFUSED');
    expect(codeOf(() => checkUpgrade('0.9.0', manifest, { rollback: true }))).toBe('DOWNGRADE_REFUSED');
    expect(codeOf(() => checkUpgrade('1.1.0', manifest))).toBe('DOWNGRADE_REFUSED');
    expect(codeOf(() => checkUpgrade('1.2.0', manifest))).toBe('DOWNGRADE_REFUSED');
    expect(checkUpgrade('1.2.0', manifest, { rollback: true })).toEqual({
      from: '1.2.0',
      to: '1.1.0',
      rollback: true,
    });
    expect(checkUpgrade('1.1.0-rc.1', manifest).to).toBe('1.1.0');
  });

  it('verifyUpdate checks signatures, the version rule and the bytes, each with its own code', () => {
    const trust = { pins: [a.keyId, b.keyId], threshold: 2 };
    const check = { ...trust, platform: 'linux-x64', current: '1.0.0', artifact: build };
    expect(verifyUpdate(signed(a, b), check).artifact.platform).toBe('linux-x64');
    expect(codeOf(() => verifyUpdate(signed(a), check))).toBe('RELEASE_UNVERIFIED');
    expect(codeOf(() => verifyUpdate(signed(a, b), { ...check, current: '0.5.0' }))).toBe(
      'DOWNGRADE_REFUSED',
    );
    expect(codeOf(() => verifyUpdate(signed(a, b), { ...check, artifact: build.subarray(2) }))).toBe(
      'DIGEST_MISMATCH',
    );
  });
});
