/** `doctor [--strict]`: the deployment's health checks; --strict fails on any warning or error. */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import type { DoctorReport } from '../../../types.js';

export default defineCommand({
  name: 'doctor',
  group: 'Operate',
  summary: 'Check the database, schema, clock, method registry, IAM wiring and the PKI bundle',
  target: 'config',
  flags: {
    strict: { type: 'boolean', description: 'Fail with DOCTOR_FINDINGS on any warning or error' },
    pki: {
      type: 'string',
      description:
        "The PKI bundle to check (default: the configuration's pki, else BETTER_COMPUTE_PKI, else .better-compute/pki.json)",
      placeholder: 'PATH',
    },
  },
  // A report, not a list page: indented JSON by default, as the guide has it; a table on request.
  tableRows: (result) => (result as DoctorReport).findings,
  examples: [
    'better-compute doctor',
    'better-compute doctor --format table',
    'better-compute doctor --strict --query findings[].check',
  ],
  async run({ compute, flags, print, io }) {
    const instance = await compute();
    const { resolvePkiPath } = await import('../../../pki/bundle.js');
    const report = await instance.doctor({
      pkiPath: resolvePkiPath(io.cwd, flags.pki ?? instance.config.pki),
    });
    print(report);
    const findings = report.findings.filter((finding) => finding.severity !== 'ok');
    if (flags.strict && findings.length > 0) {
      throw new ComputeError(
        'DOCTOR_FINDINGS',
        `${findings.length} finding(s): ${findings.map((f) => `${f.check} (${f.severity})`).join(', ')}`,
        {
          details: { checks: findings.map((f) => f.check) },
        },
      );
    }
    return undefined;
  },
});
