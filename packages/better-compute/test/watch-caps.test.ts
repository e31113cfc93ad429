/**
 * Caps on open event streams (issue 39 item 5), through the real node server and the real embedded
 * Better IAM: one identity's (N+1)th `/watch` stream is refused RATE_LIMITED with a hint, and opens
 * once one of its streams closed; another identity is not affected until the tenant's cap; another
 * tenant not at all.
 */
import type { Server } from 'node:http';
import { createTestDatabase, type TestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import { closeServer, listen } from '../src/host/serve.js';
import { type OpenStream, openStream } from './watch-support.js';

const [kind] = await testDatabaseKinds();

let database: TestDatabase;
let compute: ComputeInstance;
let server: Server;
let url = '';
let keys: { member: string; admin: string; root: string };
let rootId = '';
const open: OpenStream[] = [];

beforeAll(async () => {
  database = await createTestDatabase(kind!);
  compute = await betterCompute(
    { database, rateLimit: { streams: { perIdentity: 3, perTenant: 5 } } },
    { log: () => {} },
  );
  await compute.migrate();
  const dev = (await compute.embeddedIam!.bootstrapDev())!;
  keys = { member: dev.acmeMember.apiKey, admin: dev.acmeAdmin.apiKey, root: dev.rootAdmin.apiKey };
  rootId = dev.rootAdmin.principalId;
  server = createNodeServer(compute);
  url = await listen(server, 0, '127.0.0.1');
}, 120_000);

afterAll(async () => {
  for (const stream of open) stream.close();
  await closeServer(server);
  await compute.close();
  await database.close();
});

async function watch(key: string, tenantId = 'acme'): Promise<OpenStream> {
  const stream = await openStream(`${url}/watch?tenantId=${tenantId}`, { authorization: `Bearer ${key}` });
  if (stream.status === 200) open.push(stream);
  return stream;
}

async function refusal(stream: OpenStream) {
  expect(stream.status).toBe(429);
  return { retryAfter: stream.headers.get('retry-after') };
}

/** Opens streams of `key` until one opens: the server frees a slot once it sees the socket close. */
async function opensAgain(key: string, tenantId = 'acme'): Promise<OpenStream> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const stream = await watch(key, tenantId);
    if (stream.status === 200) return stream;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('no slot was freed');
}

describe('caps on open event streams', () => {
  it("refuses an identity's stream past its cap, and opens one once another closed", async () => {
    const first = await watch(keys.member);
    for (let i = 0; i < 2; i++) expect((await watch(keys.member)).status).toBe(200);
    expect(first.status).toBe(200);

    const response = await fetch(`${url}/watch?tenantId=acme`, {
      headers: { authorization: `Bearer ${keys.member}` },
    });
    expect(response.status).toBe(429);
    const body = (await response.json()) as {
      error: { code: string; message: string; hint: string; details: any };
    };
    expect(body.error).toMatchObject({
      code: 'RATE_LIMITED',
      details: { limit: 'identity', maxStreams: 3, retryAfterMs: expect.any(Number) },
    });
    expect(body.error.message).toMatch(/3 event streams open/);
    expect(body.error.hint).toMatch(/Close a stream/);
    expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);

    // Another identity of the tenant is not affected by the member's cap.
    expect((await watch(keys.admin)).status).toBe(200);

    first.close();
    await first.ended;
    const again = await opensAgain(keys.member);
    expect(again.status).toBe(200);
    await refusal(await watch(keys.member));
  }, 120_000);

  it("refuses past the tenant's cap, and leaves other tenants alone", async () => {
    // acme holds 4 (3 of the member's, 1 of the admin's); the cap is 5.
    expect((await watch(keys.admin)).status).toBe(200);
    const refused = await watch(keys.admin);
    await refusal(refused);
    // The root administrator's streams count against root, whichever tenant they watch.
    expect((await watch(keys.root, 'acme')).status).toBe(200);
    expect((await watch(keys.root, 'root')).status).toBe(200);
  }, 120_000);

  it('frees the slot of a stream the server ended (its key revoked)', async () => {
    // The root administrator holds 2 streams; a second key of theirs takes the third place.
    const second = await compute.embeddedIam!.createApiKey(rootId, { name: 'second' });
    const ended = await watch(second.key, 'root');
    expect(ended.status).toBe(200);
    await refusal(await watch(keys.root, 'root'));
    await compute.embeddedIam!.revokeApiKey(second.apiKey.id);
    // IAM's change ends the revoked key's stream, and its place is free.
    const frames = await ended.waitFor(1);
    expect(frames.at(-1)?.event).toBe('error');
    expect((await opensAgain(keys.root, 'root')).status).toBe(200);
  }, 120_000);
});
