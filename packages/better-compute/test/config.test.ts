import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findConfigFile, loadConfig } from '../src/config/load-config.js';

// Inside the repository, so a config's `import 'better-compute'` resolves like a user's would.
let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(import.meta.dirname, '.config-test-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('finding and loading the configuration', () => {
  it('a .ts configuration loads without a build step, with its project commands', async () => {
    const dir = join(root, 'ts-project');
    await mkdir(join(dir, 'nested', 'deeper'), { recursive: true });
    await writeFile(
      join(dir, 'better-compute.config.ts'),
      `import { defineConfig } from 'better-compute';
const origins: string[] = ['https://console.example.com'];
export const commands = [{ name: 'seed' }];
export default defineConfig({ database: 'pglite:memory', trustedOrigins: origins });
`,
    );
    const loaded = await loadConfig({ cwd: join(dir, 'nested', 'deeper'), env: {} });
    expect(loaded.path).toBe(join(dir, 'better-compute.config.ts'));
    expect(loaded.config).toEqual({
      database: 'pglite:memory',
      trustedOrigins: ['https://console.example.com'],
    });
    expect(loaded.commands).toEqual([{ name: 'seed' }]);
  });

  it('--config wins over BETTER_COMPUTE_CONFIG, which wins over discovery', async () => {
    const dir = join(root, 'explicit');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'better-compute.config.mjs'), `export default { database: 'pglite:found' };`);
    await writeFile(join(dir, 'a.mjs'), `export default { database: 'pglite:a' };`);
    await writeFile(join(dir, 'b.mjs'), `export default { database: 'pglite:b' };`);
    expect((await loadConfig({ cwd: dir, env: {} })).config.database).toBe('pglite:found');
    expect((await loadConfig({ cwd: dir, env: { BETTER_COMPUTE_CONFIG: 'b.mjs' } })).config.database).toBe(
      'pglite:b',
    );
    expect(
      (await loadConfig({ cwd: dir, configPath: 'a.mjs', env: { BETTER_COMPUTE_CONFIG: 'b.mjs' } })).config
        .database,
    ).toBe('pglite:a');
  });

  it('BETTER_COMPUTE_DATABASE_URL alone is a configuration, and fills a file that names no database', async () => {
    const empty = join(root, 'empty');
    await mkdir(empty, { recursive: true });
    const url = 'postgres://postgres@127.0.0.1:5432/postgres';
    const alone = await loadConfig({ cwd: '/', env: { BETTER_COMPUTE_DATABASE_URL: url } });
    expect(alone).toEqual({ config: { database: url }, path: null, commands: [] });
    await writeFile(join(empty, 'better-compute.config.js'), `export default { trustedOrigins: [] };`);
    expect(
      (await loadConfig({ cwd: empty, env: { BETTER_COMPUTE_DATABASE_URL: url } })).config.database,
    ).toBe(url);
  });

  it('nothing at all is CONFIG_NOT_FOUND with a hint', async () => {
    await expect(loadConfig({ cwd: '/', env: {} })).rejects.toMatchObject({
      code: 'CONFIG_NOT_FOUND',
      hint: expect.stringContaining('better-compute init'),
    });
    await expect(
      loadConfig({ cwd: '/', configPath: '/nope/better-compute.config.ts', env: {} }),
    ).rejects.toMatchObject({
      code: 'CONFIG_NOT_FOUND',
    });
  });

  it('a configuration that does not compile is INVALID_CONFIG and leaves no compiled file behind', async () => {
    const dir = join(root, 'broken');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'better-compute.config.ts'), `export default {{ nope`);
    await expect(loadConfig({ cwd: dir, env: {} })).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    const { readdir } = await import('node:fs/promises');
    expect(await readdir(dir)).toEqual(['better-compute.config.ts']);
    expect(findConfigFile({ cwd: dir, env: {} })).toBe(join(dir, 'better-compute.config.ts'));
  });

  it.each([
    [
      'c1.mjs',
      'export default defineConfig({ database: "pglite:memory" })',
      'does not load: defineConfig is not defined',
    ],
    // The runtime's own words for a syntax error (the test runner loads modules its own way).
    ['c2.mjs', 'export default {', /^ does not load: \S/],
    [
      'c3.ts',
      'export default {',
      'does not load: line 2, column 1: Expected identifier but found end of file',
    ],
    ['c4.mjs', 'export default 5', 'exports a number, not a configuration'],
    ['c5.mjs', 'export const commands = []', 'has no default export'],
    [
      'c6.mjs',
      'export default { database: 42 }',
      ': database must be a URL (postgres://… or pglite:…) or an opened database, not a number',
    ],
  ])('a configuration that is wrong says what is wrong in it: %s', async (name, text, message) => {
    const dir = join(root, 'wrong');
    await mkdir(dir, { recursive: true });
    const path = join(dir, name);
    await writeFile(path, `${text}\n`);
    const failure = await loadConfig({ configPath: path, cwd: dir, env: {} }).catch(
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: 'INVALID_CONFIG' });
    const said = (failure as Error).message;
    expect(said.startsWith(path)).toBe(true);
    if (message instanceof RegExp) expect(said.slice(path.length)).toMatch(message);
    else expect(said.slice(path.length)).toBe(`${message.startsWith(':') ? '' : ' '}${message}`);
    expect((failure as { hint?: string }).hint).toMatch(/\S/);
  });
});
