/**
 * `batch show --batch ID [--scope-out FILE]`: the batch with its verified scope. Its leaves are
 * paged to the end and its root and size recomputed from them before anything is printed
 * (SCOPE_MISMATCH, INVALID_RESPONSE: verified-batch.ts). `--scope-out` writes the scope file that
 * `batch sign` reads on an offline machine, never over an existing file.
 */
import { defineCommand } from '../../define.js';
import { createOutFile } from '../shared.js';
import { readVerifiedBatch } from './verified-batch.js';

export default defineCommand({
  name: 'batch show',
  group: 'Batches',
  summary:
    'Show a batch with its scope, its root recomputed from the leaves; --scope-out writes the input of "batch sign"',
  target: 'token',
  calls: ['commandBatches.get', 'commandBatches.scope'],
  flags: {
    batch: { type: 'id', kind: 'batch', required: true, description: 'The batch to show', placeholder: 'ID' },
    scopeOut: {
      type: 'string',
      description: 'Write the verified scope to this new file, for "batch sign" on an offline machine',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute batch show --tenant acme --batch batch_01k5w…',
    'better-compute batch show --tenant acme --batch batch_01k5w… --scope-out batch.json',
  ],
  async run({ flags, io, log, api }) {
    // Claimed before any call, so a taken name costs nothing and a failed review leaves no file.
    const file =
      flags.scopeOut === undefined
        ? undefined
        : await createOutFile(io.cwd, flags.scopeOut, 'a scope file is never written over', '--scope-out');
    try {
      const verified = await readVerifiedBatch(await api(), flags.batch);
      const { scope } = verified;
      log(`Verified: the ${scope.size} leaves give root ${scope.root}.`);
      if (!file) return { ...verified.batch, leaves: scope.leaves };
      await file.write(`${JSON.stringify(scope, null, 2)}\n`);
      return { out: file.path, batchId: scope.batchId, root: scope.root, size: scope.size };
    } catch (error) {
      await file?.discard();
      throw error;
    }
  },
});
