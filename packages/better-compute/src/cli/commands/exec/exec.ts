/**
 * `exec --instance ID`: a shell in a running instance, run by its guest agent, through a tunnel
 * decided as compute:instances:exec. bcd refuses it while guests have no agent; `console
 * --instance` is the terminal that works there.
 */
import { defineCommand } from '../../define.js';
import { checkTerminalTunnel, runTerminalTunnel } from '../console/terminal-tunnel.js';

export default defineCommand({
  name: 'exec',
  group: 'Access',
  summary: 'A shell in a running instance through its guest agent (tunnels.open)',
  target: 'token',
  output: false,
  calls: ['tunnels.open'],
  flags: {
    instance: {
      type: 'id',
      kind: 'instance',
      required: true,
      description: 'The running instance',
      placeholder: 'ID',
    },
  },
  examples: ['better-compute exec --url https://compute.example.com --tenant acme --instance inst_01k5w…'],
  async run(context) {
    checkTerminalTunnel(context);
    return runTerminalTunnel(context, { instanceId: context.flags.instance, op: 'exec' });
  },
});
