/**
 * The packages' source passes the project's type-aware lint (eslint.config.mjs): no promise left
 * floating or handed where a callback's result is dropped, no `any` leaking into typed code. Run
 * here so `npm test` fails on it; `npm run lint` shows the same report.
 */
import { ESLint } from 'eslint';
import { expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;

it('the packages’ source has no lint finding', async () => {
  const eslint = new ESLint({ cwd: root });
  const results = await eslint.lintFiles(['packages/*/src/**/*.ts']);
  const findings = results.flatMap((result) =>
    result.messages.map(
      (m) => `${result.filePath.slice(root.length)}:${m.line}:${m.column} ${m.ruleId ?? ''} ${m.message}`,
    ),
  );
  expect(findings).toEqual([]);
  // The configuration reached the files: a rule that finds nothing because it never ran proves nothing.
  const config = await eslint.calculateConfigForFile('packages/core/src/index.ts');
  expect(config?.rules?.['@typescript-eslint/no-floating-promises']).toEqual([2]);
}, 600_000);
