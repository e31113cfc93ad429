/**
 * `release cosign --key K ENVELOPE [--out F]`: a further signature on an envelope by another
 * release key, so a threshold of keys can be required. The envelope's signatures are checked first
 * (a manifest changed after signing is RELEASE_UNVERIFIED); a key that already signed is
 * ALREADY_EXISTS.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { deliverEnvelope, keyFlag, outFlag, readReleaseFile, readReleaseKeyFile } from './shared.js';

export default defineCommand({
  name: 'release cosign',
  group: 'Fleet',
  summary: 'Add another release key’s signature to a signed envelope',
  description: 'Each key signs once; a deployment counts distinct pinned keys against its threshold.',
  target: 'none',
  positionals: [{ name: 'envelope', description: 'The envelope "release sign" wrote', required: true }],
  flags: { key: keyFlag, out: outFlag },
  examples: ['better-compute release cosign --key second.pem envelope.json --out envelope2.json'],
  async run({ args, flags, io }) {
    const { addReleaseSignature } = await import('@better-compute/core/release');
    const key = await readReleaseKeyFile(io, flags.key);
    const document = await readReleaseFile(io, args.envelope, 'ENVELOPE');
    if (document.signatures.length === 0)
      throw new CliError('INVALID_ARGUMENT', `${args.envelope} is a manifest no key has signed yet`, {
        hint: `Sign it first: better-compute release sign --key KEY ${args.envelope} --out envelope.json`,
        details: { field: 'envelope' },
      });
    return deliverEnvelope(io, addReleaseSignature(document, key), key.keyId, flags.out);
  },
});
