/**
 * `audit verify --tenant T [--pin P]`: recomputes every checkpoint of a tenant's audit log from
 * the rows (every leaf, root, signature, and the consistency of each checkpoint with the one
 * before) and prints the report; AUDIT_TAMPERED when it found any problem. A log with nothing to
 * verify never passes for a verified one (issue 31): a tenant that Better IAM does not know and
 * that has no entry is NOT_FOUND, an empty log NOT_FOUND after its report, and entries that no
 * checkpoint seals yet INVALID_STATE after it (docs/decisions/audit-verify-nothing.md).
 */
import { ComputeError, isTenantId } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { minWitnessesFlag, pinFlag, pkiFlag, tenantFlag, trustedFlag, witnessFlag } from './flags.js';
import { witnessesWanted } from './witness-flags.js';

export default defineCommand({
  name: 'audit verify',
  group: 'Audit',
  summary: 'Recompute every checkpoint of a tenant’s audit log; AUDIT_TAMPERED on any problem',
  target: 'config',
  flags: {
    tenant: tenantFlag,
    pin: pinFlag,
    pki: pkiFlag,
    trusted: trustedFlag,
    witness: witnessFlag,
    minWitnesses: minWitnessesFlag,
  },
  tableRows: (result) => (result as { problems: unknown[] }).problems,
  examples: [
    'better-compute audit verify --tenant acme',
    'better-compute audit verify --tenant acme --query problems',
    'BETTER_COMPUTE_AUDIT_PIN=sha256/… better-compute audit verify --tenant acme',
    'better-compute audit verify --tenant acme --trusted kept.note',
    'better-compute audit verify --tenant acme --trusted cosigned.note --witness w1.example+1a2b3c4d+… --min-witnesses 1',
  ],
  async run({ flags, compute, io, print }) {
    const tenant = flags.tenant;
    if (!isTenantId(tenant))
      throw new CliError('INVALID_ARGUMENT', `--tenant must be a tenant id such as acme (got "${tenant}")`, {
        hint: 'Pass the tenant whose audit log to verify, such as --tenant acme.',
        details: { field: 'tenant' },
      });
    // Usage first: the witness flags need the cosigned checkpoints, before anything is read.
    const witnesses = await witnessesWanted(flags);
    const { readTrustedFile, witnessReport, witnessRefusal } = await import('../../../audit/trusted.js');
    const trusted = flags.trusted
      ? { inputs: await readTrustedFile(io.cwd, flags.trusted), file: flags.trusted }
      : undefined;
    const instance = await compute();
    const { resolveAuditPin } = await import('../../../audit/keys.js');
    const { verifyAuditLog } = await import('../../../audit/verify.js');
    const pin = await resolveAuditPin({
      cwd: io.cwd,
      pin: flags.pin,
      env: io.env,
      pki: flags.pki ?? instance.config.pki,
    });
    const report = await verifyAuditLog(instance.database.db as never, { tenantId: tenant, pin, trusted });
    // Nothing in the log, and IAM knows no such tenant: a mistyped --tenant, said as such. When IAM
    // cannot answer, the empty log is reported as one, never as a tenant that does not exist.
    if (report.nothingToVerify === 'empty' && report.problems.length === 0) {
      const state = await instance.iam.tenantState(tenant).catch(() => undefined);
      if (state === null)
        throw new ComputeError(
          'NOT_FOUND',
          `no tenant ${tenant}: Better IAM knows none, and no audit entry names it`,
          {
            hint: 'Check --tenant: it is the id of a tenant in Better IAM, such as acme.',
            details: { tenant },
          },
        );
    }
    const witnessed =
      witnesses && trusted
        ? witnessReport(
            trusted.inputs.map((input, i) => ({
              size: report.trusted![i]!.size,
              rootHash: report.trusted![i]!.rootHash,
              note: input.note,
            })),
            witnesses.verifiers,
            witnesses.min,
          )
        : undefined;
    print(witnessed ? { ...report, witnesses: witnessed } : report);
    // A kept checkpoint the log no longer extends is named in the message itself: it is the evidence.
    const lost = report.problems.find((p) => p.kind === 'not_an_ancestor');
    if (lost) {
      throw new ComputeError(
        'AUDIT_TAMPERED',
        `tenant ${tenant}'s audit log was shortened or rewritten: ${lost.message}`,
        {
          hint: 'Keep the checkpoint file: it is signed by the audit key, and the log no longer extends it.',
          details: { problems: report.problems.length, checkpoint: lost.checkpoint },
        },
      );
    }
    if (report.problems.length > 0) {
      const kinds = [...new Set(report.problems.map((p) => p.kind))];
      throw new ComputeError(
        'AUDIT_TAMPERED',
        `tenant ${tenant}'s audit log has ${report.problems.length} problem(s): ${kinds.join(', ')}`,
        {
          hint: 'The report above names each checkpoint and entry; restore them from a backup and keep the proofs.',
          details: { problems: report.problems.length, kinds },
        },
      );
    }
    const refusal = witnessed && witnessRefusal(witnessed, witnesses!.verifiers.length);
    if (refusal) throw refusal;
    if (report.nothingToVerify === 'empty')
      throw new ComputeError('NOT_FOUND', `tenant ${tenant} has no audit entry: there is nothing to verify`, {
        hint: "A tenant's log starts with its first audited call; verify it once a checkpoint has sealed that.",
        details: { tenant, nothingToVerify: 'empty' },
      });
    if (report.nothingToVerify === 'unsealed')
      throw new ComputeError(
        'INVALID_STATE',
        `tenant ${tenant}'s ${report.unsealed} audit entr${report.unsealed === 1 ? 'y is' : 'ies are'} not sealed by any checkpoint yet: nothing was verified`,
        {
          hint: `Seal them now with "better-compute audit checkpoint --tenant ${tenant}" (the controllers role does it every hour), then verify again.`,
          details: { tenant, nothingToVerify: 'unsealed', unsealed: report.unsealed },
        },
      );
    return undefined;
  },
});
