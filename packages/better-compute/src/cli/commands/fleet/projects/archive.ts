/** `projects archive PROJECT [--if-version N]`: projects.archive. */
import { defineCommand } from '../../../define.js';
import { defined, ifVersionFlag } from '../../shared.js';

export default defineCommand({
  name: 'projects archive',
  group: 'Fleet',
  summary: 'Archive a project (projects.archive)',
  target: 'token',
  calls: ['projects.archive'],
  positionals: [{ name: 'project', description: 'The project id', required: true, kind: 'project' }],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute projects archive proj_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call(
      'projects.archive',
      defined({ projectId: args.project, ifVersion: flags.ifVersion }),
    );
  },
});
