/**
 * `releases rotate-pins STATEMENT`: releases.rotatePins with a release-pin statement file (what
 * `release sign-pins` wrote). The deployment accepts it only when a threshold of the release keys it
 * holds now signed it and its epoch is the next; from then on it registers releases signed by the
 * new keys, and each node follows the statement at its next welcome, checking it itself. The file
 * is read and checked here first, so a malformed one is named before anything is sent.
 */
import { defineCommand } from '../../define.js';
import { readJsonFile } from '../files.js';

export default defineCommand({
  name: 'releases rotate-pins',
  group: 'Fleet',
  summary: 'Change the deployment’s release keys by a signed release-pin statement (releases.rotatePins)',
  description:
    'The statement must be signed by a threshold of the current release keys (release sign-pins) and carry the next epoch; the same statement again changes nothing.',
  target: 'token',
  calls: ['releases.rotatePins'],
  positionals: [
    { name: 'statement', description: 'The statement, as release sign-pins wrote it', required: true },
  ],
  examples: ['better-compute releases rotate-pins pins-1.json --tenant root'],
  async run({ args, api, io }) {
    const { readReleasePinStatement } = await import('@better-compute/core/release');
    const document = readReleasePinStatement(
      await readJsonFile(
        io,
        args.statement,
        'STATEMENT',
        256 * 1024,
        'Give the file "release sign-pins" wrote.',
      ),
      args.statement,
    );
    return (await api()).call('releases.rotatePins', {
      statement: document.statement,
      signatures: document.signatures,
    });
  },
});
