/**
 * `console --node ID | --instance ID`: a root console on a node (compute:nodes:console) or the
 * serial console of a running instance (compute:instances:exec), through a single-use tunnel.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { checkTerminalTunnel, runTerminalTunnel } from './terminal-tunnel.js';

export default defineCommand({
  name: 'console',
  group: 'Access',
  summary: 'A root console on a node, or an instance’s serial console, through a tunnel (tunnels.open)',
  target: 'token',
  output: false,
  calls: ['tunnels.open'],
  flags: {
    node: { type: 'id', kind: 'node', description: 'A root console on this node', placeholder: 'ID' },
    instance: {
      type: 'id',
      kind: 'instance',
      description: 'The serial console of this running instance',
      placeholder: 'ID',
    },
  },
  examples: [
    'better-compute console --url https://compute.example.com --tenant acme --node node_01k5w…',
    'better-compute console --url https://compute.example.com --tenant acme --instance inst_01k5w…',
  ],
  async run(context) {
    const { node, instance } = context.flags;
    if ((node === undefined) === (instance === undefined))
      throw new CliError('INVALID_ARGUMENT', 'console takes exactly one of --node and --instance', {
        hint: 'Pass --node ID for a node’s root console, or --instance ID for an instance’s serial console.',
        details: { field: node === undefined ? 'node' : 'instance' },
      });
    checkTerminalTunnel(context);
    return runTerminalTunnel(context, { nodeId: node, instanceId: instance, op: 'console' });
  },
});
