/** `better-compute iam setup`: Better IAM's example policies through the output formatter. */
import { describe, expect, it } from 'vitest';
import { iamSetupExamples } from 'better-iam';
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
    expect(text).toMatch(/gpu-tenant\s+acme\s+gpu-researcher\s+10\s+tenant-admin, gpu-researcher/);
    expect(text).toMatch(/operator\s+root\s+\(built-in\)\s+0\s+operator/);
  });

  it('has no --meters flag: there are no billing meters to show', async () => {
    await expect(runCli(['iam', 'setup', '--meters'], captureIO().io)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });
});
