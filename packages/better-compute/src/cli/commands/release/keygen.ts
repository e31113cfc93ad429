/**
 * `release keygen --out PATH`: a new Ed25519 release key in PATH (PKCS#8 PEM, mode 0600, never
 * written over) and its public half in PATH.pub; prints the key id deployments pin (release.pins)
 * and `release verify --pin` takes.
 */
import { defineCommand } from '../../define.js';
import { claimKeyFiles } from '../files.js';

export default defineCommand({
  name: 'release keygen',
  group: 'Fleet',
  summary: 'Make an Ed25519 release key (mode 0600, never written over) and PATH.pub; print its key id',
  description:
    'Keep each release key offline with the person who signs with it; deployments pin the key ids and a threshold in their configuration (release: { pins, threshold }).',
  target: 'none',
  flags: {
    out: {
      type: 'string',
      required: true,
      description:
        'A new file for the private key (mode 0600, never written over); the public key goes to PATH.pub',
      placeholder: 'PATH',
    },
  },
  examples: ['better-compute release keygen --out ~/.better-compute/release.pem'],
  async run({ flags, io }) {
    const { generateReleaseKey } = await import('@better-compute/core/release');
    const files = await claimKeyFiles(io, flags.out, 'a release key is never written over');
    const key = await files.fill(generateReleaseKey);
    return { keyId: key.keyId, ...files.paths };
  },
});
