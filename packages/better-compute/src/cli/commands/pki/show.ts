/** `pki show`: the bundle's pins, algorithms and expiries; never a private key. */
import { defineCommand } from '../../define.js';
import { bundlePath, keyRows, pkiFlag } from './shared.js';

export default defineCommand({
  name: 'pki show',
  group: 'PKI',
  summary: 'Show the PKI bundle’s keys, pins and expiries (public material only)',
  target: 'none',
  flags: { ...pkiFlag },
  tableRows: keyRows,
  examples: [
    'better-compute pki show',
    'better-compute pki show --format table',
    'better-compute pki show --query auditPin',
    'better-compute pki show --query sshCas[].sshPublicKey',
  ],
  async run({ flags, io }) {
    const { readPkiBundle } = await import('../../../pki/bundle.js');
    const { summarizeBundle } = await import('../../../pki/summary.js');
    return summarizeBundle(await readPkiBundle(await bundlePath(io, flags.pki)));
  },
});
