/**
 * The OpenAPI document (docs/openapi.md): valid OpenAPI 3.1 by a maintained validator, one path per
 * method, served by a real handler as `documentOf` makes it, and usable: requests built from it
 * succeed against the handler and its answers match the schemas it gives.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { methodKey, methodPath, type AnyMethod } from '@better-compute/core';
import { methodList } from '@better-compute/core/methods';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentOf, type OpenApiDocument } from '../src/http/openapi.js';
import { createTestDeployment, type TestDeployment, widgetsCreate } from './support.js';

const BASE = '/api/compute';
const kinds = await testDatabaseKinds();
const builtIn = documentOf(methodList, { basePath: BASE });

type Json = Record<string, any>;

/** The document with every `$ref` replaced by what it names, for schema checks. */
async function dereferenced(document: OpenApiDocument): Promise<Json> {
  return (await SwaggerParser.dereference(structuredClone(document) as never)) as Json;
}

function operation(document: Json, key: string): { path: string; op: Json } {
  for (const [path, item] of Object.entries(document.paths as Json))
    if (item.post?.operationId === key) return { path, op: item.post };
  throw new Error(`no operation ${key}`);
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
function check(schema: Json, value: unknown): string[] {
  const validate = ajv.compile(schema);
  return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}

/**
 * Input fields of the built-in methods without a description, as `method.field`. A ratchet: this
 * list may shrink, never grow; the goal is none (issue 37).
 */
const UNDESCRIBED_LIMIT = 0;
function undescribedFields(document: OpenApiDocument): string[] {
  const missing: string[] = [];
  for (const method of methodList) {
    const { op } = operation(document, methodKey(method));
    const name = (op.requestBody.content['application/json'].schema.$ref as string).split('/').pop()!;
    const properties = (document.components.schemas[name]?.properties ?? {}) as Json;
    for (const [field, schema] of Object.entries(properties))
      if (typeof schema.description !== 'string' || schema.description.trim() === '')
        missing.push(`${methodKey(method)}.${field}`);
  }
  return missing;
}

describe('the OpenAPI document of the built-in table', () => {
  it('is valid OpenAPI 3.1 by @apidevtools/swagger-parser', async () => {
    await expect(SwaggerParser.validate(structuredClone(builtIn) as never)).resolves.toBeTruthy();
    expect(builtIn.openapi).toMatch(/^3\.1\./);
  });

  it('the validator refuses a broken document (it is not a no-op)', async () => {
    const broken = structuredClone(builtIn) as Json;
    delete broken.paths[`${BASE}/system/version`].post.responses['200'].description;
    await expect(SwaggerParser.validate(broken as never)).rejects.toThrow(/description/);
  });

  it('every method has its POST path, operation id, kind and IAM action', () => {
    for (const method of methodList) {
      const op = (builtIn.paths[`${BASE}${methodPath(method)}`] as Json | undefined)?.post;
      expect(op, methodKey(method)).toBeDefined();
      expect(op.operationId).toBe(methodKey(method));
      expect(op['x-kind']).toBe(method.kind);
      expect(op['x-iam-action']).toBe('action' in method.access ? method.access.action : undefined);
    }
    // The methods and the document's own path; nothing else.
    expect(Object.keys(builtIn.paths)).toHaveLength(methodList.length + 1);
  });

  it('public methods carry no security requirement; the others the bearer scheme', () => {
    expect(builtIn.security).toBeUndefined();
    const version = operation(builtIn, 'system.version').op;
    expect(version.security).toBeUndefined();
    expect(version['x-access']).toBe('public');
    const list = operation(builtIn, 'pools.list').op;
    expect(list.security).toEqual([{ bearerAuth: [] }]);
    expect(list['x-iam-action']).toBe('compute:pools:read');
    expect((builtIn.components as Json).securitySchemes.bearerAuth).toMatchObject({
      type: 'http',
      scheme: 'bearer',
    });
  });

  it('answers 429 with Retry-After everywhere, and lists the error codes by status', () => {
    const responses = (builtIn.components as Json).responses;
    expect(responses.RateLimited.headers['Retry-After']).toBeDefined();
    expect(responses.RateLimited.content['application/json'].schema.allOf[1]).toMatchObject({
      properties: { error: { properties: { code: { enum: ['RATE_LIMITED'] } } } },
    });
    expect(responses.Conflict.description).toMatch(/`INVALID_STATE`/);
    expect(JSON.stringify(responses)).not.toMatch(/MISSING_ENV|CONFIG_NOT_FOUND/);
    for (const method of methodList) {
      const { op } = operation(builtIn, methodKey(method));
      expect(op.responses['429'], methodKey(method)).toEqual({ $ref: '#/components/responses/RateLimited' });
      expect('409' in op.responses).toBe(method.kind === 'mutation');
    }
  });

  it('mutations that keep answers take the Idempotency-Key header; others do not', () => {
    for (const method of methodList) {
      const { op } = operation(builtIn, methodKey(method));
      const takesKey = op.parameters.some((p: Json) => p.$ref === '#/components/parameters/IdempotencyKey');
      expect(takesKey, methodKey(method)).toBe(method.kind === 'mutation' && method.idempotent === true);
    }
    expect((builtIn.components as Json).parameters.IdempotencyKey).toMatchObject({
      name: 'Idempotency-Key',
      in: 'header',
      schema: { type: 'string', minLength: 8, maxLength: 200 },
    });
  });

  it('a tenant-scoped method does not require tenantId (the credential fills it)', async () => {
    const doc = await dereferenced(builtIn);
    const schema = operation(doc, 'pools.get').op.requestBody.content['application/json'].schema;
    expect(schema.required).toEqual(['poolId']);
    expect(schema.properties.tenantId.description).toMatch(/tenant/);
  });

  it('is the same text for the same methods, whatever their order', () => {
    const reversed = documentOf([...methodList].reverse(), { basePath: BASE });
    expect(JSON.stringify(reversed)).toBe(JSON.stringify(builtIn));
  });

  it(`input fields without a description: at most ${UNDESCRIBED_LIMIT}, and shrinking`, () => {
    const missing = undescribedFields(builtIn);
    // When this fails because fewer are missing, lower UNDESCRIBED_LIMIT to the new count.
    expect(missing.length, missing.join('\n')).toBeLessThanOrEqual(UNDESCRIBED_LIMIT);
    // Once none is missing, every new input field must come with its description.
    if (UNDESCRIBED_LIMIT === 0) expect(missing).toEqual([]);
    // The most used groups are described in full.
    const used = ['reservations.', 'pools.', 'nodes.cordon', 'nodes.join', 'nodes.list', 'events.list'];
    expect(missing.filter((field) => used.some((prefix) => field.startsWith(prefix)))).toEqual([]);
  });
});

describe.each(kinds)('the document served by a deployment on %s', (kind) => {
  let deployment: TestDeployment;
  let served: Response;
  const url = `http://localhost${BASE}/openapi.json`;
  const get = (headers: Record<string, string> = {}, client?: { clientAddress: string }) =>
    deployment.compute.handler(new Request(url, { headers }), client);
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    deployment.compute.handler(
      new Request(`http://localhost${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      }),
    );

  beforeAll(async () => {
    deployment = await createTestDeployment(kind, { rateLimit: { address: { perSecond: 0.01, burst: 2 } } });
    served = await get();
  }, 120_000);
  afterAll(async () => {
    await deployment?.close();
  });

  it('is documentOf the methods the deployment bound, its plugin included, public and cacheable', async () => {
    expect(served.status).toBe(200);
    expect(served.headers.get('cache-control')).toMatch(/^public/);
    expect(served.headers.get('etag')).toMatch(/^"[A-Za-z0-9_-]{32}"$/);
    const document = (await served.clone().json()) as OpenApiDocument;
    const methods: AnyMethod[] = [...methodList, widgetsCreate as unknown as AnyMethod];
    expect(document).toEqual(documentOf(methods, { basePath: BASE }));
    const plugin = operation(document, 'plugins.test.widgets.create');
    expect(plugin.path).toBe(`${BASE}/plugins/test/widgets/create`);
    expect(plugin.op['x-iam-action']).toBe('compute:widgets:create');
    await expect(SwaggerParser.validate(structuredClone(document) as never)).resolves.toBeTruthy();
  });

  it('answers 304 to an If-None-Match naming its ETag, and the document again to another', async () => {
    const etag = served.headers.get('etag')!;
    const again = await get({ 'if-none-match': `W/${etag}, "other"` });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
    expect(again.headers.get('etag')).toBe(etag);
    const other = await get({ 'if-none-match': `"${'x'.repeat(4000)}"` });
    expect(other.status).toBe(200);
    expect(await other.text()).toBe(await served.clone().text());
  });

  it('is read with GET or HEAD only; a credential is not needed, and a bad one is not looked at', async () => {
    const head = await deployment.compute.handler(new Request(url, { method: 'HEAD' }));
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    const posted = await post(`${BASE}/openapi.json`, {});
    expect(posted.status).toBe(404);
    expect(((await posted.json()) as Json).error.code).toBe('NOT_FOUND');
    expect((await get({ authorization: 'Bearer nope' })).status).toBe(200);
  });

  it('is limited by the client’s address, with Retry-After', async () => {
    const client = { clientAddress: '203.0.113.9' };
    const statuses = [];
    let refused: Response | undefined;
    for (let i = 0; i < 6; i++) {
      const answer = await get({}, client);
      statuses.push(answer.status);
      if (answer.status === 429) refused = answer;
    }
    expect(statuses.slice(0, 4)).toEqual([200, 200, 200, 200]);
    expect(refused?.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await refused!.json()) as Json).error.code).toBe('RATE_LIMITED');
    // Another address is not held back.
    expect((await get({}, { clientAddress: '198.51.100.7' })).status).toBe(200);
  });

  it('a request built from the document succeeds, and its answer matches the document', async () => {
    const document = await dereferenced((await served.clone().json()) as OpenApiDocument);
    const calls: Array<[string, Json, Record<string, string>]> = [
      ['system.version', {}, {}],
      ['pools.list', { limit: 10 }, { authorization: 'Bearer t-acme-alice' }],
      ['plugins.test.widgets.create', { name: 'from-openapi' }, { authorization: 'Bearer t-acme-alice' }],
    ];
    for (const [key, body, headers] of calls) {
      const { path, op } = operation(document, key);
      expect(check(op.requestBody.content['application/json'].schema, body), key).toEqual([]);
      const answer = await post(path, body, headers);
      expect(answer.status, key).toBe(200);
      const json = await answer.json();
      expect(check(op.responses['200'].content['application/json'].schema, json), key).toEqual([]);
    }
    // A failure matches the error envelope of its status.
    const { path, op } = operation(document, 'pools.list');
    const refused = await post(path, {});
    expect(refused.status).toBe(401);
    expect(check(op.responses['401'].content['application/json'].schema, await refused.json())).toEqual([]);
    // And a body the schema refuses is refused by the handler too.
    expect(check(op.requestBody.content['application/json'].schema, { limit: 0 })).not.toEqual([]);
    expect((await post(path, { limit: 0 }, { authorization: 'Bearer t-acme-alice' })).status).toBe(400);
  });

  it('the Idempotency-Key header keeps an answer as the body’s key does', async () => {
    const path = `${BASE}/plugins/test/widgets/create`;
    const headers = { authorization: 'Bearer t-acme-alice', 'idempotency-key': 'openapi-key-0001' };
    const first = await post(path, { name: 'kept' }, headers);
    const second = await post(path, { name: 'kept' }, headers);
    expect(first.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await second.json()).toEqual(await first.json());
    // The body's key is the same key.
    const viaBody = await post(
      path,
      { name: 'kept', idempotencyKey: 'openapi-key-0001' },
      { authorization: 'Bearer t-acme-alice' },
    );
    expect(viaBody.headers.get('idempotent-replayed')).toBe('true');
  });

  it('refuses an Idempotency-Key that disagrees, is malformed, or goes to a mutation that keeps none', async () => {
    const auth = { authorization: 'Bearer t-acme-alice' };
    const path = `${BASE}/plugins/test/widgets/create`;
    const disagrees = await post(
      path,
      { name: 'x', idempotencyKey: 'openapi-key-aaaa' },
      { ...auth, 'idempotency-key': 'openapi-key-bbbb' },
    );
    expect(disagrees.status).toBe(400);
    expect(((await disagrees.json()) as Json).error.details).toEqual({ field: 'idempotencyKey' });
    const malformed = await post(
      `${BASE}/pools/create`,
      { siteId: 'site_01k0000000000000000000000', name: 'gpu-a' },
      { ...auth, 'idempotency-key': 'short' },
    );
    expect(malformed.status).toBe(400);
    const issues = ((await malformed.json()) as Json).error.details.issues as Json[];
    expect(issues.map((issue) => issue.path)).toContainEqual(['idempotencyKey']);
    const cordon = await post(
      `${BASE}/nodes/cordon`,
      { nodeId: 'node_01k0000000000000000000000' },
      { ...auth, 'idempotency-key': 'openapi-key-cccc' },
    );
    expect(cordon.status).toBe(400);
    const refusal = ((await cordon.json()) as Json).error;
    expect(refusal).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'Idempotency-Key' } });
    expect(refusal.message).toBe('nodes.cordon takes no idempotency key');
    // A query is safe to retry anyway: the header changes nothing.
    const list = await post(`${BASE}/pools/list`, {}, { ...auth, 'idempotency-key': 'openapi-key-dddd' });
    expect(list.status).toBe(200);
  });
});

describe('better-compute openapi', () => {
  const root = join(import.meta.dirname, '..', '..', '..');
  const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
  const built = join(root, 'packages', 'better-compute', 'dist', 'cli', 'bin.cjs');
  const cwd = mkdtempSync(join(tmpdir(), 'bc-openapi-'));
  const run = (args: string[]) =>
    spawnSync(process.execPath, [bin, ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: cwd },
      encoding: 'utf8',
      // The document is over spawnSync's 1 MiB default.
      maxBuffer: 16 * 1024 * 1024,
    });
  const newest = (dir: string): number =>
    Math.max(
      0,
      ...readdirSync(dir, { withFileTypes: true }).map((entry) =>
        entry.isDirectory() ? newest(join(dir, entry.name)) : statSync(join(dir, entry.name)).mtimeMs,
      ),
    );

  beforeAll(() => {
    const sources = Math.max(
      ...['core', 'client', 'better-compute', 'db', 'events', 'iam'].map((p) =>
        newest(join(root, 'packages', p, 'src')),
      ),
    );
    if (!existsSync(built) || statSync(built).mtimeMs < sources)
      execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'inherit' });
  }, 180_000);

  it('prints the built-in document, and writes it to --out but never over a file', () => {
    const printed = run(['openapi']);
    expect(printed.stderr).toBe('');
    expect(printed.status).toBe(0);
    expect(JSON.parse(printed.stdout)).toEqual(builtIn);
    const written = run(['openapi', '--out', 'api.json', '--base-path', '/compute']);
    expect(written.status).toBe(0);
    expect(JSON.parse(readFileSync(join(cwd, 'api.json'), 'utf8'))).toEqual(
      documentOf(methodList, { basePath: '/compute' }),
    );
    const again = run(['openapi', '--out', 'api.json']);
    expect(again.status).not.toBe(0);
    expect(again.stderr).toMatch(/ALREADY_EXISTS/);
  });

  it('refuses a base path that is not one', () => {
    const refused = run(['openapi', '--base-path', 'api compute']);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/INVALID_ARGUMENT: --base-path/);
  });
});
