/**
 * createRolloutsView against a real deployment on PostgreSQL that pins a release key: a signed
 * release registered and its build uploaded through the API, three nodes joined, and a rollout in
 * two waves. The list and its filters; the list and an open rollout kept live by the event stream
 * (the first wave starting, its node failing its gate and pausing the rollout, resume starting the
 * next wave, abort cancelling the updates not yet run); Pause, Resume and Abort with the state rule
 * and the server's refusal; the permission each button asks about, answered by Better IAM for the
 * administrator and a viewer; the words of a row.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { readReleaseKey, signManifest } from '@better-compute/core/release';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  countNodes,
  createPermissions,
  createRolloutsView,
  describeRollout,
  durationText,
  elapsed,
  isRolloutActionAllowed,
  rolloutQuestion,
  startLiveConsole,
  type LiveConsole,
  type Rollout,
} from '../src/index.js';
import { startKitServer, type KitServer } from './kit-server.js';

const key = readReleaseKey(
  generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  'the kit test release key',
);
const build = Buffer.from(Array.from({ length: 5_000 }, (_, i) => (i * 13) % 251));
const manifest = {
  version: '0.9.0',
  artifacts: [
    { platform: 'linux-x64', size: build.length, sha256: createHash('sha256').update(build).digest('hex') },
  ],
  minimumVersion: '0.1.0',
  notes: 'kit',
  createdAt: '2026-01-01T00:00:00.000Z',
};

let server: KitServer;
let nodes: string[];
let live: LiveConsole;
const auth = () => ({ authorization: `Bearer ${server.token}` });

async function until(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs the due jobs (the rollout and workflow controllers) as the workers would. */
const runJobs = async (rounds = 3) => {
  for (let i = 0; i < rounds; i++) await server.compute.runDueJobs();
};

beforeAll(async () => {
  server = await startKitServer({ release: { pins: [key.keyId] } });
  const { client } = server;
  await client.call('releases.register', {
    tenantId: 'root',
    manifest,
    signatures: [signManifest(manifest, key)],
  });
  await client.call('releases.upload', {
    tenantId: 'root',
    version: '0.9.0',
    platform: 'linux-x64',
    offset: 0,
    data: build.toString('base64'),
  });
  const site = await client.sites.create({ name: 'rollouts-site' });
  const pool = await client.pools.create({ siteId: site.id, name: 'rollouts-pool', class: 'gpu' });
  const { token } = await client.joinTokens.create({ poolId: pool.id, uses: 3, preApproved: true });
  nodes = [];
  for (const hostname of ['r-a', 'r-b', 'r-c']) {
    const joined = await client.nodes.join({
      joinToken: token,
      hostname,
      inventory: { cpuCores: 4, memoryGiB: 8, gpus: [] },
    });
    nodes.push(joined.nodeId!);
    // The first heartbeat makes a joined node ready (a node still joining takes no rollout).
    const { createComputeClient } = await import('@better-compute/client');
    await createComputeClient({ baseURL: server.url }).call('nodes.heartbeat', {
      nodeCredential: joined.nodeCredential!,
    });
  }
  live = await startLiveConsole(client, {
    tenantId: 'root',
    watchUrl: `${server.url}/api/compute/watch`,
    headers: auth,
  });
  await until(() => live.connection.get().status === 'open', 'the stream to open');
}, 120_000);

afterAll(async () => {
  live?.stop();
  await server?.stop();
});

const create = (waves: string[]) =>
  server.client.call('rollouts.create', {
    tenantId: 'root',
    version: '0.9.0',
    nodeIds: nodes,
    waves,
    failureBudget: 0,
    healthTimeoutSeconds: 300,
  }) as Promise<Rollout>;

