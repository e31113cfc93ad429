/** `profiles update PROFILE --file PATH [--if-version N]`: profiles.update, a new version of the document. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { fileFlag, profileNamed, profilePositional, readProfileDocument } from './shared.js';

export default defineCommand({
  name: 'profiles update',
  group: 'Nodes',
  summary: 'Replace a provision profile’s document, as its next version (profiles.update)',
  target: 'token',
  calls: ['profiles.update'],
  positionals: [profilePositional],
  flags: { file: fileFlag, ifVersion: ifVersionFlag },
  examples: ['better-compute profiles update gpu-worker --file gpu-worker.json --if-version 3'],
  async run({ args, flags, io, api, commandName }) {
    const document = await readProfileDocument(io, commandName, flags.file);
    return (await api()).call(
      'profiles.update',
      defined({ ...profileNamed(args.profile), document: document as never, ifVersion: flags.ifVersion }),
    );
  },
});
