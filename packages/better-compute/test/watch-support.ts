/**
 * Test support for the live stream: a deployment with the real embedded Better IAM behind the real
 * node server, and a plain reader of server-sent events (independent of the client's parser, which
 * has tests of its own).
 */
import type { Server } from 'node:http';
import type { DatabaseKind } from '@better-compute/db';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import { closeServer, listen } from '../src/host/serve.js';

interface Frame {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  comments: string[];
}

export interface OpenStream {
  status: number;
  headers: Headers;
  frames: Frame[];
  /** Resolves when `count` frames (events and errors, not comments) have arrived, or rejects after `ms`. */
  waitFor(count: number, ms?: number): Promise<Frame[]>;
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
  close(): void;
}

/** Opens `url` and reads SSE frames (LF line ends: what the server writes). */
export async function openStream(url: string, headers: Record<string, string> = {}): Promise<OpenStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers, signal: controller.signal });
  const frames: Frame[] = [];
  const waiters: (() => void)[] = [];
  let finished!: () => void;
  const ended = new Promise<void>((resolve) => (finished = resolve));
  const notify = () => waiters.splice(0).forEach((wake) => wake());
  if (response.status === 200 && response.body) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const frame: Frame = { comments: [] };
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) frame.comments.push(line.slice(1).trim());
              else {
                const colon = line.indexOf(':');
                const field = line.slice(0, colon) as 'id' | 'event' | 'data' | 'retry';
                const value = line.slice(colon + 1).replace(/^ /, '');
                frame[field] = frame[field] === undefined ? value : `${frame[field]}\n${value}`;
              }
            }
            frames.push(frame);
            notify();
          }
        }
      } catch {
        // Aborted by the test.
      } finally {
        finished();
        notify();
      }
    })();
  } else finished();
  const events = () => frames.filter((f) => f.data !== undefined);
  return {
    status: response.status,
    headers: response.headers,
    frames,
    ended,
    close: () => controller.abort(),
    async waitFor(count, ms = 5000) {
      const deadline = Date.now() + ms;
      while (events().length < count) {
        if (Date.now() > deadline)
          throw new Error(
            `waited ${ms} ms for ${count} events, got ${events().length}: ${JSON.stringify(frames)}`,
          );
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return events();
    },
  };
}

export interface LiveDeployment {
  database: TestDatabase;
  compute: ComputeInstance;
  server: Server;
  url: string;
  keys: { root: string; acmeAdmin: string; acmeMember: string };
  ids: { root: string; acmeMember: string };
  /** POSTs a method as a key; returns the envelope. */
  call(
    path: string,
    body: Record<string, unknown>,
    token: string,
  ): Promise<{ status: number; data?: any; error?: any }>;
  close(): Promise<void>;
}

export async function liveDeployment(
  kind: DatabaseKind,
  live: { heartbeatMs?: number; reauthorizeMs?: number; pollMs?: number } = {},
  /** Called with every statement the deployment sends. */
  onQuery?: (sql: string) => void,
): Promise<LiveDeployment> {
  const database = await createTestDatabase(kind, 10, onQuery);
  const compute = await betterCompute({ database, rateLimit: false, live }, { log: () => {} });
  await compute.migrate();
  await compute.embeddedIam!.ready();
  const dev = (await compute.embeddedIam!.bootstrapDev())!;
  const server = createNodeServer(compute);
  const url = await listen(server, 0, '127.0.0.1');
  const call: LiveDeployment['call'] = async (path, body, token) => {
    const response = await fetch(`${url}/api/compute/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, ...((await response.json()) as object) };
  };
  return {
    database,
    compute,
    server,
    url,
    keys: { root: dev.rootAdmin.apiKey, acmeAdmin: dev.acmeAdmin.apiKey, acmeMember: dev.acmeMember.apiKey },
    ids: { root: dev.rootAdmin.principalId, acmeMember: dev.acmeMember.principalId },
    call,
    async close() {
      await closeServer(server);
      await compute.close();
      await database.close();
    },
  };
}
