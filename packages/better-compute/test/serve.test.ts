import { describe, expect, it } from 'vitest';
import { defineMethod } from '@better-compute/core';
import { createTestDatabase } from '@better-compute/db/testing';
import { z } from 'zod';
import { betterCompute, bindMethod, defineModule, serve } from '../src/index.js';
import { TestBridge } from './support.js';

const slowPing = defineMethod({
  group: 'plugins.test.slow',
  name: 'ping',
  kind: 'query',
  summary: 'Answers after a delay (test plugin)',
  module: 'core',
  access: { public: true },
  tenantScoped: false,
  input: z.object({ ms: z.number().int().max(5000) }).strict(),
  output: z.object({ slept: z.number() }),
});

const slowModule = defineModule({
  name: 'slow',
  methods: [
    bindMethod(slowPing, async ({ input }) => {
      await new Promise((resolve) => setTimeout(resolve, input.ms));
      return { slept: input.ms };
    }),
  ],
});

describe('serve', () => {
  it('refuses to start on a schema that is behind', async () => {
    const database = await createTestDatabase('pglite');
    try {
      const compute = await betterCompute({ database, iam: new TestBridge() }, { log: () => {} });
      const controller = new AbortController();
      await expect(
        serve({ compute, port: 0, roles: ['api'], signal: controller.signal, log: () => {} }),
      ).rejects.toMatchObject({
        code: 'INVALID_STATE',
        hint: 'Run better-compute migrate first.',
      });
    } finally {
      await database.close();
    }
  });

  it('on stop, finishes the request in flight, then refuses new connections and resolves', async () => {
    const database = await createTestDatabase('pglite');
    try {
      const compute = await betterCompute(
        { database, iam: new TestBridge() },
        { modules: [slowModule], log: () => {} },
      );
      await compute.migrate();
      const controller = new AbortController();
      let url = '';
      const lines: string[] = [];
      const running = serve({
        compute,
        port: 0,
        roles: ['api', 'controllers'],
        signal: controller.signal,
        log: (line) => lines.push(line),
        onListening: (u) => (url = u),
      });
      while (!url) await new Promise((resolve) => setTimeout(resolve, 10));
      const version = await fetch(`${url}/api/compute/system/version`, { method: 'POST', body: '{}' });
      expect(version.status).toBe(200);
      const inFlight = fetch(`${url}/api/compute/plugins/test/slow/ping`, {
        method: 'POST',
        body: '{"ms":400}',
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      controller.abort();
      const answer = await inFlight;
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual({ data: { slept: 400 } });
      await running;
      await expect(
        fetch(`${url}/api/compute/system/version`, { method: 'POST', body: '{}' }),
      ).rejects.toThrow();
      expect(lines[0]).toMatch(
        /^better-compute serving http:\/\/127\.0\.0\.1:\d+\/api\/compute \(roles: api,controllers\)$/,
      );
    } finally {
      await database.close();
    }
  });
});
