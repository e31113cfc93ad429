import { afterEach, describe, expect, it } from 'vitest';
import { call, createTestDeployment, type TestDeployment } from './support.js';

// The rate limit through the real handler on PostgreSQL: costs by method, a tenant's budget shared
// by its identities, the configuration's costs, and the refusal's retryAfterMs and Retry-After.
// A refill this slow adds nothing while a test runs, so what is allowed is the burst alone.
const SLOW = 0.001;
let deployment: TestDeployment | undefined;
afterEach(async () => {
  await deployment?.close();
  deployment = undefined;
});

const whoami = (token: string) => call(deployment!.compute, 'system.whoami', {}, { token });
const createWidget = (token: string, tenantId = 'acme') =>
  call(deployment!.compute, 'plugins.test.widgets.create', { tenantId, name: 'w' }, { token });

describe('rate limit', () => {
  it('charges a read half of what a change costs', async () => {
    deployment = await createTestDeployment('postgres', {
      rateLimit: { perSecond: SLOW, burst: 3, tenant: false },
    });
    // 3 tokens: four reads (0.5 each) and one change (1), then nothing more.
    for (let i = 0; i < 4; i++) expect((await whoami('t-acme-alice')).status).toBe(200);
    expect((await createWidget('t-acme-alice')).status).toBe(200);
    const refused = await whoami('t-acme-alice');
    expect(refused.status).toBe(429);
    expect(refused.body.error?.code).toBe('RATE_LIMITED');
    expect(refused.body.error?.details).toMatchObject({ limit: 'identity' });
    // Another identity has its own budget.
    expect((await createWidget('t-acme-bob')).status).toBe(200);
  });

  it("limits a tenant's identities together, and answers retryAfterMs with a Retry-After header", async () => {
    deployment = await createTestDeployment('postgres', {
      rateLimit: { perSecond: 100, burst: 100, tenant: { perSecond: SLOW * 2, burst: 2 } },
    });
    expect((await createWidget('t-acme-alice')).status).toBe(200);
    expect((await createWidget('t-acme-bob')).status).toBe(200);
    const response = await deployment.compute.handler(
      new Request('http://localhost/api/compute/system/whoami', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer t-acme-carol' },
        body: '{}',
      }),
    );
    expect(response.status).toBe(429);
    const body = (await response.json()) as {
      error: {
        code: string;
        message: string;
        hint: string;
        details: { retryAfterMs: number; limit: string };
      };
    };
    expect(body.error.code).toBe('RATE_LIMITED');
    expect(body.error.details.limit).toBe('tenant');
    expect(body.error.message).toMatch(/tenant/);
    expect(body.error.hint).toMatch(/docs\/rate-limits\.md/);
    // Half a token short at 0.002 tokens a second: 250 s, less what refilled while the test ran.
    expect(body.error.details.retryAfterMs).toBeGreaterThan(240_000);
    expect(body.error.details.retryAfterMs).toBeLessThanOrEqual(250_000);
    expect(response.headers.get('retry-after')).toBe(
      String(Math.ceil(body.error.details.retryAfterMs / 1000)),
    );
    // Nothing of the refused call was charged, and another tenant has its own budget.
    expect((await createWidget('t-globex-dave', 'globex')).status).toBe(200);
  });

  it('takes a method’s cost from the configuration', async () => {
    deployment = await createTestDeployment('postgres', {
      rateLimit: { perSecond: SLOW, burst: 4, tenant: false, costs: { 'plugins.test.widgets.create': 3 } },
    });
    expect((await createWidget('t-acme-alice')).status).toBe(200);
    const refused = await createWidget('t-acme-alice');
    expect(refused.status).toBe(429);
    expect(refused.body.error?.details?.retryAfterMs).toBeGreaterThan(0);
    // One token is left: two reads still fit.
    expect((await whoami('t-acme-alice')).status).toBe(200);
    expect((await whoami('t-acme-alice')).status).toBe(200);
    expect((await whoami('t-acme-alice')).status).toBe(429);
  });

  it('lets one API key make 120 changes (60 reserve-and-release pairs) at once under the defaults', async () => {
    deployment = await createTestDeployment('postgres', { rateLimit: {} });
    const answers = await Promise.all(
      Array.from({ length: 120 }, () => createWidget('t-acme-ci', 'acme').then((a) => a.status)),
    );
    expect(answers.every((status) => status === 200)).toBe(true);
  });

  it('refuses a configuration whose limit could never allow a call', async () => {
    await expect(
      createTestDeployment('postgres', { rateLimit: { perSecond: 0, burst: 10 } }),
    ).rejects.toThrow(/perSecond > 0/);
  });
});
