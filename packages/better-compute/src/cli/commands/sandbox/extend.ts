/** `sandbox extend SANDBOX --by D | --until TIME`: sandboxes.extend, never past the template's maximum. */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';

export default defineCommand({
  name: 'sandbox extend',
  group: 'Sandboxes',
  summary: 'Lengthen a sandbox’s lifetime, up to its template’s maximum (sandboxes.extend)',
  target: 'token',
  calls: ['sandboxes.extend'],
  positionals: [{ name: 'sandbox', description: 'The sandbox, sbx_…', required: true, kind: 'sandbox' }],
  flags: {
    by: {
      type: 'duration',
      min: '1s',
      max: '7d',
      description: 'How much longer, such as 30m',
      placeholder: 'DURATION',
    },
    until: {
      type: 'string',
      description: 'Until this time (ISO 8601, such as 2026-01-02T15:04:05Z)',
      placeholder: 'TIME',
    },
  },
  examples: ['better-compute sandbox extend sbx_01k5w… --by 30m'],
  async run({ args, flags, api }) {
    if ((flags.by === undefined) === (flags.until === undefined))
      throw new CliError('INVALID_ARGUMENT', 'sandbox extend takes exactly one of --by and --until', {
        details: { field: 'by' },
        hint: 'Run "better-compute help sandbox extend" for its flags and examples.',
      });
    let until: string | undefined;
    if (flags.until !== undefined) {
      const time = new Date(flags.until);
      if (!/^\d{4}-\d\d-\d\dT/.test(flags.until) || Number.isNaN(time.getTime()))
        throw new CliError(
          'INVALID_ARGUMENT',
          `--until takes an ISO 8601 time (got "${flags.until.slice(0, 40)}")`,
          {
            details: { field: 'until' },
          },
        );
      until = time.toISOString();
    }
    return (await api()).call('sandboxes.extend', {
      sandboxId: args.sandbox,
      ...(flags.by !== undefined ? { bySeconds: flags.by } : { until: until! }),
    });
  },
});
