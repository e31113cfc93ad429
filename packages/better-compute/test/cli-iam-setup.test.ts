/** `better-compute iam setup`: Better IAM's example policies through the output formatter. */
import { describe, expect, it } from 'vitest';
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

  it('has no --meters flag: there are no billing meters to show', async () => {
    await expect(runCli(['iam', 'setup', '--meters'], captureIO().io)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
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
