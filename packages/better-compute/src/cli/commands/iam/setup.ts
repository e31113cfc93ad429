/**
 * `iam setup`: prints Better IAM's example policies (a GPU tenant, a platform operator, a CI job),
 * each a custom role and the bindings that use it, to adapt and apply with better-iam. It changes
 * nothing. better-iam is imported inside `run`, so help and completion never load it.
 */
import { defineCommand } from '../../define.js';

interface Policy {
  name: string;
  summary: string;
  tenantId: string;
  role: { name: string; actions: string[] } | null;
  bindings: { role: string }[];
}

export default defineCommand({
  name: 'iam setup',
  group: 'Operate',
  summary: 'Print example IAM policies: a GPU tenant, a platform operator and a CI job',
  description:
    'Each example is a custom role (or a built-in one) and the bindings that give it, written for a tenant. ' +
    'Nothing is created: adapt them and apply them with better-iam roles create and better-iam bindings create.',
  target: 'none',
  defaultFormat: 'json',
  tableRows: (result) =>
    (result as { policies: Policy[] }).policies.map((policy) => ({
      name: policy.name,
      tenant: policy.tenantId,
      role: policy.role?.name ?? '(built-in)',
      actions: policy.role?.actions.length ?? 0,
      bindings: policy.bindings.map((binding) => binding.role).join(', '),
      summary: policy.summary,
    })),
  examples: [
    'better-compute iam setup',
    'better-compute iam setup --format table',
    'better-compute iam setup --query policies[].name',
  ],
  async run() {
    const { iamSetupExamples } = await import('better-iam');
    return { policies: iamSetupExamples() };
  },
});
