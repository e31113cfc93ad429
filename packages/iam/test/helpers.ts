/** Shared set-up for IAM suites: one migrated database per kind and file, and a movable clock. */
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';
import { migrate } from '@better-compute/db';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import type { DatabaseKind } from '@better-compute/db';
import { type Iam, iamMigrations } from '../src/index.js';

export interface TestClock {
  now(): Date;
  advance(ms: number): void;
}

export function testClock(): TestClock {
  let offset = 0;
  return {
    now: () => new Date(Date.now() + offset),
    advance: (ms) => {
      offset += ms;
    },
  };
}

export async function migratedDatabase(kind: DatabaseKind): Promise<TestDatabase> {
  const database = await createTestDatabase(kind);
  await migrate(database.db, [iamMigrations]);
  return database;
}

/** Counts every query Kysely sends: a warm path must leave it at zero. */
export class QueryCounter implements KyselyPlugin {
  count = 0;
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.count++;
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}

let counter = 0;
/** A fresh tenant id per test, so tests sharing a database never meet. */
export function uniqueTenant(prefix = 't'): string {
  counter++;
  return `${prefix}-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

/** A POST to one of IAM's routes through its handler, as `token`: the status and the parsed body. */
export async function callIam(iam: Iam, path: string, body: unknown, token: string) {
  const response = await iam.handler(
    new Request(`http://localhost:3000/api/iam/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    }),
  );
  return { status: response.status, body: (await response.json()) as { data?: any; error?: any } };
}
