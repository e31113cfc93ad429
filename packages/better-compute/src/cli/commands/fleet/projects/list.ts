/** `projects list [--state]`: projects.list, as a table by default. */
import { defineCommand } from '../../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../../shared.js';

export default defineCommand({
  name: 'projects list',
  group: 'Fleet',
  summary: 'List the tenant’s projects (projects.list)',
  target: 'token',
  calls: ['projects.list'],
  flags: {
    state: {
      type: 'string',
      choices: ['active', 'archived'] as const,
      description: 'Only the projects in this state',
    },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute projects list', 'better-compute projects list --state archived'],
  async run(context) {
    const page = await (
      await context.api()
    ).call('projects.list', defined({ state: context.flags.state, ...pageOf(context.flags) }));
    return listResult(context, page, (project) => ({
      id: project.id,
      name: project.name,
      state: project.state,
      description: project.description,
      version: project.version,
      createdAt: project.createdAt,
    }));
  },
});