describe('createRolloutsView', () => {
  it('lists rollouts newest first, and by state through the filter', async () => {
    const first = await create(['100%']);
    await server.client.call('rollouts.abort', { tenantId: 'root', rolloutId: first.id });
    const second = await create(['100%']);
    const view = createRolloutsView(server.client, { tenantId: 'root' });
    expect(view.filter.get()).toBe('all');
    await view.list.refresh();
    expect(view.list.get().items.map((r) => r.id)).toEqual([second.id, first.id]);
    await view.setFilter('aborted');
    expect(view.list.get().items.map((r) => r.id)).toEqual([first.id]);
    await view.setFilter('running');
    expect(view.list.get().items.map((r) => r.id)).toEqual([second.id]);
    // Aborted through the view: it leaves the running list, and the answer says aborted.
    const aborted = await view.steer(second.id, 'abort');
    expect(aborted.state).toBe('aborted');
    expect(view.list.get().items).toEqual([]);
    // A second abort is refused by the server with its code and hint; the view throws it.
    await expect(view.steer(second.id, 'abort')).rejects.toMatchObject({ code: 'INVALID_STATE' });
  });

  it('keeps the list and an open rollout live: waves start, a node fails its gate, resume, pause, abort', async () => {
    const view = createRolloutsView(server.client, { tenantId: 'root' });
    const undo = view.connect(live);
    try {
      await view.list.refresh();
      const rollout = await create(['1', '100%']);
      // rollout.created reaches the loaded list.
      await until(() => view.list.get().items.some((r) => r.id === rollout.id), 'the new rollout listed');
      const details = view.details(rollout.id);
      await details.refresh();
      expect(details.get().data?.waves.map((w) => w.nodes.length)).toEqual([1, 2]);
      expect(details.get().data?.waves[0]!.nodes[0]!.state).toBe('pending');

      // The controller starts wave 1: rollout.wave-started re-reads both.
      await runJobs();
      const row = () => view.list.get().items.find((r) => r.id === rollout.id)!;
      await until(
        () => row().waves[0]!.nodes[0]!.state === 'updating',
        'the first node updating in the list',
      );
      await until(
        () => details.get().data?.waves[0]!.nodes[0]!.state === 'updating',
        'the first node updating in the details',
      );
      const workflowId = details.get().data!.waves[0]!.nodes[0]!.workflowId!;
      expect(workflowId).toMatch(/^wf_/);
      expect(elapsed(details.get().data!.waves[0]!.nodes[0]!, Date.now())?.running).toBe(true);

      // The node's update workflow is aborted: the node fails, the gate pauses the rollout, live.
      await server.client.call('workflows.abort', { tenantId: 'root', workflowId });
      await runJobs();
      await until(() => details.get().data?.state === 'paused', 'the rollout paused in the details');
      await until(() => row().state === 'paused', 'the rollout paused in the list');
      const paused = details.get().data!;
      expect(paused.reason).toBe('wave 0 failed its gate: 1 node(s) failed, the failure budget is 0');
      expect(paused.waves[0]).toMatchObject({ state: 'failed' });
      expect(paused.waves[0]!.nodes[0]).toMatchObject({ state: 'failed' });
      expect(paused.waves[1]!.nodes.map((n) => n.state)).toEqual(['pending', 'pending']);
      expect(isRolloutActionAllowed(paused, 'resume')).toBe(true);
      expect(isRolloutActionAllowed(paused, 'pause')).toBe(false);
      expect(rolloutQuestion(paused, 'resume')).toContain('Wave 1 failed its gate and is accepted as it is');

      // Resume: the next wave starts.
      const resumed = await view.steer(rollout.id, 'resume');
      expect(resumed).toMatchObject({ state: 'running', currentWave: 1 });
      await runJobs();
      await until(
        () => details.get().data?.waves[1]!.nodes.every((n) => n.state === 'updating') ?? false,
        'the second wave updating',
      );
      expect(describeRollout(details.get().data!)).toMatchObject({
        target: '3 named node(s)',
        progress: 'wave 2 of 2',
        nodes: '0 of 3 node(s) updated, 2 updating, 1 failed',
      });

      // Pause by another client: the view sees it live.
      await server.client.call('rollouts.pause', { tenantId: 'root', rolloutId: rollout.id });
      await until(() => row().state === 'paused' && row().reason === 'paused by an operator', 'paused live');
      await view.steer(rollout.id, 'resume');

      // Abort: the two updates the nodes never started are cancelled, and the view shows it.
      expect(rolloutQuestion(details.get().data!, 'abort')).toContain('updates not yet run');
      const aborted = await view.steer(rollout.id, 'abort');
      expect(aborted.state).toBe('aborted');
      expect(aborted.waves[1]!.nodes.map((n) => n.state)).toEqual(['cancelled', 'cancelled']);
      await until(() => details.get().data?.state === 'aborted', 'the details aborted');
      expect(countNodes(details.get().data!.waves)).toMatchObject({ failed: 1, cancelled: 2, total: 3 });
      details.close();
    } finally {
      undo();
    }
  });

  it('each button asks Better IAM about its own action on the rollout; a viewer is refused', async () => {
    const rollout = await create(['100%']);
    const view = createRolloutsView(server.client, { tenantId: 'root' });
    expect(view.actionOf(rollout.id, 'abort')).toMatchObject({
      path: 'rollouts/abort',
      action: 'compute:rollouts:abort',
      resource: { type: 'compute-rollout', id: rollout.id },
    });
    const can = (token: string) =>
      createPermissions({
        authorize: async (checks) => {
          const response = await fetch(`${server.url}/api/iam/can`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
            body: JSON.stringify({ checks }),
          });
          return ((await response.json()) as { data: { results: { allowed: boolean }[] } }).data.results;
        },
      });
    const admin = can(server.token);
    for (const action of ['pause', 'resume', 'abort'] as const)
      await expect(admin.can(view.actionOf(rollout.id, action))).resolves.toBe(true);

    // A viewer of the root tenant reads rollouts but may not steer them, and the API agrees.
    const person = await iam<{ id: string }>('principals/create', {
      kind: 'person',
      email: 'rollout-viewer@kit.test',
      password: 'viewer-password-2026',
      displayName: 'Rollout viewer',
    });
    await iam('bindings/create', { role: 'viewer', principalId: person.id });
    const session = await iam<{ token: string }>(
      'sessions/signIn',
      { tenantId: 'root', email: 'rollout-viewer@kit.test', password: 'viewer-password-2026' },
      '',
    );
    const viewer = can(session.token);
    for (const action of ['pause', 'resume', 'abort'] as const)
      await expect(viewer.can(view.actionOf(rollout.id, action))).resolves.toBe(false);
    const { createComputeClient } = await import('@better-compute/client');
    const viewerView = createRolloutsView(
      createComputeClient({ baseURL: server.url, token: session.token }),
      {
        tenantId: 'root',
      },
    );
    await viewerView.list.refresh();
    expect(viewerView.list.get().items.some((r) => r.id === rollout.id)).toBe(true);
    await expect(viewerView.steer(rollout.id, 'abort')).rejects.toMatchObject({ code: 'ACCESS_DENIED' });
    expect(
      (await server.client.call('rollouts.get', { tenantId: 'root', rolloutId: rollout.id })).state,
    ).toBe('running');
    await server.client.call('rollouts.abort', { tenantId: 'root', rolloutId: rollout.id });
  });

  it('words and timings for a row', () => {
    expect(durationText(850)).toBe('850 ms');
    expect(durationText(12_400)).toBe('12 s');
    expect(durationText(184_000)).toBe('3 min 04 s');
    expect(durationText(7_500_000)).toBe('2 h 05 min');
    expect(elapsed({ startedAt: null, finishedAt: null }, 0)).toBeNull();
    expect(
      elapsed({ startedAt: '2026-01-01T00:00:00.000Z', finishedAt: '2026-01-01T00:01:05.000Z' }, 0),
    ).toEqual({ ms: 65_000, running: false, text: '1 min 05 s' });
    const marked = {
      id: 'rollout_x',
      version: '1.0.0',
      state: 'paused',
      target: { poolId: null, nodeIds: null, selector: 'rack=a\u202e<b>' },
      waves: [],
      currentWave: 0,
      reason: 'why\u202eevil',
    } as unknown as Rollout;
    const text = describeRollout(marked);
    expect(text.target).not.toContain('\u202e');
    expect(text.reason).not.toContain('\u202e');
  });
});

async function iam<T>(path: string, input: Record<string, unknown>, token = server.token): Promise<T> {
  const response = await fetch(`${server.url}/api/iam/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(input),
  });
  const body = (await response.json()) as { data?: T; error?: { code: string; message: string } };
  if (!body.data) throw new Error(`${path}: ${body.error?.code}: ${body.error?.message}`);
  return body.data;
}
