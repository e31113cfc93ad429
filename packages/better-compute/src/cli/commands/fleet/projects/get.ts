/** `projects get PROJECT`: projects.get. */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'projects get',
  group: 'Fleet',
  summary: 'Show a project (projects.get)',
  target: 'token',
  calls: ['projects.get'],
  positionals: [{ name: 'project', description: 'The project id', required: true, kind: 'project' }],
  examples: ['better-compute projects get proj_01k…'],
  async run({ args, api }) {
    return (await api()).call('projects.get', { projectId: args.project });
  },
});
