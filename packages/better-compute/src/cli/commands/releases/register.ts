/**
 * `releases register ENVELOPE`: releases.register with a signed envelope file (what `release sign`
 * and `release cosign` wrote). The server accepts it only when a threshold of the deployment's
 * pinned release keys signed it; the file is read and checked here first, so a malformed one is
 * named before anything is sent.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { readReleaseFile } from '../release/shared.js';

export default defineCommand({
  name: 'releases register',
  group: 'Fleet',
  summary: 'Register a signed bcd release with the deployment (releases.register)',
  description:
    'The deployment accepts it only when a threshold of the release keys its configuration pins signed the manifest; the same manifest again changes nothing.',
  target: 'token',
  calls: ['releases.register'],
  positionals: [
    {
      name: 'envelope',
      description: 'The signed envelope, as release sign or cosign wrote it',
      required: true,
    },
  ],
  examples: ['better-compute releases register envelope.json --tenant root'],
  async run({ args, api, io }) {
    const envelope = await readReleaseFile(io, args.envelope, 'ENVELOPE');
    if (envelope.signatures.length === 0)
      throw new CliError('INVALID_ARGUMENT', `${args.envelope} is a manifest no key has signed`, {
        hint: `Sign it first: better-compute release sign --key KEY ${args.envelope} --out envelope.json`,
        details: { field: 'envelope' },
      });
    return (await api()).call('releases.register', {
      manifest: envelope.manifest,
      signatures: envelope.signatures,
    });
  },
});
