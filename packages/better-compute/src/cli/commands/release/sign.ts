/**
 * `release sign --key K FILE [--out F]`: adds this key's signature to a manifest (or to an
 * envelope), after checking the signatures it already carries, and prints the envelope or writes
 * it to a new `--out` file. Offline: no configuration, no server.
 */
import { defineCommand } from '../../define.js';
import { deliverEnvelope, keyFlag, outFlag, readReleaseFile, readReleaseKeyFile } from './shared.js';

export default defineCommand({
  name: 'release sign',
  group: 'Fleet',
  summary: 'Sign a bcd release manifest with a release key; print or write the signed envelope',
  description:
    'FILE is a bare manifest or an envelope; the signature covers the manifest’s canonical JSON (see the releases page of the docs).',
  target: 'none',
  positionals: [{ name: 'manifest', description: 'The manifest (or envelope) file to sign', required: true }],
  flags: { key: keyFlag, out: outFlag },
  examples: [
    'better-compute release sign --key release.pem manifest.json --out envelope.json',
    'better-compute release sign --key release.pem manifest.json > envelope.json',
  ],
  async run({ args, flags, io }) {
    const { addReleaseSignature } = await import('@better-compute/core/release');
    const key = await readReleaseKeyFile(io, flags.key);
    const document = await readReleaseFile(io, args.manifest, 'MANIFEST');
    return deliverEnvelope(io, addReleaseSignature(document, key), key.keyId, flags.out);
  },
});
