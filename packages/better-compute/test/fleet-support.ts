/**
 * Support for the fleet, capacity and reservation suites: a deployment on a fresh database with
 * the test IAM bridge and a clock the test moves, and helpers that build a fleet through the real
 * routes (sites.create, pools.create, pools.offer, joinTokens.create, nodes.join, nodes.heartbeat).
 */
import type { DatabaseKind } from '@better-compute/db';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import type { Kysely } from 'kysely';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import type { ComputeTables } from '../src/db/tables.js';
import { call, TestBridge } from './support.js';

export const OPS = 't-root-ops';
export const ACME = 't-acme-alice';
export const GLOBEX = 't-globex-bob';

export interface Clock {
  now(): Date;
  advance(seconds: number): void;
}

export interface FleetDeployment {
  compute: ComputeInstance;
  database: TestDatabase;
  db: Kysely<ComputeTables>;
  clock: Clock;
  /** Every statement sent to the database, in order (`begin` and `commit` included); tests may empty it. */
  statements: string[];
  /** Calls a method; returns its data, or throws the error envelope as `{ code, message }`. */
  api<T = any>(method: string, body: Record<string, unknown>, token?: string): Promise<T>;
  /** Calls a method and returns the error (or fails when it succeeds). */
  fails(
    method: string,
    body: Record<string, unknown>,
    token?: string,
  ): Promise<{ code: string; message: string; details?: Record<string, unknown> }>;
  close(): Promise<void>;
}

export class ApiFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(`${code}: ${message}`);
  }
}

export async function createFleetDeployment(
  kind: DatabaseKind,
  start = '2026-01-01T00:00:00.000Z',
  poolSize = 10,
): Promise<FleetDeployment> {
  const statements: string[] = [];
  const database = await createTestDatabase(kind, poolSize, (text) => void statements.push(text));
  let nowMs = Date.parse(start);
  const clock: Clock = { now: () => new Date(nowMs), advance: (seconds) => void (nowMs += seconds * 1000) };
  const compute = await betterCompute(
    { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false },
    {
      log: ({ level, message, error }) => level === 'error' && console.error(message, error),
      now: clock.now,
    },
  );
  await compute.migrate();
  const api = async (method: string, body: Record<string, unknown>, token: string = OPS) => {
    const { body: answer } = await call(compute, method, body, { token });
    if (answer.error) throw new ApiFailure(answer.error.code, answer.error.message, answer.error.details);
    return answer.data as any;
  };
  return {
    compute,
    database,
    db: database.db as Kysely<ComputeTables>,
    clock,
    statements,
    api,
    async fails(method, body, token = OPS) {
      const { body: answer } = await call(compute, method, body, { token });
      if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
      return answer.error;
    },
    async close() {
      await compute.close();
      await database.close();
    },
  };
}

export interface GpuSpec {
  index: number;
  model: string;
  product: string;
  vramGiB: number;
  nvlinkDomain: string | null;
}

export const h100x8 = (domain: string): GpuSpec[] =>
  Array.from({ length: 8 }, (_, index) => ({
    index,
    model: 'H100',
    product: 'H100-SXM5-80GB',
    vramGiB: 80,
    nvlinkDomain: domain,
  }));
export const a100x8 = (domainA: string, domainB: string): GpuSpec[] =>
  Array.from({ length: 8 }, (_, index) => ({
    index,
    model: 'A100',
    product: 'A100-SXM4-40GB',
    vramGiB: 40,
    nvlinkDomain: index < 4 ? domainA : domainB,
  }));
export const l40sx4 = (): GpuSpec[] =>
  Array.from({ length: 4 }, (_, index) => ({
    index,
    model: 'L40S',
    product: 'L40S-48GB',
    vramGiB: 48,
    nvlinkDomain: null,
  }));
export const gb200x4 = (domain: string): GpuSpec[] =>
  Array.from({ length: 4 }, (_, index) => ({
    index,
    model: 'GB200',
    product: 'GB200-NVL72',
    vramGiB: 186,
    nvlinkDomain: domain,
  }));

/** A site and a GPU pool owned by the root tenant, offered to acme and globex. */
export async function seedPool(
  d: FleetDeployment,
  name = 'gpu-main',
): Promise<{ siteId: string; poolId: string }> {
  const site = await d.api('sites.create', { name: `${name}-site`, region: 'eu-1' });
  const pool = await d.api('pools.create', { siteId: site.id, name, class: 'gpu' });
  await d.api('pools.offer', { poolId: pool.id, offerTenantId: 'acme' });
  await d.api('pools.offer', { poolId: pool.id, offerTenantId: 'globex' });
  return { siteId: site.id, poolId: pool.id };
}

/** Joins a node with a pre-approved token and sends its first heartbeat: it is ready. */
export async function addNode(
  d: FleetDeployment,
  poolId: string,
  hostname: string,
  gpus: GpuSpec[],
  labels: Record<string, string> = {},
): Promise<{ nodeId: string; credential: string }> {
  const { token } = await d.api('joinTokens.create', { poolId, preApproved: true });
  const joined = await d.api(
    'nodes.join',
    { joinToken: token, hostname, inventory: { cpuCores: 64, memoryGiB: 512, gpus }, labels },
    '',
  );
  await d.api('nodes.heartbeat', { nodeCredential: joined.nodeCredential }, '');
  return { nodeId: joined.nodeId, credential: joined.nodeCredential };
}
