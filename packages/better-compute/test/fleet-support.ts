/**
 * Support for the fleet, capacity and reservation suites: a deployment on a fresh database with
 * the test IAM bridge and a clock the test moves, and helpers that build a fleet through the real
 * routes (sites.create, pools.create, pools.offer, joinTokens.create, nodes.join, nodes.heartbeat).
 */
import type { DatabaseKind } from '@better-compute/db';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import type { ComputeTables } from '../src/db/tables.js';
import { call, TestBridge } from './support.js';

export const OPS = 't-root-ops';
export const ACME = 't-acme-alice';
export const GLOBEX = 't-globex-bob';
/** The CLI's environment (see cliRunner) as the root tenant's operator. */
export const OPERATOR_ENV = { BETTER_COMPUTE_TOKEN: OPS, BETTER_COMPUTE_TENANT: 'root' };

interface Clock {
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
  fails(method: string, body: Record<string, unknown>, token?: string): Promise<Failure>;
  close(): Promise<void>;
}

/** The error envelope of a refused call. */
type Failure = { code: string; message: string; hint?: string; details?: Record<string, unknown> };

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
  /** More of the configuration (release pins, say). */
  more: { release?: { pins: string[]; threshold?: number } } = {},
): Promise<FleetDeployment> {
  const statements: string[] = [];
  const database = await createTestDatabase(kind, poolSize, (text) => void statements.push(text));
  let nowMs = Date.parse(start);
  const clock: Clock = { now: () => new Date(nowMs), advance: (seconds) => void (nowMs += seconds * 1000) };
  const compute = await betterCompute(
    { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false, ...more },
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

/**
 * A deployment on `kind` for the describe block (or file) that calls this: made before its tests
 * and closed after them. The object is there at once, so helpers made while the block is collected
 * may hold it; each field is read from the deployment when used.
 */
export function suiteDeployment(kind: DatabaseKind): FleetDeployment {
  let made: FleetDeployment | undefined;
  beforeAll(async () => {
    made = await createFleetDeployment(kind);
  });
  afterAll(async () => {
    await made?.close();
  });
  const live = (): FleetDeployment => {
    if (!made) throw new Error('the suite deployment is made in beforeAll: use it in hooks and tests');
    return made;
  };
  return {
    get compute() {
      return live().compute;
    },
    get database() {
      return live().database;
    },
    get db() {
      return live().db;
    },
    get clock() {
      return live().clock;
    },
    get statements() {
      return live().statements;
    },
    api: (method, body, token) => live().api(method, body, token),
    fails: (method, body, token) => live().fails(method, body, token),
    close: () => live().close(),
  };
}

/** The types of a subject's events in the outbox, in the order they were written. */
export async function eventTypesOf(d: FleetDeployment, subjectId: string): Promise<string[]> {
  const { rows } = await sql<{ type: string }>`
    select type from compute.events where subject_id = ${subjectId}
    order by tx_id, tx_index`.execute(d.db);
  return rows.map((r) => r.type);
}

export const getNode = (d: FleetDeployment, nodeId: string) => d.api('nodes.get', { nodeId });

/** A node's heartbeat, reporting `inventory` when given. */
export const heartbeat = (d: FleetDeployment, nodeCredential: string, inventory?: NodeInventory) =>
  d.api('nodes.heartbeat', { nodeCredential, ...(inventory ? { inventory } : {}) }, '');

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

export interface NodeInventory {
  cpuCores: number;
  memoryGiB: number;
  gpus: GpuSpec[];
}

/** What every test node reports: 64 cores, 512 GiB and `gpus` (four L40S unless given). */
export const nodeInventory = (gpus: GpuSpec[] = l40sx4()): NodeInventory => ({
  cpuCores: 64,
  memoryGiB: 512,
  gpus,
});

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
    { joinToken: token, hostname, inventory: nodeInventory(gpus), labels },
    '',
  );
  await heartbeat(d, joined.nodeCredential);
  return { nodeId: joined.nodeId, credential: joined.nodeCredential };
}

export interface VpsPool {
  poolId: string;
  flavorId: string;
  imageId: string;
}

/**
 * A VPS pool on the simulated runtime, offered to `tenants`, with one simulated node (`labels`
 * steer the simulation), a small flavor and a registered image: what the sandbox suites start from.
 */
export async function seedVpsPool(
  api: (method: string, body: Record<string, unknown>) => Promise<any>,
  name: string,
  tenants: string[],
  labels: Record<string, string> = {},
): Promise<VpsPool> {
  const site = await api('sites.create', { name: `${name}-site`, region: 'eu-1' });
  const poolId = (await api('pools.create', { siteId: site.id, name, class: 'vps', driver: 'sim' })).id;
  for (const tenant of tenants) await api('pools.offer', { poolId, offerTenantId: tenant });
  await addNode({ api } as unknown as FleetDeployment, poolId, `${name}-a`, [], labels);
  const flavor = await api('flavors.create', { poolId, name: 'small', vcpus: 1, memoryMiB: 512, diskGiB: 2 });
  const image = await api('images.register', {
    name: 'tiny',
    source: '/var/lib/images/tiny.raw',
    diskFormat: 'raw',
    sha256: 'a'.repeat(64),
    sizeBytes: 4096,
    os: 'debian-12',
    channel: 'stable',
  });
  return { poolId, flavorId: flavor.id, imageId: image.id };
}
