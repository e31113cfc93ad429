/** `pki renew-ca`: a new machine CA; the old one stays trusted until it expires. */
import { defineCommand } from '../../define.js';
import { bundlePath, keyRows, pkiFlag, secretOf } from './shared.js';

export default defineCommand({
  name: 'pki renew-ca',
  group: 'PKI',
  summary: 'Issue a new machine CA that overlaps the old one (both trusted until the old expires)',
  target: 'none',
  flags: {
    ...pkiFlag,
    days: {
      type: 'number',
      integer: true,
      min: 30,
      max: 7300,
      default: 3650,
      description: 'Days the new CA is valid',
    },
  },
  tableRows: keyRows,
  examples: ['better-compute pki renew-ca', 'better-compute pki renew-ca --query machineCas'],
  async run({ flags, io }) {
    const { renewMachineCa } = await import('../../../pki/rotation.js');
    const { summarizeBundle } = await import('../../../pki/summary.js');
    const { bundle } = await renewMachineCa(await bundlePath(io, flags.pki), secretOf(io), {
      validityDays: flags.days,
    });
    return summarizeBundle(bundle);
  },
});
