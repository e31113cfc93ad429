/** `profiles validate --file PATH`: profiles.validate, a document checked without storing it. */
import { defineCommand } from '../../define.js';
import { fileFlag, readProfileDocument } from './shared.js';

export default defineCommand({
  name: 'profiles validate',
  group: 'Nodes',
  summary:
    'Check a provision profile document without storing it: its fields, and that its pool, image and join token secret are yours (profiles.validate)',
  description:
    'A field that is wrong is named by its path (document.disk.partitions.1.mount); an unknown field is refused. ' +
    'The answer names the pool, image and secret the document resolved to, and the stored profile of the same name, if any.',
  target: 'token',
  calls: ['profiles.validate'],
  flags: { file: fileFlag },
  examples: [
    'better-compute profiles validate --file gpu-worker.json',
    'cat gpu-worker.json | better-compute profiles validate --file -',
  ],
  async run({ flags, io, api, commandName }) {
    const document = await readProfileDocument(io, commandName, flags.file);
    return (await api()).call('profiles.validate', { document: document as never });
  },
});
