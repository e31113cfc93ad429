/**
 * console-kit against a real server: the stores, the live stream (resume, the server's retry delay,
 * backoff, refusals), live routing and the 20 s fallback, and permission batches through IAM's can.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import type { WatchedEvent } from '@better-compute/client';
import {
  actionsFor,
  backoffDelay,
  createPermissions,
  describeAction,
  ListStore,
  startLiveConsole,
  watchEvents,
  type PermissionCheck,
  type WatchEventsState,
} from '../src/index.js';
import { startKitServer, type KitServer } from './kit-server.js';

let server: KitServer;
beforeAll(async () => {
  server = await startKitServer();
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

const auth = () => ({ authorization: `Bearer ${server.token}` });

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let siteCounter = 0;
const newSite = () => server.client.sites.create({ name: `site-${++siteCounter}-${Date.now() % 100000}` });

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

describe('describeAction and actionsFor come from the method table', () => {
  it('describes a release on one reservation', () => {
    expect(describeAction('reservations', 'release', 'rsv_1')).toEqual({
      path: 'reservations/release',
      method: 'reservations.release',
      action: 'compute:reservations:release',
      resource: { type: 'compute-reservation', id: 'rsv_1' },
      kind: 'mutation',
    });
    expect(describeAction('reservations', 'create').resource).toEqual({ type: 'tenant' });
  });

  it('throws for a method outside the table', () => {
    expect(() => describeAction('reservations', 'explode', 'rsv_1')).toThrow(/not a method of the API table/);
  });

  it('lists every mutation on a node', () => {
    const paths = actionsFor('nodes', 'node_1').map((action) => action.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'nodes/cordon',
        'nodes/uncordon',
        'nodes/drain',
        'nodes/label',
        'nodes/retire',
      ]),
    );
    expect(paths).not.toContain('nodes/get');
    expect(actionsFor('nodes', 'node_1', { modules: ['vps'] })).toEqual([]);
  });
});

describe('backoff', () => {
  it('doubles from the first delay and stops at the cap', () => {
    expect([1, 2, 3, 4, 7, 8, 40].map((n) => backoffDelay(n, 1000, 60_000))).toEqual([
      1000, 2000, 4000, 8000, 60_000, 60_000, 60_000,
    ]);
  });
});

describe('ListStore over a real list', () => {
  it('loads, pages, re-reads one item and drops it once deleted', async () => {
    const sites = await Promise.all([newSite(), newSite(), newSite()]);
    const store = new ListStore({
      load: (cursor) => server.client.sites.list({ limit: 2, ...(cursor ? { cursor } : {}) }),
      readOne: (siteId) => server.client.sites.get({ siteId }),
    });
    const seen: string[] = [];
    store.subscribe(() => seen.push(store.get().status));
    await store.ensure();
    expect(store.get().items).toHaveLength(2);
    expect(store.get().nextCursor).not.toBeNull();
    await store.loadMore();
    expect(store.get().items.length).toBeGreaterThanOrEqual(3);
    expect(seen[0]).toBe('loading');
    const target = sites[0]!;
    await server.client.sites.update({ siteId: target.id, description: 'changed' });
    await store.refreshItem(target.id);
    expect(store.get().items.find((site) => site.id === target.id)?.description).toBe('changed');
    await server.client.sites.delete({ siteId: target.id });
    await store.refreshItem(target.id);
    expect(store.get().items.find((site) => site.id === target.id)).toBeUndefined();
  });
});

describe('watchEvents against the real stream', () => {
  it('opens, delivers events, resumes exactly after the last one with Last-Event-ID', async () => {
    const states: WatchEventsState['status'][] = [];
    const first: WatchedEvent[] = [];
    const watch = watchEvents({
      url: `${server.url}/api/compute/watch`,
      headers: auth,
      types: ['site.'],
      onEvent: (event) => void first.push(event),
      onStatus: (state) => states.push(state.status),
    });
    await until(() => states.includes('open'), 'the stream to open');
    const one = await newSite();
    await until(() => first.length === 1, 'the first event', 30_000);
    expect(first[0]).toMatchObject({ type: 'site.created', subject: { type: 'site', id: one.id } });
    watch.stop();
    await watch.done;
    expect(states.at(-1)).toBe('stopped');
    const resumeAfter = watch.lastEventId();
    expect(resumeAfter).toBe(first[0]!.cursor);

    const two = await newSite();
    const three = await newSite();
    const resumed: WatchedEvent[] = [];
    const again = watchEvents({
      url: `${server.url}/api/compute/watch`,
      headers: auth,
      types: ['site.'],
      lastEventId: resumeAfter,
      onEvent: (event) => void resumed.push(event),
    });
    await until(() => resumed.length >= 2, 'the events missed while stopped');
    again.stop();
    expect(resumed.map((event) => event.subject.id)).toEqual([two.id, three.id]);
  });

  it('waits the server’s retry: delay when the server ends the stream, then backs off while it is gone', async () => {
    // A server of its own, stopped under the watch: its streams end cleanly, as on a redeploy.
    const leaving = await startKitServer();
    const states: WatchEventsState[] = [];
    const watch = watchEvents({
      url: `${leaving.url}/api/compute/watch`,
      headers: { authorization: `Bearer ${leaving.token}` },
      onEvent: () => {},
      initialBackoffMs: 50,
      onStatus: (state) => states.push(state),
    });
    try {
      await until(() => states.some((state) => state.status === 'open'), 'the stream to open');
      await leaving.stop();
      await until(() => states.filter((state) => state.status === 'retrying').length >= 2, 'two retries');
      const retries = states.filter((state) => state.status === 'retrying');
      // First the server's advice (live.retryMs 300), not the client's backoff; then, refused
      // connections, the doubling backoff from 50 ms.
      expect(retries[0]?.delayMs).toBe(300);
      expect(retries[0]?.error).toBeUndefined();
      expect(retries[1]?.delayMs).toBe(50);
      expect(retries[1]?.error?.code).toBe('UNAVAILABLE');
    } finally {
      watch.stop();
    }
  });

  it('backs off doubling up to the cap while the server cannot be reached', async () => {
    const port = await freePort();
    const delays: number[] = [];
    const watch = watchEvents({
      url: `http://127.0.0.1:${port}/api/compute/watch`,
      onEvent: () => {},
      initialBackoffMs: 20,
      maxBackoffMs: 80,
      onStatus: (state) => {
        if (state.status === 'retrying') delays.push(state.delayMs ?? -1);
      },
    });
    await until(() => delays.length >= 5, 'five retries');
    watch.stop();
    await watch.done;
    expect(delays.slice(0, 5)).toEqual([20, 40, 80, 80, 80]);
  });

  it('stops on a refusal instead of retrying with a credential that cannot work', async () => {
    const states: WatchEventsState[] = [];
    const watch = watchEvents({
      url: `${server.url}/api/compute/watch`,
      headers: { authorization: 'Bearer biam_ses_not-a-real-session' },
      onEvent: () => {},
      onStatus: (state) => states.push(state),
    });
    await watch.done;
    expect(states.map((state) => state.status)).toEqual(['connecting', 'stopped']);
    expect(states[1]?.error?.code).toBe('UNAUTHENTICATED');
  });
});

describe('createPermissions through IAM’s can', () => {
  async function can(token: string, checks: PermissionCheck[]) {
    const response = await fetch(`${server.url}/api/iam/can`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ checks }),
    });
    const body = (await response.json()) as {
      data?: { results: { allowed: boolean }[] };
      error?: { code: string };
    };
    if (!body.data) throw new Error(body.error?.code ?? 'no answer');
    return body.data.results;
  }

  it('batches up to 50 checks per call and answers each', async () => {
    const sizes: number[] = [];
    const permissions = createPermissions({
      authorize: (checks) => {
        sizes.push(checks.length);
        return can(server.token, checks);
      },
    });
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        permissions.can(describeAction('reservations', 'release', `rsv_${i}`)),
      ),
    );
    expect(sizes).toEqual([50, 10]);
    expect(answers.every((answer) => answer === true)).toBe(true);
    expect(permissions.peek(describeAction('reservations', 'release', 'rsv_3'))).toBe(true);
    // Asked again: answered from the cache, no new call.
    await permissions.can(describeAction('reservations', 'release', 'rsv_3'));
    expect(sizes).toEqual([50, 10]);
  });

  it('never answers "denied" for a failed batch: the checks stay unanswered and are asked again', async () => {
    let token = 'biam_ses_revoked';
    const permissions = createPermissions({ authorize: (checks) => can(token, checks) });
    const release = describeAction('reservations', 'release', 'rsv_x');
    await expect(permissions.can(release)).rejects.toThrow(/UNAUTHENTICATED/);
    expect(permissions.peek(release)).toBeUndefined();
    token = server.token;
    await expect(permissions.can(release)).resolves.toBe(true);
  });
});

describe('startLiveConsole', () => {
  it('routes pool events to the pools and a debounced capacity refresh', async () => {
    const site = await newSite();
    const live = await startLiveConsole(server.client, {
      tenantId: 'root',
      watchUrl: `${server.url}/api/compute/watch`,
      headers: auth,
      capacityDebounceMs: 100,
    });
    try {
      await Promise.all([live.pools.ensure(), live.capacity.ensure()]);
      await until(() => live.connection.get().status === 'open', 'the stream to open');
      const pool = await server.client.pools.create({
        siteId: site.id,
        name: `live-${Date.now() % 100000}`,
        class: 'gpu',
        driver: 'sim',
      });
      await until(
        () => live.pools.get().items.some((item) => item.id === pool.id),
        'the new pool in the list',
      );
      await until(
        () => (live.capacity.get().data ?? []).some((item) => item.poolId === pool.id),
        'the pool in capacity',
      );
      expect(live.events.get().some((event) => event.type === 'pool.created')).toBe(true);
    } finally {
      live.stop();
    }
  });

  it('refreshes loaded stores on its own while the stream is down, only while visible', async () => {
    const port = await freePort();
    let visible = false;
    let listCalls = 0;
    const counting = server.client;
    const live = await startLiveConsole(
      {
        ...counting,
        call: ((method: string, input: unknown) => {
          if (method === 'pools.list') listCalls++;
          return (counting.call as (m: string, i: unknown) => Promise<unknown>)(method, input);
        }) as typeof counting.call,
      } as typeof counting,
      {
        tenantId: 'root',
        watchUrl: `http://127.0.0.1:${port}/watch`,
        pollMs: 100,
        isVisible: () => visible,
        initialBackoffMs: 5_000,
      },
    );
    try {
      await live.pools.ensure();
      expect(listCalls).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 350));
      expect(listCalls).toBe(1);
      visible = true;
      await until(() => listCalls >= 3, 'refreshes while visible');
      expect(live.connection.get().status).not.toBe('open');
    } finally {
      live.stop();
    }
  });
});
