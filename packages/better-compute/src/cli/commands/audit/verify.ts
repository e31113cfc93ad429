/**
 * `audit verify --tenant T [--pin P]`: recomputes every checkpoint of a tenant's audit log from
 * the rows (every leaf, root, signature, and the consistency of each checkpoint with the one
 * before) and prints the report; AUDIT_TAMPERED when it found any problem.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import { pinFlag, pkiFlag, tenantFlag } from './flags.js';

export default defineCommand({
  name: 'audit verify',
  group: 'Audit',
  summary: 'Recompute every checkpoint of a tenant’s audit log; AUDIT_TAMPERED on any problem',
  target: 'config',
  flags: { tenant: tenantFlag, pin: pinFlag, pki: pkiFlag },
  tableRows: (result) => (result as { problems: unknown[] }).problems,
  examples: [
    'better-compute audit verify --tenant acme',
    'better-compute audit verify --tenant acme --query problems',
    'BETTER_COMPUTE_AUDIT_PIN=sha256/… better-compute audit verify --tenant acme',
  ],
  async run({ flags, compute, io, print }) {
    const instance = await compute();
    const { resolveAuditPin } = await import('../../../audit/keys.js');
    const { verifyAuditLog } = await import('../../../audit/verify.js');
    const pin = await resolveAuditPin({
      cwd: io.cwd,
      pin: flags.pin,
      env: io.env,
      pki: flags.pki ?? instance.config.pki,
    });
    const report = await verifyAuditLog(instance.database.db as never, { tenantId: flags.tenant, pin });
    print(report);
    if (!report.ok) {
      const kinds = [...new Set(report.problems.map((p) => p.kind))];
      throw new ComputeError(
        'AUDIT_TAMPERED',
        `tenant ${flags.tenant}'s audit log has ${report.problems.length} problem(s): ${kinds.join(', ')}`,
        {
          hint: 'The report above names each checkpoint and entry; restore them from a backup and keep the proofs.',
          details: { problems: report.problems.length, kinds },
        },
      );
    }
    return undefined;
  },
});
