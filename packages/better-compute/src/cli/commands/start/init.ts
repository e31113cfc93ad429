/** `init`: writes a starter better-compute.config.ts, never over an existing configuration. */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';

const STARTER = `import { defineConfig } from 'better-compute';

// The deployment's configuration; see "better-compute help" and the configuration guide.
export default defineConfig({
  // PostgreSQL in production (postgres://…); an embedded PGlite directory for a local trial.
  database: process.env.BETTER_COMPUTE_DATABASE_URL ?? 'pglite:.better-compute/data',
  // Origins whose pages may call with a cookie credential, such as the console.
  trustedOrigins: [],
});

// Project commands: export const commands = [defineCommand({ … })] from 'better-compute/cli'.
`;

export default defineCommand({
  name: 'init',
  group: 'Start',
  summary: 'Write a starter better-compute.config.ts',
  target: 'none',
  // It prints what it did and what to run next, not a result to format or query.
  output: false,
  examples: ['better-compute init'],
  async run({ io }) {
    const { join } = await import('node:path');
    const { existsSync } = await import('node:fs');
    const { writeFile } = await import('node:fs/promises');
    const { CONFIG_FILE_NAMES } = await import('../../../config/load-config.js');
    const existing = CONFIG_FILE_NAMES.map((name) => join(io.cwd, name)).find((path) => existsSync(path));
    const path = join(io.cwd, 'better-compute.config.ts');
    const refuse = (found: string) =>
      new ComputeError('ALREADY_EXISTS', `${found} already exists; init never writes over a configuration`, {
        hint: 'Edit the existing file, or run init in another directory.',
      });
    if (existing) throw refuse(existing);
    try {
      await writeFile(path, STARTER, { flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw refuse(path);
      throw error;
    }
    return `Wrote ${path}.\nNext: better-compute migrate, then better-compute serve (or better-compute dev).`;
  },
});
