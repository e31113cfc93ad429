/** `better-compute iam setup`: Better IAM's example policies through the output formatter. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { USAGE_METERS } from '@better-compute/core/methods';
import { createTestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { iamSetupExamples, IAM_ACTIONS } from 'better-iam';
import { actionCatalog } from '../src/compute.js';
import { runCli } from '../src/cli/index.js';
import { captureIO } from './cli-support.js';

describe('better-compute iam setup', () => {
  it('prints the three example policies as JSON by default', async () => {
    const { io, out, err } = captureIO();
    const result = await runCli(['iam', 'setup'], io);
    expect(result).toEqual({ policies: iamSetupExamples() });
    expect(err).toEqual([]);
    const printed = JSON.parse(out.join('\n')) as { policies: { name: string; tenantId: string }[] };
    expect(printed.policies.map((p) => [p.name, p.tenantId])).toEqual([
      ['gpu-tenant', 'acme'],
      ['operator', 'root'],
      ['ci-job', 'acme'],
    ]);
    // No billing meters exist yet, so none of the examples mentions one.
    expect(out.join('\n')).not.toContain('compute:usage:');
  });

  it('--query and --format table work like any result', async () => {
    const names = captureIO();
    await runCli(['iam', 'setup', '--query', 'policies[].name'], names.io);
    expect(names.out.join('\n')).toBe('gpu-tenant\noperator\nci-job');
    const table = captureIO();
    await runCli(['iam', 'setup', '--format', 'table'], table.io);
    const text = table.out.join('\n');
    expect(text).toMatch(/^name\s+tenant\s+role\s+actions\s+bindings\s+summary/);
    expect(text).toMatch(/gpu-tenant\s+acme\s+gpu-researcher\s+4\s+tenant-admin, gpu-researcher/);
    expect(text).toMatch(/operator\s+root\s+\(built-in\)\s+0\s+operator/);
  });

  it('--meters needs a configuration: without one it is CONFIG_NOT_FOUND and nothing is made', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'bc-iam-meters-none-'));
    try {
      await expect(
        runCli(['iam', 'setup', '--meters'], captureIO({ HOME: scratch }, { cwd: scratch }).io),
      ).rejects.toMatchObject({ code: 'CONFIG_NOT_FOUND' });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('names only actions that exist, so every example can be applied as printed', () => {
    const known = [...actionCatalog().map((entry) => entry.action), ...IAM_ACTIONS];
    const matches = (pattern: string, action: string) =>
      new RegExp(
        `^${pattern
          .replace(/@own$/, '')
          .split(':')
          .map((s) => (s === '*' ? '[a-z0-9-]+(?::[a-z0-9-]+)*' : s))
          .join(':')}$`,
      ).test(action);
    for (const policy of iamSetupExamples()) {
      for (const pattern of policy.role?.actions ?? []) {
        expect(
          known.some((action) => matches(pattern, action)),
          `${policy.name}: ${pattern}`,
        ).toBe(true);
      }
    }
  });
});

describe.each(await testDatabaseKinds())('iam setup --meters on %s', (kind) => {
  it('creates the billing meters usage exports name in Better IAM once: a second run creates nothing', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'bc-iam-meters-'));
    const database = kind === 'postgres' ? await createTestDatabase('postgres', 2) : undefined;
    const env = {
      HOME: scratch,
      BETTER_COMPUTE_DATABASE_URL: database?.url ?? `pglite:${join(scratch, 'db')}`,
    };
    try {
      await runCli(['migrate'], captureIO(env, { cwd: scratch }).io);
      const first = captureIO(env, { cwd: scratch });
      expect(await runCli(['iam', 'setup', '--meters'], first.io)).toEqual({
        meters: ['compute.gpu-seconds'],
        created: ['compute.gpu-seconds'],
        existing: [],
        different: [],
      });
      const again = await runCli(['iam', 'setup', '--meters'], captureIO(env, { cwd: scratch }).io);
      expect(again).toEqual({
        meters: ['compute.gpu-seconds'],
        created: [],
        existing: ['compute.gpu-seconds'],
        different: [],
      });
      // The meter is the one usage.export names, as Better IAM lists it.
      const { betterCompute } = await import('../src/index.js');
      const compute = await betterCompute({ database: env.BETTER_COMPUTE_DATABASE_URL }, { log: () => {} });
      try {
        expect(await compute.embeddedIam!.listMeters()).toEqual([
          { ...USAGE_METERS[0], dimensions: [...USAGE_METERS[0].dimensions], createdAt: expect.any(String) },
        ]);
      } finally {
        await compute.close();
      }
    } finally {
      await database?.close();
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 120_000);
});
