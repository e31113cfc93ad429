/**
 * `metal power on|off|reset|status MACHINE [--reason TEXT]`: metal.power through the site agent.
 * The answer is the machine; the BMC's answer lands in powerState when the workflow ends
 * (--query workflowId names it: better-compute workflows get WF).
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { reasonFlag } from './shared.js';

const ACTIONS = ['on', 'off', 'reset', 'status'] as const;

export default defineCommand({
  name: 'metal power',
  group: 'Nodes',
  summary: 'Power a machine on, off or reset it through its BMC, or read its power state (metal.power)',
  target: 'token',
  calls: ['metal.power'],
  positionals: [
    { name: 'action', description: 'on, off, reset or status', required: true },
    { name: 'machine', description: 'The machine’s id (node_…)', required: true, kind: 'node' },
  ],
  flags: { reason: reasonFlag },
  examples: [
    'better-compute metal power status node_01k…',
    'better-compute metal power off node_01k… --reason "PSU swap"',
  ],
  async run({ args, flags, api }) {
    const action = args.action as (typeof ACTIONS)[number];
    if (!ACTIONS.includes(action))
      throw new CliError(
        'INVALID_ARGUMENT',
        `action must be one of ${ACTIONS.join(', ')} (got "${String(args.action).slice(0, 20)}")`,
        {
          details: { field: 'action' },
          hint: 'Run "better-compute help metal power" for its arguments.',
        },
      );
    return (await api()).call(
      'metal.power',
      defined({ machineId: args.machine, action, reason: flags.reason }),
    );
  },
});
