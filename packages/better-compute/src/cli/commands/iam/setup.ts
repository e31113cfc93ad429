/**
 * `iam setup [--meters]`: prints Better IAM's example policies (a GPU tenant, a platform operator,
 * a CI job), each a custom role and the bindings that use it, to adapt and apply with better-iam;
 * that changes nothing. With --meters it also creates, idempotently, the billing meters usage
 * exports count in (USAGE_METERS) in the configuration's embedded Better IAM. better-iam is
 * imported inside `run`, so help and completion never load it.
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
  summary: 'Print example IAM policies; with --meters, create the billing meters in Better IAM',
  description:
    'Each example is a custom role (or a built-in one) and the bindings that give it, written for a tenant. ' +
    'Nothing is created: adapt them and apply them with better-iam roles create and better-iam bindings create. ' +
    'With --meters, the billing meters usage exports count in (compute.gpu-seconds) are created in the ' +
    'configuration’s embedded Better IAM, each once: a second run creates nothing.',
  target: 'none',
  flags: {
    meters: {
      type: 'boolean',
      description:
        'Create the billing meters in the configuration’s Better IAM (after migrate); existing ones are left as they are',
    },
  },
  defaultFormat: 'json',
  tableRows: (result) =>
    (result as { policies?: Policy[] }).policies?.map((policy) => ({
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
    'better-compute iam setup --meters',
  ],
  async run({ flags, compute }) {
    const { iamSetupExamples } = await import('better-iam');
    if (!flags.meters) return { policies: iamSetupExamples() };
    const [{ USAGE_METERS }, { CliError }] = await Promise.all([
      import('@better-compute/core/methods'),
      import('../../errors.js'),
    ]);
    const instance = await compute();
    const iam = instance.embeddedIam;
    if (!iam)
      throw new CliError(
        'UNSUPPORTED',
        'this deployment’s Better IAM is not embedded, so iam setup cannot create its meters',
        {
          hint: `Create them in your Better IAM as defined here: ${USAGE_METERS.map((m) => `${m.name} (${m.unit}, ${m.aggregation} by ${m.dimensions.join(', ')})`).join('; ')}.`,
        },
      );
    const meters = USAGE_METERS.map((m) => ({ ...m, dimensions: [...m.dimensions] }));
    let ensured;
    try {
      ensured = await iam.ensureMeters(meters);
    } catch (error) {
      if (/iam\.meters|relation .* does not exist/.test(String((error as Error).message)))
        throw new CliError('INVALID_CONFIG', 'Better IAM has no meters table yet in this database', {
          hint: 'Apply the migrations first (better-compute migrate), then run this command again.',
        });
      throw error;
    }
    return { meters: meters.map((m) => m.name), ...ensured };
  },
});
