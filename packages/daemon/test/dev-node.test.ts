/**
 * `dev --node`: a real bcd on this machine joins dev's deployment through a join request dev
 * approves, and shows in nodes list with this machine's CPUs and memory, beside simulated ones.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { startDev } from '../../better-compute/src/host/dev.js';
import { until } from './daemon-support.js';

const cwd = mkdtempSync(join(tmpdir(), 'bcd-dev-'));
const controller = new AbortController();
let running: Promise<void> | undefined;

afterAll(async () => {
  controller.abort();
  await running;
  rmSync(cwd, { recursive: true, force: true });
});

it('dev --sim 2 --node shows this machine as a ready node beside the simulated ones', async () => {
  const lines: string[] = [];
  let url = '';
  running = startDev({
    cwd,
    // The guest image is the guest suites' to build; dev would otherwise start it in the background.
    env: { BETTER_COMPUTE_DEV_GUEST_IMAGE: 'off' },
    port: 0,
    memory: true,
    sim: 2,
    node: true,
    signal: controller.signal,
    log: (line) => lines.push(line),
    onListening: (u) => (url = u),
  });
  await until('dev to listen', async () => url, 60_000);
  // A --memory store's accounts are in dev-memory.json, beside (never over) a persistent store's dev.json.
  const key = JSON.parse(readFileSync(join(cwd, '.better-compute', 'dev-memory.json'), 'utf8')).rootAdmin
    .apiKey as string;
  const nodes = await until(
    'the real node to be ready',
    async () => {
      const response = await fetch(`${url}/api/compute/nodes/list`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ tenantId: 'root', limit: 100 }),
      });
      const page = ((await response.json()) as { data: { items: any[] } }).data;
      const real = page.items.find((n) => n.labels?.machine === 'local');
      return real?.state === 'ready' ? page.items : undefined;
    },
    60_000,
  );
  const real = nodes.find((n: any) => n.labels?.machine === 'local');
  const acmeKey = JSON.parse(readFileSync(join(cwd, '.better-compute', 'dev-memory.json'), 'utf8')).acmeMember
    .apiKey as string;
  const call = async (method: string, body: Record<string, unknown>) => {
    const response = await fetch(`${url}/api/compute/${method.replace('.', '/')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${acmeKey}` },
      body: JSON.stringify(body),
    });
    return ((await response.json()) as { data: any }).data;
  };
  // Two simulated GPU machines, two simulated VPS machines, and this one.
  expect(nodes.length).toBe(5);
  const inventory = await fetch(`${url}/api/compute/inventory/get`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ tenantId: 'root', nodeId: real.id }),
  });
  const record = ((await inventory.json()) as { data: any }).data;
  expect(record.inventory.cpuCores).toBe(cpus().length);
  expect(record.inventory.memoryGiB).toBeGreaterThan(0);
  expect(lines.some((line) => line.includes(`this machine: node ${real.id}`))).toBe(true);
  // Its pool is a VPS pool offered to acme, with a flavor to create instances and sandboxes from.
  const pool = await call('pools.get', { tenantId: 'acme', poolId: real.poolId });
  expect({ class: pool.class, access: pool.access }).toEqual({ class: 'vps', access: 'offered' });
  const flavors = await call('flavors.list', { tenantId: 'acme', poolId: real.poolId });
  expect(flavors.items.map((flavor: { name: string }) => flavor.name)).toEqual(['small']);
  expect(lines).toContain(
    'this machine: no guest image registered, and BETTER_COMPUTE_DEV_GUEST_IMAGE=off builds none',
  );
  // Each account has a session signed in at this start beside its API key, for the calls that take
  // a person's session only.
  const member = JSON.parse(readFileSync(join(cwd, '.better-compute', 'dev-memory.json'), 'utf8')).acmeMember;
  const whoami = await fetch(`${url}/api/compute/system/whoami`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${member.sessionToken}` },
    body: '{}',
  });
  expect(((await whoami.json()) as { data: { credentialKind: string } }).data.credentialKind).toBe('session');
  // A --memory store has a PKI bundle of its own too: a console tunnel to the node gets its ticket
  // (once the daemon's session, which follows its first heartbeat, has said what it can do).
  const ticket = await until(
    'a console ticket for the node',
    async () => {
      const opened = await fetch(`${url}/api/compute/tunnels/open`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ tenantId: 'root', nodeId: real.id, op: 'console' }),
      });
      const answer = (await opened.json()) as { data?: { ticket: string }; error?: { code: string } };
      if (answer.error && answer.error.code !== 'UNAVAILABLE') throw new Error(JSON.stringify(answer.error));
      return answer.data?.ticket;
    },
    30_000,
  );
  expect(ticket).toMatch(/^[A-Za-z0-9._~-]{20,}$/);
}, 120_000);
