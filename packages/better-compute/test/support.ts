/**
 * Test support: a deployment on a fresh database with a bridge of the test's own (this suite tests
 * compute's pipeline, not IAM; the IAM suites and the end-to-end tests use the real Better IAM), and
 * a plugin module with a mutation, so idempotency and the outbox can be exercised.
 */
import {
  type AuthorizationCheck,
  type AuthorizationDecision,
  defineMethod,
  type IamBridge,
  type Identity,
  ROOT_TENANT,
  type TenantState,
} from '@better-compute/core';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import type { DatabaseKind } from '@better-compute/db';
import { sql } from 'kysely';
import { z } from 'zod';
import { betterCompute, bindMethod, defineModule, type ComputeInstance } from '../src/index.js';
import type { ComputeConfig } from '../src/config/define-config.js';

export const widgetsCreate = defineMethod({
  group: 'plugins.test.widgets',
  name: 'create',
  kind: 'mutation',
  summary: 'Create a widget (test plugin)',
  module: 'core',
  access: { action: 'compute:widgets:create' },
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({
      tenantId: z.string(),
      name: z.string(),
      idempotencyKey: z.string().optional(),
      fail: z.boolean().optional(),
    })
    .strict(),
  output: z.object({ id: z.string(), name: z.string() }),
});

let widgetCounter = 0;

export const widgetsModule = defineModule({
  name: 'widgets',
  migrations: [
    {
      name: '0001_widgets',
      sql: 'create table compute.test_widgets (id text primary key, tenant_id text not null, name text not null)',
    },
  ],
  methods: [
    bindMethod(widgetsCreate, async ({ db, tenantId, input, emit }) => {
      const id = `w${++widgetCounter}_${Math.random().toString(36).slice(2, 8)}`;
      await sql`insert into compute.test_widgets (id, tenant_id, name) values (${id}, ${tenantId}, ${input.name})`.execute(
        db,
      );
      emit({ type: 'widget.created', subject: { type: 'widget', id }, data: { name: input.name } });
      if (input.fail) throw new Error('the widget factory broke');
      return { id, name: input.name };
    }),
  ],
});

/** Tokens the test bridge knows: `t-<tenant>-<principal>`; `denied` principals are refused every action. */
export class TestBridge implements IamBridge {
  readonly suspended = new Set<string>();
  async authenticate(credential: string): Promise<Identity | null> {
    const match = /^t-([a-z][a-z0-9-]*)-([a-z0-9]+)$/.exec(credential);
    if (!match) return null;
    return {
      principalId: `usr_${match[2]}`,
      principalKind: 'person',
      tenantId: match[1]!,
      credentialKind: 'api-key',
      credentialId: `key_${match[2]}`,
      mfa: false,
      expiresAt: null,
    };
  }
  async tenantState(tenantId: string): Promise<TenantState | null> {
    if (!['acme', 'globex', ROOT_TENANT].includes(tenantId)) return null;
    return this.suspended.has(tenantId) ? 'suspended' : 'active';
  }
  async authorize(identity: Identity, checks: AuthorizationCheck[]): Promise<AuthorizationDecision[]> {
    return checks.map(() =>
      identity.principalId.includes('denied')
        ? { allowed: false, reason: 'no binding' }
        : { allowed: true, reason: 'test' },
    );
  }
  async installActions(): Promise<void> {}
}

export interface TestDeployment {
  compute: ComputeInstance;
  bridge: TestBridge;
  database: TestDatabase;
  close(): Promise<void>;
}

export async function createTestDeployment(
  kind: DatabaseKind,
  options: { trustedOrigins?: string[]; rateLimit?: ComputeConfig['rateLimit'] } = {},
): Promise<TestDeployment> {
  const database = await createTestDatabase(kind, 60);
  const bridge = new TestBridge();
  const compute = await betterCompute(
    {
      database,
      iam: bridge,
      trustedOrigins: options.trustedOrigins ?? ['https://console.example.com'],
      rateLimit: options.rateLimit ?? false,
    },
    { modules: [widgetsModule], log: () => {} },
  );
  await compute.migrate();
  return {
    compute,
    bridge,
    database,
    async close() {
      await compute.close();
      await database.close();
    },
  };
}

/** Calls a method through the handler in memory. */
export async function call(
  compute: ComputeInstance,
  method: string,
  body: unknown,
  init: { token?: string; headers?: Record<string, string>; rawBody?: string } = {},
): Promise<{
  status: number;
  body: {
    data?: unknown;
    error?: { code: string; message: string; details?: Record<string, unknown>; requestId: string };
  };
}> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  const response = await compute.handler(
    new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
      method: 'POST',
      headers,
      body: init.rawBody ?? JSON.stringify(body),
    }),
  );
  return { status: response.status, body: await response.json() };
}

/**
 * Events become visible once every older transaction on the server has ended, and other suites
 * share this PostgreSQL server: read until the expected events show (a bounded wait).
 */
export async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
