/**
 * The outbox notifies only for tenants a live stream watches (compute.live_watches): a write
 * nobody watches takes no NOTIFY (whose lock serialises commits), a watched tenant's write wakes its
 * streams at once, and a writer that ran its trigger before the watch existed is still delivered
 * without waiting for the poll. On PostgreSQL, with a poll of a minute, so only a wake can deliver.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../src/db/tables.js';
import { LiveHub } from '../src/live/hub.js';
import { liveDeployment, type LiveDeployment, openStream } from './watch-support.js';

const kinds = await testDatabaseKinds();

describe.runIf(kinds.includes('postgres'))('notifications for watched tenants only', () => {
  let d: LiveDeployment;
  let listener: pg.Client;
  const notified: string[] = [];
  let counter = 0;
  const watchUrl = (type: string) => `${d.url}/api/compute/watch?types=${type}`;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const insertEvent = (client: pg.Client, tenantId: string, type: string) => {
    const id = `evt_watched_${++counter}`;
    return client
      .query(
        `insert into compute.events (id, tx_index, tenant_id, type, subject_type, subject_id)
         values ($1, 0, $2, $3, 'test', $1)`,
        [id, tenantId, type],
      )
      .then(() => id);
  };
  const connect = async () => {
    const client = new pg.Client({ connectionString: d.database.url });
    await client.connect();
    return client;
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

  beforeAll(async () => {
    d = await liveDeployment('postgres', { pollMs: 60_000 });
    listener = await connect();
    listener.on('notification', (message) => notified.push(message.payload ?? ''));
    await listener.query('listen better_compute_events');
  }, 120_000);
  afterAll(async () => {
    await listener?.end();
    await d?.close();
  });

  it('sends no NOTIFY for a tenant nobody watches, and wakes a watched tenant’s stream at once', async () => {
    const writer = await connect();
    try {
      await insertEvent(writer, 'acme', 'test.unwatched');
      await settle();
      expect(notified).toEqual([]);

      const stream = await openStream(watchUrl('test.watched'), bearer(d.keys.root));
      expect(stream.status).toBe(200);
      const id = await insertEvent(writer, 'root', 'test.watched');
      const [frame] = await stream.waitFor(1, 3000);
      expect(JSON.parse(frame!.data!).subject.id).toBe(id);
      await insertEvent(writer, 'acme', 'test.unwatched');
      await settle();
      expect(notified).toEqual(['root']);
      stream.close();

      const { rows } = await writer.query(
        `select tenant_id, watched_until > now() as current from compute.live_watches order by tenant_id`,
      );
      expect(rows).toEqual([{ tenant_id: 'root', current: true }]);
    } finally {
      await writer.end();
    }
  });

  it('delivers a write whose trigger ran before the tenant was watched, when it commits', async () => {
    const writer = await connect();
    try {
      await writer.query('begin');
      const id = await insertEvent(writer, 'acme', 'test.before-watch');
      const stream = await openStream(watchUrl('test.before-watch'), bearer(d.keys.acmeAdmin));
      expect(stream.status).toBe(200);
      await settle();
      expect(stream.frames.filter((f) => f.data)).toEqual([]);
      await writer.query('commit');
      // Its trigger saw no watch and sent nothing: the stream learns of it from the look the hub
      // takes once the transactions older than the watch have ended, not from the minute's poll.
      const [frame] = await stream.waitFor(1, 3000);
      expect(JSON.parse(frame!.data!).subject.id).toBe(id);
      expect(notified).not.toContain('acme');
      stream.close();
    } finally {
      await writer.end();
    }
  });

  it('renews the watch of a tenant while this process has its streams, and stops once they close', async () => {
    const hub = new LiveHub({
      db: () => d.database.db as unknown as Kysely<ComputeTables>,
      database: d.database,
      pollMs: 60_000,
      watchRenewMs: 300,
      iamFeed: false,
      log: () => {},
    });
    const writer = await connect();
    const until = async () =>
      (
        await writer.query(
          `select extract(epoch from watched_until - now())::float8 as left from compute.live_watches where tenant_id = 'renewed'`,
        )
      ).rows[0]?.left as number | undefined;
    const stream = {
      tenantId: 'renewed',
      cursor: '0:0',
      deliver: () => {},
      reauthorize: async () => {},
      end: () => {},
    };
    try {
      await hub.add(stream);
      expect(await until()).toBeGreaterThan(100);
      await writer.query(
        `update compute.live_watches set watched_until = now() + interval '1 second' where tenant_id = 'renewed'`,
      );
      await new Promise((resolve) => setTimeout(resolve, 800));
      expect(await until()).toBeGreaterThan(100);
      hub.remove(stream);
      await writer.query(
        `update compute.live_watches set watched_until = now() + interval '1 second' where tenant_id = 'renewed'`,
      );
      await new Promise((resolve) => setTimeout(resolve, 800));
      expect(await until()).toBeLessThan(2);
    } finally {
      await hub.close();
      await writer.end();
    }
  });

  it('lets a watch lapse when no process renews it', async () => {
    const writer = await connect();
    try {
      await writer.query(`update compute.live_watches set watched_until = now() - interval '1 second'`);
      const before = notified.length;
      await insertEvent(writer, 'root', 'test.lapsed');
      await settle();
      expect(notified.length).toBe(before);
    } finally {
      await writer.end();
    }
  });
});
