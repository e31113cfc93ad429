/**
 * No input from anyone gets a 5xx (issue 15): every method of compute's table and of IAM's, called
 * with hostile inputs derived from its input schema (bench/lib/fuzz-inputs.mjs), as no credential, a
 * member, a tenant administrator and a platform administrator, on PostgreSQL with the real embedded
 * Better IAM; and raw bodies, cookies, hosts and paths that are not what a client sends. Every
 * answer must be below 500 and, when it is a failure, carry a coded error.
 *
 * A fixed seed runs in `npm test`; FUZZ_RUNS (inputs per method and caller) and FUZZ_SEED search
 * further: `FUZZ_RUNS=200 FUZZ_SEED=7 npx vitest run packages/better-compute/test/fuzz.test.ts`.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyMethod, ID_PREFIXES, methodKey, methodPath } from '@better-compute/core';
import { methodList } from '@better-compute/core/methods';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { iamMethods } from 'better-iam';
import { hostileBodies, hostileInputs } from '../../../bench/lib/fuzz-inputs.mjs';
import { betterCompute, type ComputeInstance } from '../src/index.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 6);
const SEED = Number(process.env.FUZZ_SEED ?? 20261204);
const kinds = (await testDatabaseKinds()).filter((kind) => kind === 'postgres');

/** `nodeId` → `node`, `reservationId` → `rsv`, `principalId` → `usr`: the id kind a field names. */
const PREFIX_OF_FIELD = new Map<string, string>(
  Object.entries(ID_PREFIXES).map(([kind, prefix]) => [`${kind}Id`, prefix]),
);
PREFIX_OF_FIELD.set('principalId', 'usr');
PREFIX_OF_FIELD.set('subjectId', 'usr');

function inputSchema(method: AnyMethod): unknown {
  try {
    return z.toJSONSchema(method.input, { io: 'input', unrepresentable: 'any' });
  } catch {
    return {};
  }
}

interface Route {
  key: string;
  path: string;
  schema: unknown;
}

const computeRoutes: Route[] = methodList.map((method) => ({
  key: methodKey(method),
  path: `/api/compute${methodPath(method)}`,
  schema: inputSchema(method),
}));
const iamRoutes: Route[] = Object.values(iamMethods as Record<string, AnyMethod>).map((method) => ({
  key: `iam ${methodKey(method)}`,
  path: `/api/iam${methodPath(method)}`,
  schema: inputSchema(method),
}));

interface Outcome {
  status: number;
  body: string;
}

async function send(compute: ComputeInstance, path: string, body: string, headers: Record<string, string>) {
  const response = await compute.handler(
    new Request(`http://localhost${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    }),
  );
  return { status: response.status, body: await response.text() } satisfies Outcome;
}

/** A failure names its code; a 5xx is never an answer to an input. */
function checkOutcome(where: string, input: unknown, outcome: Outcome): void {
  const shown = JSON.stringify(input)?.slice(0, 300);
  expect(
    outcome.status,
    `${where} answered ${outcome.status} to ${shown}: ${outcome.body.slice(0, 300)}`,
  ).toBeLessThan(500);
  if (outcome.status >= 400) {
    const parsed = JSON.parse(outcome.body) as { error?: { code?: unknown } };
    expect(typeof parsed.error?.code, `${where} failed without a code: ${outcome.body.slice(0, 300)}`).toBe(
      'string',
    );
  }
}

describe.each(kinds)('hostile inputs on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const callers: Record<string, Record<string, string>> = { anonymous: {} };

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const dev = (await compute.embeddedIam!.bootstrapDev())!;
    callers.member = { authorization: `Bearer ${dev.acmeMember.apiKey}` };
    callers['tenant admin'] = { authorization: `Bearer ${dev.acmeAdmin.apiKey}` };
    callers['platform admin'] = { authorization: `Bearer ${dev.rootAdmin.apiKey}` };
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  for (const route of [...computeRoutes, ...iamRoutes]) {
    it(`${route.key}: no 5xx, every failure coded`, async () => {
      for (const [caller, headers] of Object.entries(callers)) {
        const tenantId = caller === 'platform admin' ? 'root' : 'acme';
        const inputs = hostileInputs(route.schema, {
          tenantId,
          idPrefix: (field) => PREFIX_OF_FIELD.get(field),
        });
        await fc.assert(
          fc.asyncProperty(inputs, async (input) => {
            const body = JSON.stringify(input);
            // Inputs past the body limit are refused by size, which other tests cover.
            if (Buffer.byteLength(body) > 64 * 1024) return;
            checkOutcome(`${route.key} as ${caller}`, input, await send(compute, route.path, body, headers));
          }),
          { numRuns: RUNS, seed: SEED, endOnFailure: true },
        );
      }
    });
  }

  it('raw bodies that are not JSON objects get a coded 4xx on both route sets', async () => {
    const paths = [
      '/api/compute/reservations/create',
      '/api/iam/apiKeys/create',
      '/api/compute/system/whoami',
    ];
    await fc.assert(
      fc.asyncProperty(hostileBodies, fc.constantFrom(...paths), async (body, path) => {
        checkOutcome(path, body, await send(compute, path, body, callers['tenant admin']!));
      }),
      { numRuns: RUNS * 20, seed: SEED, endOnFailure: true },
    );
  });

  it('malformed cookies, hosts, origins and paths get a coded 4xx, never a 5xx', async () => {
    const cookies = [
      'better-iam.session=%',
      'better-iam.session=%E0%A4%A',
      'a=b; =; ;;',
      '\u00ff=\u00ff',
      `x=${'%'.repeat(2000)}`,
    ];
    const hosts = ['', '[', 'a b', 'x:99999', '%00', '..'];
    const paths = [
      '/api/iam/%2e%2e/compute/system/whoami',
      '/api/compute/%2e%2e/iam/principals/list',
      '/api/compute/reservations%2Fcreate',
      '/api/compute/./system/version',
      '/api/compute//system/version',
      '/api/compute/system/version%00',
      '/api/iam/..%2fcompute/system/whoami',
    ];
    const outcomes: [string, Outcome][] = [];
    for (const cookie of cookies) {
      for (const path of ['/api/compute/system/whoami', '/api/iam/principals/list']) {
        outcomes.push([
          `cookie ${cookie} on ${path}`,
          await send(compute, path, '{}', { cookie, 'x-better-compute': '1', origin: 'http://localhost' }),
        ]);
      }
    }
    for (const host of hosts) {
      for (const path of ['/api/compute/system/whoami', '/api/iam/principals/list']) {
        outcomes.push([`host ${JSON.stringify(host)} on ${path}`, await send(compute, path, '{}', { host })]);
      }
    }
    for (const path of paths) {
      outcomes.push([`path ${path}`, await send(compute, path, '{}', callers['tenant admin']!)]);
    }
    for (const [where, outcome] of outcomes) checkOutcome(where, null, outcome);
  });
});
