/**
 * Rollouts and stored release builds in the control plane, on each database (issue 33 item 3): the
 * real handler, the real job runner on a test clock, and the gateway's own functions where a daemon
 * would report (advanceCommand for a command's result, recordNodeSession for a Hello). What a real
 * daemon does with the command is rollouts.test.ts in packages/daemon/test.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { readReleaseKey, signManifest } from '@better-compute/core/release';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advanceCommand, recordNodeSession } from '../src/modules/commands/index.js';
import { splitWaves } from '../src/modules/rollouts/rollouts.js';
import { wakeNodeWorkflows } from '../src/modules/workflows/index.js';
import {
  ACME,
  createFleetDeployment,
  eventTypesOf,
  type FleetDeployment,
  heartbeat,
} from './fleet-support.js';

const kinds = await testDatabaseKinds();
const key = readReleaseKey(
  generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  'a test release key',
);
const build = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7) % 251));
const manifest = (version: string, bytes: Buffer = build) => ({
  version,
  artifacts: [
    { platform: 'linux-x64', size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
  ],
  minimumVersion: '0.1.0',
  notes: 'test',
  createdAt: '2026-01-01T00:00:00.000Z',
});
const piece = (bytes: Buffer, offset: number, length = 32_768) =>
  bytes.subarray(offset, offset + length).toString('base64');

describe('splitWaves', () => {
  const ids = Array.from({ length: 10 }, (_, i) => `node_${i}`);
  it('cuts cumulative sizes, counts and shares rounded up, and drops a size that adds no node', () => {
    expect(splitWaves(ids, ['1', '10%', '50%', '100%']).map((w) => w.nodes.length)).toEqual([1, 4, 5]);
    expect(splitWaves(ids.slice(0, 3), ['1', '10%', '50%', '100%']).map((w) => w.nodes.length)).toEqual([
      1, 1, 1,
    ]);
    expect(splitWaves(ids, ['100%']).map((w) => w.nodes.map((n) => n.nodeId))).toEqual([ids]);
    expect(splitWaves(ids, ['3', '25']).map((w) => w.nodes.length)).toEqual([3, 7]);
  });
  it('refuses falling sizes and a last wave that leaves nodes out', () => {
    expect(() => splitWaves(ids, ['5', '2', '100%'])).toThrow(
      'waves: 2 is fewer nodes than the wave before it',
    );
    expect(() => splitWaves(ids, ['1', '50%'])).toThrow('the last wave reaches 5 of the 10 nodes');
  });
});

describe.each(kinds)('rollouts on %s', (kind) => {
  let d: FleetDeployment;
  const nodes: string[] = [];

  beforeAll(async () => {
    d = await createFleetDeployment(kind, '2026-01-01T00:00:00.000Z', 10, { release: { pins: [key.keyId] } });
    const site = await d.api('sites.create', { name: 'r' });
    const pool = await d.api('pools.create', { siteId: site.id, name: 'r' });
    const { token } = await d.api('joinTokens.create', { poolId: pool.id, uses: 3, preApproved: true });
    for (let i = 0; i < 3; i++) {
      const joined = await d.api(
        'nodes.join',
        {
          joinToken: token,
          hostname: `n${i}`,
          inventory: { cpuCores: 4, memoryGiB: 8, gpus: [] },
          labels: { rack: i === 0 ? 'a' : 'b' },
        },
        '',
      );
      await heartbeat(d, joined.nodeCredential);
      nodes.push(joined.nodeId);
    }
    for (const version of ['0.2.0', '0.3.0']) {
      const m = manifest(version);
      await d.api('releases.register', { manifest: m, signatures: [signManifest(m, key)] });
    }
  });
  afterAll(async () => {
    await d?.close();
  });

  /** Runs the due jobs a few times, the clock moving on between. */
  async function settle(rounds = 6) {
    for (let i = 0; i < rounds; i++) {
      d.clock.advance(1.5);
      await d.compute.runDueJobs();
    }
  }
  const commandsOf = async (nodeId: string) => (await d.api('commands.list', { nodeId })).items as any[];
  const report = (
    nodeId: string,
    commandId: string,
    state: 'succeeded' | 'failed',
    error: string | null = null,
  ) =>
    advanceCommand(d.db, nodeId, commandId, {
      state,
      at: d.clock.now(),
      exitCode: null,
      stdout: '',
      stderr: '',
      result: null,
      error,
    });

  it('releases.upload keeps a build piece by piece, and only the bytes the manifest names', async () => {
    const upload = (body: Record<string, unknown>) =>
      d.api('releases.upload', { version: '0.2.0', platform: 'linux-x64', ...body });
    expect(await upload({ offset: 0, data: piece(build, 0) })).toEqual({
      version: '0.2.0',
      platform: 'linux-x64',
      stored: 32_768,
      size: build.length,
      complete: false,
    });
    // A retried piece changes nothing; a piece out of place is refused.
    expect((await upload({ offset: 0, data: piece(build, 0) })).stored).toBe(32_768);
    expect(
      (
        await d.fails('releases.upload', {
          version: '0.2.0',
          platform: 'linux-x64',
          offset: 40_000,
          data: piece(build, 40_000),
        })
      ).code,
    ).toBe('INVALID_ARGUMENT');
    expect(
      (await d.fails('releases.upload', { version: '0.2.0', platform: 'linux-x64', offset: 0, data: 'AAB=' }))
        .code,
    ).toBe('INVALID_ARGUMENT');
    // Wrong last bytes: DIGEST_MISMATCH, and the piece is not kept.
    const wrong = Buffer.from(build);
    wrong[wrong.length - 1] = wrong[wrong.length - 1]! ^ 0xff;
    await upload({ offset: 32_768, data: piece(build, 32_768) });
    const refused = await d.fails('releases.upload', {
      version: '0.2.0',
      platform: 'linux-x64',
      offset: 65_536,
      data: piece(wrong, 65_536),
    });
    expect(refused.code).toBe('DIGEST_MISMATCH');
    expect((await d.api('releases.get', { version: '0.2.0' })).artifacts[0].stored).toBe(false);
    const done = await upload({ offset: 65_536, data: piece(build, 65_536) });
    expect(done).toMatchObject({ stored: build.length, complete: true });
    expect((await d.api('releases.get', { version: '0.2.0' })).artifacts[0].stored).toBe(true);
    expect(await eventTypesOf(d, (await d.api('releases.get', { version: '0.2.0' })).id)).toEqual([
      'release.registered',
      'release.artifact-stored',
    ]);
    // Stored whole, it is left as it is.
    expect(
      (await d.fails('releases.upload', { version: '0.2.0', platform: 'linux-x64', offset: 0, data: 'AAAA' }))
        .code,
    ).toBe('ALREADY_EXISTS');
    expect(
      (await d.fails('releases.upload', { version: '9.9.9', platform: 'linux-x64', offset: 0, data: 'AAAA' }))
        .code,
    ).toBe('NOT_FOUND');
    // Only the root tenant.
    expect(
      (
        await d.fails(
          'releases.upload',
          { tenantId: 'acme', version: '0.2.0', platform: 'linux-x64', offset: 0, data: 'AAAA' },
          ACME,
        )
      ).code,
    ).toBe('ACCESS_DENIED');
  });

  it('a wave with a failed node pauses the rollout; the later wave gets nothing until resumed', async () => {
    const unstored = await d.fails('rollouts.create', { version: '0.3.0', nodeIds: nodes });
    expect(unstored.code).toBe('INVALID_STATE');
    const rollout = await d.api('rollouts.create', {
      version: '0.2.0',
      nodeIds: nodes,
      waves: ['1', '100%'],
    });
    expect(rollout).toMatchObject({
      state: 'running',
      currentWave: 0,
      failureBudget: 0,
      healthTimeoutSeconds: 300,
    });
    await settle(2);
    const first = (await d.api('rollouts.get', { rolloutId: rollout.id })).waves[0].nodes[0];
    expect(first).toMatchObject({ nodeId: nodes[0], state: 'updating' });
    const workflow = await d.api('workflows.get', { workflowId: first.workflowId });
    expect(workflow).toMatchObject({ kind: 'node.update', nodeId: nodes[0] });
    const [update] = await commandsOf(nodes[0]!);
    expect(update).toMatchObject({ kind: 'bcd.update', workflowId: first.workflowId });
    expect(update.payload.release.manifest.version).toBe('0.2.0');
    expect(update.payload.healthTimeoutSeconds).toBe(300);
    expect(await commandsOf(nodes[1]!)).toEqual([]);

    // The node refuses it, as a daemon would report.
    await report(nodes[0]!, update.id, 'failed', 'refused by the node: DIGEST_MISMATCH: the bytes differ');
    await settle();
    const paused = await d.api('rollouts.get', { rolloutId: rollout.id });
    expect(paused.state).toBe('paused');
    expect(paused.reason).toBe('wave 0 failed its gate: 1 node(s) failed, the failure budget is 0');
    expect(paused.waves[0].nodes[0].error).toContain('refused by the node: DIGEST_MISMATCH');
    await settle();
    expect(await commandsOf(nodes[1]!)).toEqual([]);
    expect(await commandsOf(nodes[2]!)).toEqual([]);
    expect(await eventTypesOf(d, rollout.id)).toEqual([
      'rollout.created',
      'rollout.wave-started',
      'rollout.node-failed',
      'rollout.paused',
    ]);

    // Resumed: the failed wave is accepted, the next starts; aborted: nothing new starts.
    expect((await d.fails('rollouts.pause', { rolloutId: rollout.id })).code).toBe('INVALID_STATE');
    const resumed = await d.api('rollouts.resume', { rolloutId: rollout.id });
    expect(resumed).toMatchObject({ state: 'running', currentWave: 1 });
    await settle(2);
    expect((await commandsOf(nodes[1]!)).map((c) => c.kind)).toEqual(['bcd.update']);
    const aborted = await d.api('rollouts.abort', { rolloutId: rollout.id });
    expect(aborted.state).toBe('aborted');
    expect((await d.fails('rollouts.resume', { rolloutId: rollout.id })).code).toBe('INVALID_STATE');
  });

  it('a node back with the new version that passes its health check succeeds, and the rollout completes', async () => {
    const rollout = await d.api('rollouts.create', { version: '0.2.0', selector: 'rack=a' });
    expect(rollout.waves.map((w: any) => w.nodes.map((n: any) => n.nodeId))).toEqual([[nodes[0]]]);
    await settle(2);
    const workflowId = (await d.api('rollouts.get', { rolloutId: rollout.id })).waves[0].nodes[0].workflowId;
    const update = (await commandsOf(nodes[0]!)).find((c) => c.workflowId === workflowId);
    // The new version says Hello, then reports the update done.
    d.clock.advance(1);
    await recordNodeSession(d.db, {
      nodeId: nodes[0]!,
      tenantId: 'root',
      gatewayId: 'gw_test',
      at: d.clock.now(),
      hello: { version: '0.2.0', capabilities: [] },
    });
    // The new version reports the update only once it passed its health check on itself: that
    // report is the gate, and no second check is sent.
    await report(nodes[0]!, update.id, 'succeeded');
    await settle();
    expect(
      (await commandsOf(nodes[0]!)).filter((c) => c.workflowId === workflowId).map((c) => c.kind),
    ).toEqual(['bcd.update']);
    const done = await d.api('rollouts.get', { rolloutId: rollout.id });
    expect(done).toMatchObject({ state: 'completed', currentWave: 1 });
    expect(done.waves[0]).toMatchObject({ state: 'passed' });
    expect(done.waves[0].nodes[0]).toMatchObject({ state: 'succeeded' });
    expect((await d.api('workflows.get', { workflowId })).state).toBe('succeeded');
    expect(await eventTypesOf(d, rollout.id)).toEqual([
      'rollout.created',
      'rollout.wave-started',
      'rollout.node-succeeded',
      'rollout.wave-passed',
      'rollout.completed',
    ]);
    const listed = await d.api('rollouts.list', { state: 'completed' });
    expect(listed.items.map((r: any) => r.id)).toEqual([rollout.id]);
  });

  it('abort cancels the updates not yet run (queued, or sent and not started); one running, the node finishes', async () => {
    const rollout = await d.api('rollouts.create', { version: '0.2.0', nodeIds: nodes, waves: ['100%'] });
    await settle(2);
    const started = (await d.api('rollouts.get', { rolloutId: rollout.id })).waves[0].nodes;
    expect(started.map((n: any) => n.state)).toEqual(['updating', 'updating', 'updating']);
    const updateOf = async (i: number) =>
      (await commandsOf(nodes[i]!)).find(
        (c) => c.workflowId === started[i].workflowId && c.kind === 'bcd.update',
      );
    const [c0, c1, c2] = [await updateOf(0), await updateOf(1), await updateOf(2)];
    // node 0's update reached the daemon (sent, not started); node 1's is still queued; node 2 runs it.
    await advanceCommand(d.db, nodes[0]!, c0.id, { state: 'sent', at: d.clock.now() });
    // Each send counts as an attempt.
    expect((await d.api('commands.get', { commandId: c0.id })).attempt).toBe(1);
    await advanceCommand(d.db, nodes[2]!, c2.id, { state: 'sent', at: d.clock.now() });
    await advanceCommand(d.db, nodes[2]!, c2.id, { state: 'running', at: d.clock.now() });

    const aborted = await d.api('rollouts.abort', { rolloutId: rollout.id });
    expect(aborted.state).toBe('aborted');
    const [n0, n1, n2] = aborted.waves[0].nodes;
    expect(n0).toMatchObject({ state: 'cancelled' });
    expect(n0.error).toBe(
      `aborted before the node ran it: command ${c0.id} cancelled (the node was told to drop it)`,
    );
    expect(n1).toMatchObject({ state: 'cancelled' });
    expect(n1.error).toContain(`command ${c1.id} cancelled before it was sent`);
    expect(n2).toMatchObject({ state: 'updating', error: null });

    // commands.cancel semantics: the queued one ends now; the sent one is asked to stop (the gateway
    // tells the daemon), and ends when the daemon reports it dropped.
    expect(await d.api('commands.get', { commandId: c1.id })).toMatchObject({
      state: 'cancelled',
      cancelRequested: true,
    });
    expect(await d.api('commands.get', { commandId: c0.id })).toMatchObject({
      state: 'sent',
      cancelRequested: true,
    });
    expect(await d.api('commands.get', { commandId: c2.id })).toMatchObject({
      state: 'running',
      cancelRequested: false,
    });
    expect((await d.api('workflows.get', { workflowId: n0.workflowId })).state).toBe('aborted');
    expect((await d.api('workflows.get', { workflowId: n1.workflowId })).state).toBe('aborted');
    expect((await d.api('workflows.get', { workflowId: n2.workflowId })).state).toBe('running');
    const { rows } = await sql<{ data: any }>`
      select data from compute.events where subject_id = ${rollout.id} and type = 'rollout.aborted'`.execute(
      d.db,
    );
    expect(typeof rows[0]!.data === 'string' ? JSON.parse(rows[0]!.data) : rows[0]!.data).toMatchObject({
      skipped: 0,
      cancelled: [nodes[0], nodes[1]],
    });

    // The daemon drops the sent one; the controller leaves the cancelled nodes as they are and
    // still follows node 2, which fails its update.
    await report(nodes[0]!, c0.id, 'failed', 'cancelled before it ran');
    await report(nodes[2]!, c2.id, 'failed', 'refused by the node: DOWNGRADE_REFUSED: 0.2.0 is not newer');
    await settle();
    const after = await d.api('rollouts.get', { rolloutId: rollout.id });
    expect(after.state).toBe('aborted');
    expect(after.waves[0].nodes.map((n: any) => n.state)).toEqual(['cancelled', 'cancelled', 'failed']);
    // Nothing new was sent to any node of the rollout.
    for (const i of [0, 1, 2])
      expect((await commandsOf(nodes[i]!)).filter((c) => c.workflowId === started[i].workflowId).length).toBe(
        1,
      );
  });

  it("one controller step queues every update command of a wave, in its own transaction (none waits for a workflow's job)", async () => {
    const rollout = await d.api('rollouts.create', { version: '0.2.0', nodeIds: nodes, waves: ['100%'] });
    // Only the rollout's job runs: no workflow job, and the clock stands still.
    await d.compute.runDueJobs(['rollouts.advance']);
    const wave = (await d.api('rollouts.get', { rolloutId: rollout.id })).waves[0].nodes;
    expect(wave.map((n: any) => n.state)).toEqual(['updating', 'updating', 'updating']);
    const workflowIds = wave.map((n: any) => n.workflowId);
    const { rows } = await sql<{ node_id: string; state: string; tx: string }>`
      select node_id, state, xmin::text as tx from compute.commands
      where kind = 'bcd.update' and workflow_id in (${sql.join(workflowIds)})`.execute(d.db);
    expect(rows.map((r) => r.node_id).sort()).toEqual([...nodes].sort());
    expect(rows.every((r) => r.state === 'queued')).toBe(true);
    // One transaction wrote them all: the controller's, which also wrote the rollout's row.
    const { rows: own } = await sql<{ tx: string }>`
      select xmin::text as tx from compute.rollouts where id = ${rollout.id}`.execute(d.db);
    expect(new Set(rows.map((r) => r.tx))).toEqual(new Set([own[0]!.tx]));
    await d.api('rollouts.abort', { rolloutId: rollout.id });
  });

  it('an operator cancelling a queued update wakes its workflow at once: it fails now, not at its next check', async () => {
    const rollout = await d.api('rollouts.create', {
      version: '0.2.0',
      nodeIds: [nodes[0]],
      waves: ['100%'],
    });
    await d.compute.runDueJobs(['rollouts.advance']);
    const workflowId = (await d.api('rollouts.get', { rolloutId: rollout.id })).waves[0].nodes[0].workflowId;
    const update = (await commandsOf(nodes[0]!)).find((c) => c.workflowId === workflowId);
    expect(update).toMatchObject({ kind: 'bcd.update', state: 'queued' });
    await d.api('commands.cancel', { commandId: update.id });
    // The clock stands still: only a wake makes the workflow run before its 5 s check.
    await d.compute.runDueJobs();
    const workflow = await d.api('workflows.get', { workflowId });
    expect(workflow.state).toBe('failed');
    expect(workflow.steps[0].error).toContain(`command ${update.id} cancelled`);
    await d.compute.runDueJobs();
    const after = await d.api('rollouts.get', { rolloutId: rollout.id });
    expect(after.waves[0].nodes[0].state).toBe('failed');
    expect(after.state).toBe('paused');
  });

  it("the daemon's hello wakes its update workflow waiting for the new version: it goes on now, not at its next check", async () => {
    const rollout = await d.api('rollouts.create', {
      version: '0.2.0',
      nodeIds: [nodes[1]],
      waves: ['100%'],
    });
    await d.compute.runDueJobs(['rollouts.advance']);
    const workflowId = (await d.api('rollouts.get', { rolloutId: rollout.id })).waves[0].nodes[0].workflowId;
    const update = (await commandsOf(nodes[1]!)).find((c) => c.workflowId === workflowId);
    await report(nodes[1]!, update.id, 'succeeded');
    // The clock stands still from here: the workflow's own check is 5 s away.
    await d.compute.runDueJobs();
    const waiting = await d.api('workflows.get', { workflowId });
    expect(waiting.steps.map((s: any) => s.state)).toEqual(['succeeded', 'running', 'pending']);
    const hello = { nodeId: nodes[1]!, tenantId: 'root', gatewayId: 'gw_test', at: d.clock.now() };
    await recordNodeSession(d.db, { ...hello, hello: { version: '0.2.0', capabilities: [] } });
    await d.compute.runDueJobs();
    expect((await d.api('workflows.get', { workflowId })).steps[1].state).toBe('running');
    // What the gateway does at a hello, after recording it.
    await wakeNodeWorkflows(d.db, nodes[1]!, d.clock.now());
    await d.compute.runDueJobs();
    const woken = await d.api('workflows.get', { workflowId });
    expect(woken.state).toBe('succeeded');
    expect(woken.steps.map((s: any) => s.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    await d.compute.runDueJobs();
    expect((await d.api('rollouts.get', { rolloutId: rollout.id })).state).toBe('completed');
  });

  it('refuses a bad target, bad waves, another tenant and a malformed input', async () => {
    const fails = async (body: Record<string, unknown>) =>
      (await d.fails('rollouts.create', { version: '0.2.0', ...body })).code;
    expect(await fails({})).toBe('INVALID_ARGUMENT');
    expect(await fails({ poolId: 'pool_01m00000000000000000000000', selector: 'rack=a' })).toBe(
      'INVALID_ARGUMENT',
    );
    expect(await fails({ poolId: 'pool_01m00000000000000000000000' })).toBe('NOT_FOUND');
    expect(await fails({ nodeIds: [nodes[0], nodes[0]] })).toBe('INVALID_ARGUMENT');
    expect(await fails({ nodeIds: nodes, waves: ['0'] })).toBe('INVALID_ARGUMENT');
    expect(await fails({ nodeIds: nodes, waves: ['2', '1', '100%'] })).toBe('INVALID_ARGUMENT');
    expect(await fails({ nodeIds: nodes, failureBudget: -1 })).toBe('INVALID_ARGUMENT');
    expect(await fails({ nodeIds: nodes, healthTimeoutSeconds: 5 })).toBe('INVALID_ARGUMENT');
    expect(await fails({ nodeIds: nodes, reason: 'x'.repeat(501) })).toBe('INVALID_ARGUMENT');
    expect(await fails({ selector: 'gpuModel=H100' })).toBe('INVALID_ARGUMENT');
    expect(await fails({ selector: 'rack=nowhere' })).toBe('INVALID_ARGUMENT');
    expect(await fails({ selector: 'rack in (' })).toBe('INVALID_ARGUMENT');
    expect(await fails({ version: '9.9.9', nodeIds: nodes })).toBe('NOT_FOUND');
    expect(
      (await d.fails('rollouts.create', { tenantId: 'acme', version: '0.2.0', nodeIds: nodes }, ACME)).code,
    ).toBe('ACCESS_DENIED');
    expect((await d.fails('rollouts.get', { rolloutId: 'rollout_01m00000000000000000000000' })).code).toBe(
      'NOT_FOUND',
    );
    expect((await d.fails('rollouts.list', { cursor: 'wf_01m00000000000000000000000' })).code).toBe(
      'INVALID_ARGUMENT',
    );
  });
});
