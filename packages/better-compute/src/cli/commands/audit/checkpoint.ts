/**
 * `audit checkpoint [--tenant T]`: seals the audit log now, as the hourly job does: the entries
 * since each tenant's last checkpoint join its Merkle tree under a checkpoint signed with the
 * bundle's audit key (unsealed with BETTER_COMPUTE_SECRET).
 */
import { defineCommand } from '../../define.js';
import { pkiFlag } from './flags.js';

export default defineCommand({
  name: 'audit checkpoint',
  group: 'Audit',
  summary: 'Seal the audit log now: sign a checkpoint of every tenant’s new entries',
  target: 'config',
  flags: {
    tenant: {
      type: 'string',
      description: 'Seal only this tenant’s log (default: every tenant with new entries)',
      placeholder: 'TENANT',
    },
    pki: pkiFlag,
  },
  examples: ['better-compute audit checkpoint', 'better-compute audit checkpoint --tenant acme'],
  async run({ flags, compute, io }) {
    const instance = await compute();
    const { loadAuditSigner } = await import('../../../audit/keys.js');
    const { sealAuditLog } = await import('../../../audit/seal.js');
    const signer = await loadAuditSigner({
      cwd: io.cwd,
      pki: flags.pki ?? instance.config.pki,
      secret: instance.config.secret,
    });
    const { checkpoints } = await sealAuditLog(instance.database.db as never, {
      key: signer.key,
      deployment: signer.deployment,
      tenantId: flags.tenant,
    });
    return {
      sealed: checkpoints.reduce((sum, c) => sum + c.added, 0),
      pin: signer.pin,
      checkpoints,
    };
  },
});
