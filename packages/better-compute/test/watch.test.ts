/**
 * The live event stream (`GET /api/compute/watch`) over the real node server, the real embedded
 * Better IAM, on PostgreSQL and PGlite: order, resume, filters, refusals before the stream opens,
 * revocation closing an open stream, and no event skipped or sent twice when transactions overlap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { liveDeployment, type LiveDeployment, openStream } from './watch-support.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('the event stream, on %s', (kind) => {
  let d: LiveDeployment;
  let counter = 0;
  const site = async () => {
    const answer = await d.call('sites/create', { tenantId: 'root', name: `site-${++counter}` }, d.keys.root);
    expect(answer.error).toBeUndefined();
    return answer.data as { id: string };
  };
  const watchUrl = (query = '') => `${d.url}/api/compute/watch${query}`;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  let outboxReads = 0;
  beforeAll(async () => {
    d = await liveDeployment(kind, { heartbeatMs: 200 }, (text) => {
      if (text.includes('"settled"')) outboxReads++;
    });
  }, 120_000);
  afterAll(async () => {
    await d?.close();
  });

  it('sends retry first, then each event as it commits, in order, with dotted ids and events.list’s record', async () => {
    const stream = await openStream(watchUrl(), bearer(d.keys.root));
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const created = [await site(), await site()];
    const deleted = await d.call('sites/delete', { tenantId: 'root', siteId: created[0]!.id }, d.keys.root);
    expect(deleted.error).toBeUndefined();
    const frames = await stream.waitFor(3);
    stream.close();
    expect(stream.frames[0]!.retry).toBe('2000');
    expect(frames.map((f) => f.event)).toEqual(['site.created', 'site.created', 'site.deleted']);
    const records = frames.map((f) => JSON.parse(f.data!));
    expect(records.map((r) => r.subject.id)).toEqual([created[0]!.id, created[1]!.id, created[0]!.id]);
    // The id is the record's position in the dotted form, and the record is events.list's.
    for (const [index, frame] of frames.entries())
      expect(frame.id).toBe(records[index].position.replace(':', '.'));
    const listed = await d.call(
      'events.list'.replace('.', '/'),
      { tenantId: 'root', type: 'site.', limit: 500 },
      d.keys.root,
    );
    const tail = listed.data.items.slice(-3);
    expect(records).toEqual(tail);
  });

  it('reads the same through the web handler, a host that does not take the stream over', async () => {
    const openBefore = d.compute.live.size;
    const response = await d.compute.handler(new Request(watchUrl(), { headers: bearer(d.keys.root) }));
    expect(response.status).toBe(200);
    // What the stream wrote before its reader came (the retry line) is held for it, not lost.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const reader = response.body!.getReader();
    const created = await site();
    const decoder = new TextDecoder();
    let text = '';
    const deadline = Date.now() + 5000;
    while (!text.includes(created.id) && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text.startsWith('retry: 2000\n')).toBe(true);
    expect(text).toMatch(new RegExp(`event: site\\.created\ndata: \\{.*"${created.id}"`));
    expect(d.compute.live.size).toBe(openBefore + 1);
    // The reader going away closes the stream.
    await reader.cancel();
    expect(d.compute.live.size).toBe(openBefore);
  });

  it('fans one read out to every watcher of a tenant: 50 watchers, a handful of queries per event', async () => {
    const streams = await Promise.all(
      Array.from({ length: 50 }, () => openStream(watchUrl(), bearer(d.keys.root))),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    const before = outboxReads;
    const created = await site();
    for (const stream of streams) {
      const [frame] = await stream.waitFor(1);
      expect(JSON.parse(frame!.data!).subject.id).toBe(created.id);
      stream.close();
    }
    // One read per wake (the notification, the looks while other transactions of the shared server
    // held it back behind xmin, a poll), never one per watcher.
    expect(outboxReads - before).toBeLessThan(25);
  });

  it('sends keep-alive comments while idle', async () => {
    const stream = await openStream(watchUrl(), bearer(d.keys.root));
    await new Promise((resolve) => setTimeout(resolve, 500));
    stream.close();
    expect(stream.frames.filter((f) => f.comments.includes('keep-alive')).length).toBeGreaterThanOrEqual(1);
  });

  it('resumes exactly after an event with Last-Event-ID or ?since= (either form), and filters types', async () => {
    const first = await openStream(watchUrl(), bearer(d.keys.root));
    const sites = [await site(), await site(), await site()];
    const frames = await first.waitFor(3);
    first.close();
    const after = frames[0]!.id!;
    const expected = sites.slice(1).map((s) => s.id);
    const ids = (list: { data?: string }[]) => list.map((f) => JSON.parse(f.data!).subject.id);

    const byHeader = await openStream(watchUrl(), { ...bearer(d.keys.root), 'last-event-id': after });
    expect(ids(await byHeader.waitFor(2))).toEqual(expected);
    const bySince = await openStream(watchUrl(`?since=${after.replace('.', ':')}`), bearer(d.keys.root));
    expect(ids(await bySince.waitFor(2))).toEqual(expected);
    // Last-Event-ID (a reconnection) wins over the URL's since.
    const both = await openStream(watchUrl(`?since=0.0`), {
      ...bearer(d.keys.root),
      'last-event-id': frames[1]!.id!,
    });
    expect(ids(await both.waitFor(1))).toEqual([sites[2]!.id]);
    // Nothing more, and nothing twice, once another event arrives.
    const next = await site();
    for (const s of [byHeader, bySince, both]) {
      const all = await s.waitFor(s === both ? 2 : 3);
      expect(ids(all).at(-1)).toBe(next.id);
      expect(new Set(all.map((f) => f.id)).size).toBe(all.length);
      s.close();
    }

    const filtered = await openStream(
      watchUrl(`?since=${after}&types=site.deleted,pool.*`),
      bearer(d.keys.root),
    );
    const another = await site();
    await d.call('sites/delete', { tenantId: 'root', siteId: another.id }, d.keys.root);
    const only = await filtered.waitFor(1);
    filtered.close();
    expect(only.map((f) => f.event)).toEqual(['site.deleted']);
    expect(JSON.parse(only[0]!.data!).subject.id).toBe(another.id);
  });

  it('refuses before streaming, with the JSON envelope: no credential, bad input, another tenant', async () => {
    const refusal = async (url: string, headers: Record<string, string>) => {
      const response = await fetch(url, { headers });
      const body = (await response.json()) as { error: { code: string; message: string } };
      return { status: response.status, code: body.error.code, message: body.error.message };
    };
    expect(await refusal(watchUrl(), {})).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
    expect(await refusal(watchUrl(), bearer('bc_not-a-key'))).toMatchObject({
      status: 401,
      code: 'UNAUTHENTICATED',
    });
    expect(await refusal(watchUrl(), { authorization: 'Basic x' })).toMatchObject({ status: 401 });
    const types = Array.from({ length: 21 }, (_, i) => `t${i}.x`).join(',');
    expect(await refusal(watchUrl(`?types=${types}`), bearer(d.keys.root))).toMatchObject({
      status: 400,
      code: 'INVALID_ARGUMENT',
      message: 'types takes at most 20 patterns (got 21)',
    });
    const twenty = Array.from({ length: 20 }, (_, i) => `t${i}.x`).join(',');
    const fine = await openStream(watchUrl(`?types=${twenty}`), bearer(d.keys.root));
    expect(fine.status).toBe(200);
    fine.close();
    for (const query of [
      '?types=node*',
      '?types=',
      '?since=12',
      '?since=1:2:3',
      '?tenantId=Not_A_Tenant',
      '?x=1',
      '?types=a.b&types=c.d',
      `?since=${'9'.repeat(5000)}`,
    ])
      expect(await refusal(watchUrl(query), bearer(d.keys.root)), query).toMatchObject({
        status: 400,
        code: 'INVALID_ARGUMENT',
      });
    expect(await refusal(watchUrl(), { ...bearer(d.keys.root), 'last-event-id': 'abc' })).toMatchObject({
      status: 400,
    });
    expect(await refusal(watchUrl('?since=%00'), bearer(d.keys.root))).toMatchObject({ status: 400 });
    // A member of acme asks for root's events: refused, and root's events never reach acme's stream.
    const foreign = await refusal(watchUrl('?tenantId=root'), bearer(d.keys.acmeMember));
    expect(foreign).toMatchObject({ status: 403, code: 'ACCESS_DENIED' });
    expect(await refusal(watchUrl('?tenantId=nosuch'), bearer(d.keys.acmeMember))).toMatchObject({
      status: 403,
    });
    const own = await openStream(watchUrl('?since=0.0'), bearer(d.keys.acmeMember));
    expect(own.status).toBe(200);
    await site();
    const project = await d.call(
      'projects/create',
      { tenantId: 'acme', name: `p${++counter}` },
      d.keys.acmeAdmin,
    );
    expect(project.error).toBeUndefined();
    const seen = await own.waitFor(1);
    own.close();
    expect(seen.every((f) => JSON.parse(f.data!).tenantId === 'acme')).toBe(true);
    expect(seen.map((f) => f.event)).toContain('project.created');
    // A cookie without the CSRF header is refused like any call's.
    expect(await refusal(watchUrl(), { cookie: 'better-iam.session=abc' })).toMatchObject({ status: 403 });
    // Methods other than GET are no route.
    const post = await fetch(watchUrl(), { method: 'POST', headers: bearer(d.keys.root), body: '{}' });
    expect(post.status).toBe(404);
    // The root path the CLI defaults to serves the same stream.
    const root = await openStream(`${d.url}/watch`, bearer(d.keys.root));
    expect(root.status).toBe(200);
    root.close();
  });

  it('closes an open stream with event: error when its API key is revoked, its binding withdrawn, or its tenant suspended', async () => {
    const iam = d.compute.embeddedIam!;
    const created = await iam.createApiKey(d.ids.root, { name: `watch-${counter++}` });
    const stream = await openStream(watchUrl(), bearer(created.key));
    expect(stream.status).toBe(200);
    await site();
    await stream.waitFor(1);
    const revokedAt = Date.now();
    await iam.revokeApiKey(created.apiKey.id);
    await stream.ended;
    expect(Date.now() - revokedAt).toBeLessThan(2000);
    const last = stream.frames.at(-1)!;
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data!).error.code).toBe('UNAUTHENTICATED');

    // A withdrawn compute:events:read: the person's only binding is revoked.
    const person = await iam.createPerson({ tenantId: 'acme', email: `watcher${counter++}@acme.test` });
    const binding = await iam.createBinding({ tenantId: 'acme', role: 'member', principalId: person.id });
    const personKey = (await iam.createApiKey(person.id, { name: 'watch' })).key;
    const bound = await openStream(watchUrl(), bearer(personKey));
    expect(bound.status).toBe(200);
    const unboundAt = Date.now();
    await iam.revokeBinding(binding.id);
    await bound.ended;
    expect(Date.now() - unboundAt).toBeLessThan(2000);
    expect(JSON.parse(bound.frames.at(-1)!.data!).error.code).toBe('ACCESS_DENIED');

    const acme = await openStream(watchUrl(), bearer(d.keys.acmeMember));
    await iam.suspendTenant('acme');
    try {
      await acme.ended;
      expect(JSON.parse(acme.frames.at(-1)!.data!).error.code).toBe('TENANT_SUSPENDED');
    } finally {
      await iam.reactivateTenant('acme');
    }
  });

  it.runIf(kind === 'postgres')(
    'another replica on the same database streams this one’s events, and closes when a key is revoked here',
    async () => {
      const { betterCompute } = await import('../src/index.js');
      const { createNodeServer } = await import('../src/host/node-adapter.js');
      const { closeServer, listen } = await import('../src/host/serve.js');
      const replica = await betterCompute({ database: d.database.url!, rateLimit: false }, { log: () => {} });
      await replica.embeddedIam!.ready();
      const server = createNodeServer(replica);
      const url = await listen(server, 0, '127.0.0.1');
      try {
        const created = await d.compute.embeddedIam!.createApiKey(d.ids.root, {
          name: `replica-${counter++}`,
        });
        const stream = await openStream(`${url}/api/compute/watch?types=site.*`, bearer(created.key));
        expect(stream.status).toBe(200);
        const made = await site();
        const [frame] = await stream.waitFor(1);
        expect(JSON.parse(frame!.data!).subject.id).toBe(made.id);
        const revokedAt = Date.now();
        await d.compute.embeddedIam!.revokeApiKey(created.apiKey.id);
        await stream.ended;
        expect(Date.now() - revokedAt).toBeLessThan(2000);
        expect(JSON.parse(stream.frames.at(-1)!.data!).error.code).toBe('UNAUTHENTICATED');
      } finally {
        await closeServer(server);
        await replica.close();
      }
    },
  );

  it.runIf(kind === 'postgres')(
    'delivers an event that commits later with a lower position, and none twice',
    async () => {
      const { default: pg } = await import('pg');
      const early = new pg.Client({ connectionString: d.database.url });
      const late = new pg.Client({ connectionString: d.database.url });
      await early.connect();
      await late.connect();
      const insert = (client: InstanceType<typeof pg.Client>, id: string) =>
        client.query(
          `insert into compute.events (id, tx_index, tenant_id, type, subject_type, subject_id) values ($1, 0, 'root', 'test.overlap', 'test', $1)`,
          [id],
        );
      const stream = await openStream(watchUrl('?types=test.overlap'), bearer(d.keys.root));
      try {
        await early.query('begin');
        await insert(early, `evt_early_${counter}`);
        await late.query('begin');
        await insert(late, `evt_late_${counter}`);
        await late.query('commit');
        // The later transaction committed, but the earlier one (lower position) is still open.
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(stream.frames.filter((f) => f.data)).toEqual([]);
        await early.query('commit');
        const frames = await stream.waitFor(2);
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(stream.frames.filter((f) => f.data).map((f) => JSON.parse(f.data!).subject.id)).toEqual([
          `evt_early_${counter}`,
          `evt_late_${counter}`,
        ]);
        expect(frames[0]!.id! < frames[1]!.id!).toBe(true);
      } finally {
        stream.close();
        await early.end();
        await late.end();
      }
    },
  );
  it.runIf(kind === 'postgres')(
    'a stream opened while an older transaction is open starts at that moment: nothing committed before it, all after',
    async () => {
      const { default: pg } = await import('pg');
      const holder = new pg.Client({ connectionString: d.database.url });
      await holder.connect();
      try {
        // An open transaction with an id holds the settled horizon back.
        await holder.query('begin');
        await holder.query('select pg_current_xact_id()');
        const earlier = await site();
        const stream = await openStream(watchUrl('?types=site.created'), bearer(d.keys.root));
        const later = await site();
        await holder.query('commit');
        const frames = await stream.waitFor(1);
        await new Promise((resolve) => setTimeout(resolve, 300));
        stream.close();
        const ids = stream.frames.filter((f) => f.data).map((f) => JSON.parse(f.data!).subject.id);
        expect(ids).toEqual([later.id]);
        expect(ids).not.toContain(earlier.id);
        expect(frames).toHaveLength(1);
      } finally {
        await holder.end();
      }
    },
  );
  // Last: it stops this deployment's server.
  it('closing the server ends its open streams, so it stops at once', async () => {
    const stream = await openStream(watchUrl(), bearer(d.keys.root));
    expect(stream.status).toBe(200);
    const { closeServer } = await import('../src/host/serve.js');
    const started = Date.now();
    await closeServer(d.server);
    await stream.ended;
    // Well before closeServer's 10 s cut of connections that stay busy.
    expect(Date.now() - started).toBeLessThan(8000);
  });
});
