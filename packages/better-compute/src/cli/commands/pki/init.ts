/** `pki init`: a new PKI bundle, every key sealed with BETTER_COMPUTE_SECRET. */
import { defineCommand } from '../../define.js';
import { bundlePath, keyRows, pkiFlag, secretOf } from './shared.js';

export default defineCommand({
  name: 'pki init',
  group: 'PKI',
  summary: 'Create the PKI bundle: machine CA, command root, exec ticket key, SSH CAs and audit key',
  description:
    'Private keys are sealed with AES-256-GCM under a key derived from BETTER_COMPUTE_SECRET (scrypt); ' +
    'the file is written with mode 0600 and never over an existing bundle unless --force.',
  target: 'none',
  flags: {
    ...pkiFlag,
    trustDomain: {
      type: 'string',
      description: 'The deployment’s name in certificates and statements (default better-compute.local)',
      placeholder: 'NAME',
    },
    force: { type: 'boolean', description: 'Replace an existing bundle (its keys are lost)' },
  },
  tableRows: keyRows,
  examples: [
    'BETTER_COMPUTE_SECRET=… better-compute pki init --trust-domain compute.example.com',
    'better-compute pki init --pki /etc/better-compute/pki.json',
  ],
  async run({ flags, io }) {
    const { createPkiBundle } = await import('../../../pki/create.js');
    const { summarizeBundle } = await import('../../../pki/summary.js');
    const bundle = await createPkiBundle({
      path: await bundlePath(io, flags.pki),
      secret: secretOf(io),
      trustDomain: flags.trustDomain,
      force: flags.force,
    });
    return summarizeBundle(bundle);
  },
});
