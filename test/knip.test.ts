/**
 * Nothing in the repository is exported, kept as a file or depended on without a user (knip, with
 * knip.jsonc: the workspaces, their entry points, and what is public API). Run here so `npm test`
 * fails on it; `npm run lint` shows the same report (docs/decisions/knip.md).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
// The root's devDependency: its bin, run by this Node.js (no npx, no shell).
const knip = join(root, 'node_modules', 'knip', 'bin', 'knip.js');

it('no export, file or dependency is unused', () => {
  // Findings go to stdout, configuration hints to stderr. A hint (an entry pattern that matches no
  // file, say) fails too: a configuration that no longer reaches the files it names proves nothing.
  const run = spawnSync(process.execPath, [knip, '--no-progress', '--treat-config-hints-as-errors'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
  });
  const report = `${run.stdout}\n${run.stderr}`.split('\n').filter((line) => line.trim() !== '');
  expect(report).toEqual([]);
  expect(run.status).toBe(0);
}, 300_000);
