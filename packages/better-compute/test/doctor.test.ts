import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '@better-compute/db/testing';
import { betterCompute } from '../src/index.js';
import { TestBridge } from './support.js';

describe('doctor', () => {
  it('names each check, and reports a schema that is behind as an error', async () => {
    const database = await createTestDatabase('pglite');
    try {
      const compute = await betterCompute({ database, iam: new TestBridge() }, { log: () => {} });
      const before = await compute.doctor();
      expect(before.ok).toBe(false);
      expect(before.findings.map((f) => f.check)).toEqual([
        'database.reachable',
        'clock.skew',
        'schema.current',
        'registry.consistent',
        'iam.wired',
        'cookies.origins',
      ]);
      // Without trustedOrigins, doctor says cookies count only from loopback origins (issue 15).
      expect(before.findings.find((f) => f.check === 'cookies.origins')?.message).toContain(
        'only from loopback origins',
      );
      expect(before.findings.find((f) => f.check === 'schema.current')).toMatchObject({
        severity: 'error',
        message: expect.stringContaining('pending: run better-compute migrate'),
      });
      await compute.migrate();
      const after = await compute.doctor();
      expect(after.findings.filter((f) => f.severity !== 'ok')).toEqual([]);
      expect(after.ok).toBe(true);
    } finally {
      await database.close();
    }
  });

  it('a clock far from the database’s is a warning', async () => {
    const database = await createTestDatabase('pglite');
    try {
      const compute = await betterCompute(
        { database, iam: new TestBridge() },
        { log: () => {}, now: () => new Date(Date.now() + 60_000) },
      );
      await compute.migrate();
      const report = await compute.doctor();
      expect(report.findings.find((f) => f.check === 'clock.skew')).toMatchObject({ severity: 'warning' });
      expect(report.ok).toBe(false);
    } finally {
      await database.close();
    }
  });
});
