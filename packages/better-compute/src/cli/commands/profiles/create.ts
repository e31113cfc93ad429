/** `profiles create --file PATH [--key K]`: profiles.create from a JSON document. */
import { defineCommand } from '../../define.js';
import { keyFlag, withIdempotencyKey } from '../shared.js';
import { fileFlag, readProfileDocument } from './shared.js';

export default defineCommand({
  name: 'profiles create',
  group: 'Nodes',
  summary: 'Store a provision profile from a JSON document (profiles.create)',
  description:
    'The document names the disk layout, the image, cloud-init user data, packages, SSH keys, the pool and labels of the ' +
    'node, and the join token as a secret reference (secret://TENANT/sec_…), never its value. See docs/profiles.md.',
  target: 'token',
  calls: ['profiles.create'],
  flags: { file: fileFlag, key: keyFlag },
  examples: ['better-compute profiles create --file gpu-worker.json'],
  async run(context) {
    const { flags, io, api, commandName } = context;
    const document = await readProfileDocument(io, commandName, flags.file);
    const client = await api();
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('profiles.create', { document: document as never, idempotencyKey }),
    );
  },
});
