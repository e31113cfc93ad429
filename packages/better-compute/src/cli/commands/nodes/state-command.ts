/**
 * `nodes cordon|drain|uncordon NODE [--reason] [--if-version N]`: the commands that move a node in
 * or out of taking new work share one shape and call the method of their name.
 */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export function nodeStateCommand(verb: 'cordon' | 'drain' | 'uncordon', summary: string) {
  const method = `nodes.${verb}` as const;
  return defineCommand({
    name: `nodes ${verb}`,
    group: 'Nodes',
    summary: `${summary} (${method})`,
    target: 'token',
    calls: [method],
    positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
    flags: {
      reason: {
        type: 'string',
        description: 'Why, recorded with the event (up to 500 characters)',
        placeholder: 'TEXT',
      },
      ifVersion: ifVersionFlag,
    },
    examples: [
      `better-compute nodes ${verb} node_01k…`,
      `better-compute nodes ${verb} node_01k… --if-version 3 --reason maintenance`,
    ],
    async run({ args, flags, api }) {
      return (await api()).call(
        method,
        defined({ nodeId: args.node, reason: flags.reason, ifVersion: flags.ifVersion }),
      );
    },
  });
}
