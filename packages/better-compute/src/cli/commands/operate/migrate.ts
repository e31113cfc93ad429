/** `migrate`: creates or upgrades the schema and every module's migrations; prints what it applied. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'migrate',
  group: 'Operate',
  summary: 'Create or upgrade the schema and every module’s migrations; run it on every deploy',
  target: 'config',
  examples: ['better-compute migrate', 'BETTER_COMPUTE_DATABASE_URL=postgres://… better-compute migrate'],
  async run({ compute }) {
    const instance = await compute();
    return instance.migrate();
  },
});
