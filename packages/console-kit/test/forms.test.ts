/**
 * Forms drawn from the deployment's own OpenAPI document, against a real server: the fields of
 * `sites.create` and `quotas.set` as the server describes them, an input built from typed values,
 * a server refusal landing on its field, a name already held on the name, and a success.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForm, formFieldsOf, inputOf, type ApiDocument } from '../src/index.js';
import { startKitServer, type KitServer } from './kit-server.js';

let kit: KitServer;
let document: ApiDocument;

beforeAll(async () => {
  kit = await startKitServer();
  document = (await (await fetch(`${kit.url}/api/compute/openapi.json`)).json()) as ApiDocument;
}, 120_000);

afterAll(async () => {
  await kit?.stop();
});

describe('formFieldsOf', () => {
  it('names, explains and types the fields as the server takes them, without the tenant, key or version', () => {
    const fields = formFieldsOf(document, 'sites.create');
    expect(fields.map((f) => [f.name, f.kind, f.required])).toEqual([
      ['name', 'text', true],
      ['region', 'text', false],
      ['description', 'textarea', false],
      ['labels', 'labels', false],
    ]);
    expect(fields[0]!.description).toContain('1-63 lowercase letters');
    const quota = formFieldsOf(document, 'quotas.set', { labels: { subjectTenantId: 'Tenant' } });
    expect(quota.find((f) => f.name === 'resource')).toMatchObject({
      kind: 'choice',
      choices: ['gpus', 'reservations'],
      required: false,
      defaultValue: 'gpus',
    });
    expect(quota.find((f) => f.name === 'limit')).toMatchObject({ kind: 'integer', nullable: true });
    expect(quota.find((f) => f.name === 'subjectTenantId')!.label).toBe('Tenant');
    expect(quota.some((f) => f.name === 'ifVersion' || f.name === 'tenantId')).toBe(false);
    expect(formFieldsOf(document, 'sites.create', { only: ['region', 'name'] }).map((f) => f.name)).toEqual([
      'region',
      'name',
    ]);
  });

  it('takes a page’s kind for a field, and refuses a choice the schema does not offer', () => {
    const webhook = formFieldsOf(document, 'webhooks.create', { only: ['url', 'events'] });
    expect(webhook.map((f) => f.kind)).toEqual(['textarea', 'list']);
    const oneLine = formFieldsOf(document, 'webhooks.create', { only: ['url'], kinds: { url: 'text' } });
    expect(oneLine[0]!.kind).toBe('text');
    expect(() =>
      formFieldsOf(document, 'webhooks.create', { only: ['url'], kinds: { url: 'choice' } }),
    ).toThrow("webhooks.create's url has no choices to offer");
  });

  it('says which method it cannot find', () => {
    expect(() => formFieldsOf(document, 'sites.explode')).toThrow(
      'the API document has no method sites.explode (no POST /api/compute/sites/explode)',
    );
  });
});

describe('inputOf', () => {
  const fields = () => formFieldsOf(document, 'quotas.set');

  it('reads numbers, clears a nullable field with null and leaves an empty optional field out', () => {
    expect(
      inputOf(fields(), { poolId: ' pool_1 ', subjectTenantId: 'acme', resource: '', limit: '8' }),
    ).toEqual({
      input: { poolId: 'pool_1', subjectTenantId: 'acme', limit: 8 },
      errors: {},
    });
    expect(
      inputOf(fields(), { poolId: 'pool_1', subjectTenantId: 'acme', limit: '' }).input.limit,
    ).toBeNull();
  });

  it('refuses what cannot be sent, on its field: a missing required value, a fraction, a label line without =', () => {
    expect(inputOf(fields(), { poolId: '', subjectTenantId: 'acme', limit: '1.5' }).errors).toEqual({
      poolId: 'Pool id is required',
      limit: 'Limit must be a whole number',
    });
    const site = formFieldsOf(document, 'sites.create');
    expect(inputOf(site, { name: 'a', labels: 'zone=a\nrack' }).errors).toEqual({
      labels: 'Labels: write one key=value per line (not "rack")',
    });
    expect(inputOf(site, { name: 'a', labels: 'zone = a\n\nexample.com/rack=12' }).input.labels).toEqual({
      zone: 'a',
      'example.com/rack': '12',
    });
  });
});

describe('FormStore against the server', () => {
  const siteForm = () =>
    createForm(document, 'sites.create', {
      submit: (input) =>
        kit.client.sites.create({ ...(input as { name: string }), idempotencyKey: crypto.randomUUID() }),
      nameField: 'name',
      clearOnSuccess: true,
    });

  it('places the server’s refusal on its field, and a name already held on the name', async () => {
    const form = siteForm();
    form.change('name', 'Bad Name!');
    expect(await form.submit()).toBeUndefined();
    expect(form.get().errors.name).toContain('1-63 lowercase letters');
    expect(form.get().formError).toBeNull();
    form.change('name', 'row-a');
    expect(form.get().errors.name).toBeUndefined();
    form.change('labels', 'zone=a');
    const site = await form.submit();
    expect(site).toMatchObject({ name: 'row-a', labels: { zone: 'a' } });
    expect(form.get().values.name).toBe('');
    form.change('name', 'row-a');
    await form.submit();
    expect(form.get().errors.name).toContain('row-a');
  });

  it('a refusal no field carries is the form’s; the form’s own check sends nothing', async () => {
    const form = createForm(document, 'quotas.set', {
      submit: (input) => kit.client.quotas.set(input as never),
    });
    form.change('poolId', 'pool_does_not_exist');
    form.change('subjectTenantId', 'root');
    form.change('limit', '4');
    await form.submit();
    expect(form.get()).toMatchObject({
      errors: { poolId: 'must be a pool id like pool_01…' },
      formError: null,
    });
    form.change('poolId', 'pool_01k5w9z3d8e4f5g6h7j8k9m0n1');
    await form.submit();
    expect(form.get().errors).toEqual({});
    expect(form.get().formError).toMatchObject({
      code: 'NOT_FOUND',
      message: 'pool pool_01k5w9z3d8e4f5g6h7j8k9m0n1 does not exist',
    });
    const listed = await kit.client.sites.list({});
    const empty = createForm(document, 'sites.create', {
      submit: () => Promise.reject(new Error('must not be sent')),
    });
    await empty.submit();
    expect(empty.get().errors).toEqual({ name: 'Name is required' });
    expect((await kit.client.sites.list({})).items.length).toBe(listed.items.length);
  });
});
