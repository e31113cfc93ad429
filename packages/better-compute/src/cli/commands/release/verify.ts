/**
 * `release verify --pin KEYID [--pin …] [--threshold N] ENVELOPE`: checks an envelope offline, as a
 * deployment and a daemon do: the distinct pinned keys whose signatures verify over the manifest
 * must reach the threshold (default: every pin). RELEASE_UNVERIFIED says what was found.
 */
import { defineCommand } from '../../define.js';
import { readReleaseFile } from './shared.js';

export default defineCommand({
  name: 'release verify',
  group: 'Fleet',
  summary: 'Verify a signed release envelope against pinned key ids and a threshold, offline',
  target: 'none',
  positionals: [{ name: 'envelope', description: 'The signed envelope', required: true }],
  flags: {
    pin: {
      type: 'string',
      repeated: true,
      required: true,
      description: 'A release key id (sha256/…, as release keygen prints it) or public key that may sign',
      placeholder: 'KEYID',
    },
    threshold: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'How many distinct pinned keys must have signed (default: every pin)',
      placeholder: 'N',
    },
  },
  examples: ['better-compute release verify --pin sha256/… --pin sha256/… --threshold 2 envelope.json'],
  async run({ args, flags, io }) {
    const { readReleaseTrust, verifyRelease } = await import('@better-compute/core/release');
    const trust = readReleaseTrust(flags.pin, flags.threshold, 'INVALID_ARGUMENT', '--pin');
    const envelope = await readReleaseFile(io, args.envelope, 'ENVELOPE');
    const release = verifyRelease(envelope, { pins: trust });
    return {
      verified: true,
      version: release.manifest.version,
      minimumVersion: release.manifest.minimumVersion,
      digest: release.digest,
      signers: release.signers,
      threshold: release.threshold,
      artifacts: release.manifest.artifacts,
    };
  },
});
