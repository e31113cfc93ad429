/**
 * `audit prove aud_… --tenant T --out FILE [--consistency-from SIZE]`: writes a NEW file (0600,
 * never over an existing one) with the entry, its leaf index, its inclusion proof and the
 * tenant's latest signed checkpoint; with --consistency-from, also the proof that the checkpoint
 * of that size is a prefix of it. `audit check-proof` checks the file offline.
 */
import { defineCommand } from '../../define.js';
import { createOutFile } from '../shared.js';
import { tenantFlag } from './flags.js';

export default defineCommand({
  name: 'audit prove',
  group: 'Audit',
  summary: 'Write the proof that an audit entry is in its tenant’s signed log to a new file',
  target: 'config',
  positionals: [{ name: 'entry', description: 'The audit entry id', required: true, kind: 'audit' }],
  flags: {
    tenant: tenantFlag,
    out: {
      type: 'string',
      required: true,
      description: 'A new file to write (mode 0600)',
      placeholder: 'FILE',
    },
    consistencyFrom: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Add the proof that the checkpoint of this tree size is a prefix of the latest',
      placeholder: 'SIZE',
    },
    trusted: {
      type: 'string',
      description:
        'Add consistency proofs from the checkpoints in this file (kept by the reader) to the latest, for check-proof --trusted',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute audit prove aud_01k… --tenant acme --out proof.json',
    'better-compute audit prove aud_01k… --tenant acme --out proof.json --consistency-from 120',
    'better-compute audit prove aud_01k… --tenant acme --out proof.json --trusted kept.note',
  ],
  async run({ args, flags, compute, io }) {
    const { readTrustedFile, trustedSizes } = await import('../../../audit/trusted.js');
    const trustedSizesWanted = flags.trusted
      ? trustedSizes(await readTrustedFile(io.cwd, flags.trusted), flags.trusted)
      : undefined;
    const file = await createOutFile(io.cwd, flags.out, 'audit prove never writes over a file');
    try {
      const instance = await compute();
      const { proveEntry } = await import('../../../audit/prove.js');
      const proof = await proveEntry(instance.database.db as never, {
        tenantId: flags.tenant,
        entryId: args.entry,
        consistencyFrom: flags.consistencyFrom,
        trustedSizes: trustedSizesWanted,
      });
      await file.write(`${JSON.stringify(proof, null, 2)}\n`);
      return {
        out: file.path,
        entryId: proof.entry.id,
        leafIndex: proof.leafIndex,
        treeSize: proof.treeSize,
        ...(proof.consistency ? { consistencyFrom: proof.consistency.fromSize } : {}),
        ...(proof.ancestors ? { ancestors: proof.ancestors.map((a) => a.size) } : {}),
      };
    } catch (error) {
      await file.discard();
      throw error;
    }
  },
});
