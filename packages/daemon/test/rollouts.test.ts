/**
 * Rollouts and bcd's self-update end to end, with real parts (issue 33 items 3 and 4): a server
 * (roles api, controllers, gateway) on PostgreSQL whose configuration pins two release keys, four
 * real `bcd run --supervise` processes, each installed in a directory of its own (bin/bcd.cjs, the
 * supervisor's bundle and dist/bcd.cjs) with its own state, pinning both keys (2 of 2) as they join,
 * and the real `better-compute` binary for every operator step (the token only in the environment).
 *
 * Version N is the daemon as built (0.1.0); N+1 is a real copy of that bundle with its version
 * bumped (0.2.0), signed by both keys, registered and uploaded; a rollout in three waves updates
 * every node, each reconnecting as 0.2.0 through its own supervisor. A build that exits at start
 * (0.3.0) is rolled out next: the first wave's daemon returns to 0.2.0 by itself, the rollout
 * pauses, and the other nodes never receive it. A tampered stored build, a manifest signed by one
 * key where two are pinned (the server pins 1 of 2, so it registers), and a downgrade are each
 * refused by the daemon itself, sent as bcd.update rows written straight into the database as a
 * compromised control plane could. Bad input at every command.
 */
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@better-compute/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import {
  bcdJoin,
  daemonConnected,
  type Deployment,
  deployment,
  type Proc,
  root,
  start,
  until,
} from './daemon-support.js';
import { cliIn, codeOf, serveHere } from './served-support.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 180_000 });

const daemonDir = join(root, 'packages', 'daemon');
const secret = 'the rollouts test deployment secret';
const scratch = mkdtempSync(join(tmpdir(), 'bcd-rollouts-'));
const builds = join(scratch, 'builds');

let env: Deployment;
let url = '';
let stopServer: (() => Promise<void>) | undefined;
const keyIds: Record<string, string> = {};

interface FleetNode {
  id: string;
  dir: string;
  stateDir: string;
  bundle: string;
  daemon: Proc;
}
const nodes: FleetNode[] = [];
/** A node outside the pool, run without --supervise. */
let lone: FleetNode;
let poolId = '';
/** The 0.2.0 release, registered: its envelope is sent again below. */
let next: any;

const { cli, cliJson } = cliIn(scratch, () => ({ url, rootKey: env.rootKey }));

/** A copy of the built daemon with its version string changed, and `prefix` run before anything. */
function build(version: string, prefix = ''): string {
  const original = readFileSync(join(daemonDir, 'dist', 'bcd.cjs'), 'utf8');
  const marker = 'DAEMON_VERSION = "0.1.0"';
  expect(original.split(marker)).toHaveLength(2);
  const file = join(builds, `bcd-${version}.cjs`);
  writeFileSync(file, prefix + original.replace(marker, `DAEMON_VERSION = "${version}"`));
  return file;
}

/** A manifest for `file`, signed by `signers` in turn (sign, then cosign) through the binary; registered and uploaded. */
async function release(
  version: string,
  file: string,
  signers: string[],
  options: { minimumVersion?: string; upload?: boolean } = {},
): Promise<any> {
  const bytes = readFileSync(file);
  const manifest = {
    version,
    artifacts: [
      {
        platform: `${process.platform}-${process.arch}`,
        size: bytes.length,
        sha256: createHash('sha256').update(bytes).digest('hex'),
      },
    ],
    minimumVersion: options.minimumVersion ?? '0.1.0',
    notes: `bcd ${version} for the rollouts test`,
    createdAt: new Date().toISOString(),
  };
  writeFileSync(join(scratch, `manifest-${version}.json`), JSON.stringify(manifest));
  signers.forEach(() => {});
  let input = `manifest-${version}.json`;
  for (const [i, signer] of signers.entries()) {
    const out = `envelope-${version}-${i}.json`;
    await cliJson(['release', i === 0 ? 'sign' : 'cosign', '--key', `${signer}.pem`, input, '--out', out], {
      offline: true,
    });
    input = out;
  }
  const registered = await cliJson(['releases', 'register', input]);
  if (options.upload !== false) {
    const uploaded = await cliJson([
      'releases',
      'upload',
      version,
      file,
      '--platform',
      manifest.artifacts[0]!.platform,
    ]);
    expect(uploaded).toMatchObject({ complete: true, size: bytes.length });
  }
  return { ...registered, envelope: JSON.parse(readFileSync(join(scratch, input), 'utf8')) };
}

/** The version each node's daemon said in its last Hello. */
async function versions(list: FleetNode[] = nodes): Promise<string[]> {
  const rows = await sql<{ node_id: string; daemon_version: string }>`
    select node_id, daemon_version from compute.node_sessions`.execute(env.database.db);
  return list.map((node) => rows.rows.find((row) => row.node_id === node.id)?.daemon_version ?? 'none');
}
const bundleVersion = (node: FleetNode) =>
  /DAEMON_VERSION = "([^"]+)"/.exec(readFileSync(node.bundle, 'utf8'))?.[1];
const updateRecord = (node: FleetNode) =>
  existsSync(join(node.stateDir, 'update.json'))
    ? JSON.parse(readFileSync(join(node.stateDir, 'update.json'), 'utf8'))
    : null;

const rolloutEnded = (id: string, states: string[]) =>
  until(
    `rollout ${id} to be ${states.join(' or ')}`,
    async () => {
      const rollout = await cliJson(['rollouts', 'get', id]);
      return states.includes(rollout.state) && rollout;
    },
    90_000,
  );

/** A bcd.update row written straight into the database, as whoever owns it could; answers its id. */
async function forgeUpdate(node: FleetNode, envelope: unknown): Promise<string> {
  const id = newId('command');
  await env.database.db
    .insertInto('compute.commands' as never)
    .values({
      id,
      tenant_id: 'root',
      node_id: node.id,
      kind: 'bcd.update',
      payload: JSON.stringify({ release: envelope, healthTimeoutSeconds: 30 }),
      created_at: new Date(),
      expires_at: new Date(Date.now() + 600_000),
    } as never)
    .execute();
  return id;
}
const commandEnded = (commandId: string) =>
  until(
    `${commandId} to end`,
    async () => {
      const row = (await env.database.db
        .selectFrom('compute.commands' as never)
        .select(['state', 'error'] as never)
        .where('id' as never, '=', commandId as never)
        .executeTakeFirst()) as { state: string; error: string | null } | undefined;
      return row && ['succeeded', 'failed', 'cancelled'].includes(row.state) ? row : undefined;
    },
    60_000,
  );

/** Installs the daemon as the package does, in `dir`: bin/bcd.cjs, dist/bcd.cjs, dist/supervisor.cjs. */
function install(dir: string): string {
  mkdirSync(join(dir, 'bin'), { recursive: true });
  mkdirSync(join(dir, 'dist'), { recursive: true });
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  copyFileSync(join(daemonDir, 'bin', 'bcd.cjs'), join(dir, 'bin', 'bcd.cjs'));
  copyFileSync(join(daemonDir, 'dist', 'bcd.cjs'), join(dir, 'dist', 'bcd.cjs'));
  copyFileSync(join(daemonDir, 'dist', 'supervisor.cjs'), join(dir, 'dist', 'supervisor.cjs'));
  copyFileSync(join(daemonDir, 'scripts', 'health-check.sh'), join(dir, 'scripts', 'health-check.sh'));
  return join(dir, 'bin', 'bcd.cjs');
}

async function joinNode(name: string, token: string, supervised: boolean): Promise<FleetNode> {
  const dir = join(scratch, name);
  const launcher = install(dir);
  const stateDir = join(dir, 'state');
  const joined = await bcdJoin(url, token, dir, stateDir, [
    '--release-pins',
    join(scratch, 'release-pins.json'),
  ]);
  expect(joined.err.join('\n')).toContain('pinned 2 release key(s), 2 needed, from --release-pins');
  const daemon = start(
    launcher,
    [
      'run',
      '--state-dir',
      stateDir,
      '--scripts-dir',
      join(dir, 'scripts'),
      '--ssh-dir',
      join(dir, 'ssh'),
      ...(supervised ? ['--supervise'] : []),
    ],
    { NODE_PATH: join(root, 'node_modules') },
  );
  return {
    id: JSON.parse(joined.out[0]!).nodeId,
    dir,
    stateDir,
    bundle: join(dir, 'dist', 'bcd.cjs'),
    daemon,
  };
}

beforeAll(async () => {
  env = await deployment();
  mkdirSync(builds);
  for (const name of ['k1', 'k2'])
    keyIds[name] = (await cliJson(['release', 'keygen', '--out', `${name}.pem`], { offline: true })).keyId;
  // The deployment pins both and registers what one of them signed; the nodes want both.
  writeFileSync(
    join(scratch, 'release-pins.json'),
    JSON.stringify({ pins: [keyIds.k1, keyIds.k2], threshold: 2 }),
  );
  const pkiPath = join(scratch, 'pki.json');
  await createPkiBundle({ path: pkiPath, secret, trustDomain: 'rollouts.test' });
  const server = await serveHere({
    database: env.database.url!,
    pki: pkiPath,
    secret,
    rateLimit: false,
    release: { pins: [keyIds.k1!, keyIds.k2!], threshold: 1 },
  });
  url = server.url;
  stopServer = server.stop;

  const site = await env.call('sites.create', { name: 'rollout-rack' });
  const pool = await env.call('pools.create', { siteId: site.id, name: 'rollout-rack' });
  poolId = pool.id;
  const token = await env.call('joinTokens.create', { poolId, uses: 4, preApproved: true });
  for (let i = 0; i < 4; i++) nodes.push(await joinNode(`node-${i}`, token.token, true));
  const otherPool = await env.call('pools.create', { siteId: site.id, name: 'unsupervised' });
  const loneToken = await env.call('joinTokens.create', { poolId: otherPool.id, preApproved: true });
  lone = await joinNode('lone', loneToken.token, false);
  for (const node of [...nodes, lone]) await daemonConnected(node.stateDir);
}, 180_000);

afterAll(async () => {
  for (const node of [...nodes, lone].filter(Boolean)) node.daemon.child.kill('SIGTERM');
  await Promise.all(
    [...nodes, lone]
      .filter(Boolean)
      .map((node) =>
        Promise.race([node.daemon.exited, new Promise((resolve) => setTimeout(resolve, 10_000))]).then(() =>
          node.daemon.child.kill('SIGKILL'),
        ),
      ),
  );
  await stopServer?.();
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a rollout over real daemons', () => {
  it('a release signed by two keys, registered and uploaded, goes out in three waves and every node comes back as 0.2.0', async () => {
    expect(await versions()).toEqual(['0.1.0', '0.1.0', '0.1.0', '0.1.0']);
    next = await release('0.2.0', build('0.2.0'), ['k1', 'k2']);
    expect(next.signers).toEqual([keyIds.k1, keyIds.k2]);
    const listed = await cliJson(['releases', 'get', '0.2.0']);
    expect(listed.artifacts[0]).toMatchObject({ stored: true });

    const created = await cliJson([
      'rollouts',
      'create',
      '--release',
      '0.2.0',
      '--pool',
      poolId,
      '--waves',
      '1,50%,100%',
      '--health-timeout',
      '60s',
    ]);
    expect(created.waves.map((wave: any) => wave.nodes.length)).toEqual([1, 1, 2]);
    expect(created.waves.flatMap((wave: any) => wave.nodes.map((n: any) => n.nodeId))).toEqual(
      nodes.map((n) => n.id),
    );
    const done = await rolloutEnded(created.id, ['completed', 'paused']);
    expect(done.state, JSON.stringify(done.waves)).toBe('completed');
    expect(done.waves.map((wave: any) => wave.state)).toEqual(['passed', 'passed', 'passed']);
    expect(await versions()).toEqual(['0.2.0', '0.2.0', '0.2.0', '0.2.0']);
    for (const node of nodes) {
      expect(bundleVersion(node)).toBe('0.2.0');
      expect(readFileSync(`${node.bundle}.previous`, 'utf8')).toContain('DAEMON_VERSION = "0.1.0"');
      expect(updateRecord(node)).toMatchObject({
        from: '0.1.0',
        to: '0.2.0',
        phase: 'healthy',
        reported: true,
      });
      // The supervisor started the new version itself; the supervisor process is the one the test started.
      expect(node.daemon.err.join('\n')).toContain('bcd supervisor: the daemon asked to be started again');
      // The update is a workflow on the node, visible with workflows.
      const workflows = await cliJson(['workflows', 'list', '--node', node.id]);
      const update = workflows.items.find((w: any) => w.kind === 'node.update');
      expect(update).toMatchObject({ state: 'succeeded' });
      expect(update.steps.map((s: any) => s.kind)).toEqual([
        'command',
        'node.wait-version',
        'node.no-failed-commands',
      ]);
      // The gateway woke it at the new version's hello (a job due at that very instant), rather
      // than leaving it to its own check.
      const woken = await sql<{ n: number }>`
        select count(*)::int as n from compute.jobs j, compute.node_sessions s
        where s.node_id = ${node.id} and j.kind = 'workflows.advance'
          and j.payload->>'workflowId' = ${update.id} and j.run_at = s.connected_at`.execute(env.database.db);
      expect(woken.rows[0]!.n).toBe(1);
    }
    // Waves one after the other: each started after the one before passed.
    const wavesStarted = done.waves.map((wave: any) => Date.parse(wave.startedAt));
    const wavesPassed = done.waves.map((wave: any) => Date.parse(wave.finishedAt));
    expect(wavesStarted[1]).toBeGreaterThanOrEqual(wavesPassed[0]);
    expect(wavesStarted[2]).toBeGreaterThanOrEqual(wavesPassed[1]);
    const events = await cliJson(['events', 'list', '--type', 'rollout.', '--limit', '50']);
    const types = events.items.filter((e: any) => e.subject.id === created.id).map((e: any) => e.type);
    expect(types.filter((t: string) => t === 'rollout.wave-started')).toHaveLength(3);
    expect(types.filter((t: string) => t === 'rollout.wave-passed')).toHaveLength(3);
    expect(types).toContain('rollout.completed');
  });

  it('a build that exits at start: the first wave returns to 0.2.0 by itself, the rollout pauses, the rest never receive it', async () => {
    await release(
      '0.3.0',
      build('0.3.0', 'process.stderr.write("bcd 0.3.0: this build stops at start\\n"); process.exit(3);\n'),
      ['k1', 'k2'],
    );
    const created = await cliJson([
      'rollouts',
      'create',
      '--release',
      '0.3.0',
      '--pool',
      poolId,
      '--waves',
      '1,100%',
      '--health-timeout',
      '60s',
    ]);
    const paused = await rolloutEnded(created.id, ['paused', 'completed']);
    expect(paused.state).toBe('paused');
    expect(paused.reason).toMatch(/^wave 0 failed its gate: 1 node\(s\) failed, the failure budget is 0/);
    const first = paused.waves[0].nodes[0];
    expect(first).toMatchObject({ nodeId: nodes[0]!.id, state: 'failed' });
    expect(first.error).toMatch(
      /rolled back to 0\.2\.0: version 0\.3\.0 exited with code 3 .*before it was healthy: bcd 0\.3\.0: this build stops at start/,
    );
    expect(paused.waves[1].nodes.every((n: any) => n.state === 'pending' && n.workflowId === null)).toBe(
      true,
    );
    // The first node is back on 0.2.0, by its own supervisor, and says so in a new session.
    await until(
      'node 0 back on 0.2.0',
      async () => (await versions([nodes[0]!]))[0] === '0.2.0' && updateRecord(nodes[0]!)?.reported,
    );
    expect(bundleVersion(nodes[0]!)).toBe('0.2.0');
    expect(updateRecord(nodes[0]!)).toMatchObject({ to: '0.3.0', phase: 'rolled-back' });
    expect(nodes[0]!.daemon.err.join('\n')).toContain('bcd supervisor: returned to version 0.2.0');
    // The rest never received it: no update workflow for 0.3.0, no command, the old bundle.
    for (const node of nodes.slice(1)) {
      expect(bundleVersion(node)).toBe('0.2.0');
      const commands = await cliJson(['commands', 'list', '--node', node.id, '--limit', '100']);
      expect(
        commands.items.filter(
          (c: any) => c.kind === 'bcd.update' && c.payload.release.manifest.version === '0.3.0',
        ),
      ).toEqual([]);
    }
    const events = await cliJson(['events', 'list', '--type', 'rollout.', '--limit', '100']);
    const mine = events.items.filter((e: any) => e.subject.id === created.id);
    expect(mine.find((e: any) => e.type === 'rollout.node-failed')?.data).toMatchObject({
      nodeId: nodes[0]!.id,
      wave: 0,
    });
    expect(mine.find((e: any) => e.type === 'rollout.paused')?.data).toMatchObject({ by: 'gate', wave: 0 });

    // Aborted, the nodes never started are skipped for good; it cannot resume.
    const aborted = await cliJson(['rollouts', 'abort', created.id]);
    expect(aborted.state).toBe('aborted');
    expect(aborted.waves[1].nodes.every((n: any) => n.state === 'skipped')).toBe(true);
    expect(codeOf(await cli(['rollouts', 'resume', created.id]))).toBe('INVALID_STATE');
    expect(await versions()).toEqual(['0.2.0', '0.2.0', '0.2.0', '0.2.0']);
  });
});

describe('a build that never comes back', () => {
  it('is stopped by the supervisor at its health timeout, and the node returns to 0.2.0 and says why', async () => {
    // A build that starts and then does nothing: no session, no health check.
    await release(
      '0.3.1',
      build(
        '0.3.1',
        'module.exports = { main: () => new Promise(() => setInterval(() => {}, 1 << 30)) };\nreturn;\n',
      ),
      ['k1', 'k2'],
    );
    const created = await cliJson([
      ...['rollouts', 'create', '--release', '0.3.1', '--nodes', nodes[2]!.id],
      ...['--health-timeout', '10s'],
    ]);
    const paused = await rolloutEnded(created.id, ['paused', 'completed']);
    expect(paused.state).toBe('paused');
    expect(paused.waves[0].nodes[0].error).toMatch(
      /rolled back to 0\.2\.0: version 0\.3\.1 did not reconnect and pass its health check within its 10 s/,
    );
    expect(nodes[2]!.daemon.err.join('\n')).toContain(
      'bcd supervisor: version 0.3.1 is not healthy at its deadline; stopping it',
    );
    await until(
      'node 2 back on 0.2.0',
      async () => (await versions([nodes[2]!]))[0] === '0.2.0' && updateRecord(nodes[2]!)?.reported,
    );
    expect(bundleVersion(nodes[2]!)).toBe('0.2.0');
    await cliJson(['rollouts', 'abort', created.id]);
  });
});

describe('what the daemon refuses, whatever the control plane sends', () => {
  it('a tampered stored build is DIGEST_MISMATCH on the node, and nothing is swapped', async () => {
    await release('0.4.0', build('0.4.0'), ['k1', 'k2']);
    // Whoever owns the database changes a byte of the stored build.
    await sql`update compute.release_artifact_chunks set data = overlay(data placing '\\x21'::bytea from 100 for 1)
      where "offset" = 0 and release_id = (select id from compute.releases where version = '0.4.0')`.execute(
      env.database.db,
    );
    const created = await cliJson([
      'rollouts',
      'create',
      '--release',
      '0.4.0',
      '--nodes',
      nodes[1]!.id,
      '--health-timeout',
      '30s',
    ]);
    const paused = await rolloutEnded(created.id, ['paused', 'completed']);
    expect(paused.state).toBe('paused');
    expect(paused.waves[0].nodes[0].error).toMatch(
      /refused by the node: DIGEST_MISMATCH: the linux-x64 artifact's SHA-256 is [0-9a-f]{64}; release 0\.4\.0 names/,
    );
    expect(bundleVersion(nodes[1]!)).toBe('0.2.0');
    await cliJson(['rollouts', 'abort', created.id]);
  });

  it('a manifest signed by one key where the node pinned two is RELEASE_UNVERIFIED, though the deployment registered it', async () => {
    const one = await release('0.5.0', build('0.5.0'), ['k1']);
    expect(one.signers).toEqual([keyIds.k1]);
    const command = await forgeUpdate(nodes[2]!, one.envelope);
    const ended = await commandEnded(command);
    expect(ended.state).toBe('failed');
    expect(ended.error).toMatch(
      /^refused by the node: RELEASE_UNVERIFIED: release 0\.5\.0 has 1 valid signature by pinned keys; 2 are needed/,
    );
    expect(bundleVersion(nodes[2]!)).toBe('0.2.0');
  });

  it('a downgrade is DOWNGRADE_REFUSED, and a release that does not replace the running version too', async () => {
    const older = await release('0.1.5', build('0.1.5'), ['k1', 'k2'], { minimumVersion: '0.1.0' });
    const down = await commandEnded(await forgeUpdate(nodes[3]!, older.envelope));
    expect(down.error).toMatch(
      /^refused by the node: DOWNGRADE_REFUSED: release 0\.1\.5 is older than the 0\.2\.0 this machine runs/,
    );
    const far = await release('0.9.0', build('0.9.0'), ['k1', 'k2'], { minimumVersion: '0.8.0' });
    const skip = await commandEnded(await forgeUpdate(nodes[3]!, far.envelope));
    expect(skip.error).toMatch(
      /^refused by the node: DOWNGRADE_REFUSED: release 0\.9\.0 replaces 0\.8\.0 or later; this machine runs 0\.2\.0/,
    );
    expect(bundleVersion(nodes[3]!)).toBe('0.2.0');
    expect(updateRecord(nodes[3]!)).toMatchObject({ to: '0.2.0', phase: 'healthy' });
  });

  it('a daemon without a supervisor refuses to update itself', async () => {
    const command = await forgeUpdate(lone, next.envelope);
    const ended = await commandEnded(command);
    expect(ended.error).toMatch(/^refused by the node: INVALID_STATE: this bcd has no supervisor/);
    expect(bundleVersion(lone)).toBe('0.1.0');
  });

  it('abort takes back an update the node holds but has not started: the daemon drops it and stays on its version', async () => {
    const node = nodes[3]!;
    await release('0.7.0', build('0.7.0'), ['k1', 'k2']);
    // A maintenance script keeps the daemon busy, so the update it is sent waits in its queue.
    writeFileSync(join(node.dir, 'scripts', 'hold.sh'), '#!/bin/sh\nsleep 6\n', { mode: 0o755 });
    const hold = await env.call('commands.run', {
      nodeId: node.id,
      kind: 'exec.script',
      payload: { script: 'hold' },
    });
    await until('the hold script to run', async () => {
      const found = await env.call('commands.get', { commandId: hold.id });
      return found.state === 'running';
    });
    const created = await cliJson(['rollouts', 'create', '--release', '0.7.0', '--nodes', node.id]);
    const update = await until('the update to reach the daemon', async () => {
      const rollout = await cliJson(['rollouts', 'get', created.id]);
      const workflowId = rollout.waves[0].nodes[0].workflowId;
      if (!workflowId) return undefined;
      const commands = await cliJson(['commands', 'list', '--node', node.id, '--state', 'sent']);
      return commands.items.find((c: any) => c.kind === 'bcd.update' && c.workflowId === workflowId);
    });
    expect((await env.call('commands.get', { commandId: hold.id })).state).toBe('running');

    const aborted = await cliJson(['rollouts', 'abort', created.id]);
    expect(aborted.state).toBe('aborted');
    expect(aborted.waves[0].nodes[0]).toMatchObject({
      state: 'cancelled',
      error: `aborted before the node ran it: command ${update.id} cancelled (the node was told to drop it)`,
    });
    // The gateway tells the daemon; the daemon drops it from its queue and says so.
    const dropped = await commandEnded(update.id);
    expect(dropped).toMatchObject({ state: 'cancelled', error: 'cancelled before it ran' });
    const held = await until('the hold script to finish', async () => {
      const found = await env.call('commands.get', { commandId: hold.id });
      return found.state === 'succeeded' && found;
    });
    expect(held.state).toBe('succeeded');
    // The queue went on without it: never run, nothing installed, the same session and version.
    expect(node.daemon.err.join('\n')).not.toContain(`running ${update.id}`);
    expect(bundleVersion(node)).toBe('0.2.0');
    expect(await versions([node])).toEqual(['0.2.0']);
    expect((await cliJson(['rollouts', 'get', created.id])).waves[0].nodes[0].state).toBe('cancelled');
  });
});

describe('bad input at every command', () => {
  it('rollouts create refuses a missing or double target, bad waves, unknown releases and nodes, and another tenant', async () => {
    const none = await cli(['rollouts', 'create', '--release', '0.2.0']);
    expect(codeOf(none)).toBe('INVALID_ARGUMENT');
    expect(
      codeOf(
        await cli(['rollouts', 'create', '--release', '0.2.0', '--pool', poolId, '--selector', 'rack=r1']),
      ),
    ).toBe('INVALID_ARGUMENT');
    for (const waves of ['0', '1,,2', '150%', 'ten', '1;2'])
      expect(
        codeOf(await cli(['rollouts', 'create', '--release', '0.2.0', '--pool', poolId, '--waves', waves])),
        waves,
      ).toBe('INVALID_ARGUMENT');
    const falling = await cli([
      'rollouts',
      'create',
      '--release',
      '0.2.0',
      '--pool',
      poolId,
      '--waves',
      '3,1,100%',
    ]);
    expect(falling.stderr).toContain('waves: 1 is fewer nodes than the wave before it');
    const short = await cli(['rollouts', 'create', '--release', '0.2.0', '--pool', poolId, '--waves', '1,2']);
    expect(short.stderr).toContain('waves: the last wave reaches 2 of the 4 nodes; it must reach them all');
    expect(codeOf(await cli(['rollouts', 'create', '--release', '7.7.7', '--pool', poolId]))).toBe(
      'NOT_FOUND',
    );
    expect(codeOf(await cli(['rollouts', 'create', '--release', 'not-a-version', '--pool', poolId]))).toBe(
      'INVALID_ARGUMENT',
    );
    await release('0.6.0', build('0.6.0'), ['k1', 'k2'], { upload: false });
    const unstored = await cli(['rollouts', 'create', '--release', '0.6.0', '--pool', poolId]);
    expect([codeOf(unstored), unstored.stderr]).toEqual([
      'INVALID_STATE',
      expect.stringContaining('stores no build of release 0.6.0'),
    ]);
    expect(
      codeOf(
        await cli(['rollouts', 'create', '--release', '0.2.0', '--nodes', 'node_01m00000000000000000000000']),
      ),
    ).toBe('NOT_FOUND');
    expect(
      codeOf(
        await cli(['rollouts', 'create', '--release', '0.2.0', '--nodes', 'pool_01m00000000000000000000000']),
      ),
    ).toBe('INVALID_ARGUMENT');
    expect(
      codeOf(await cli(['rollouts', 'create', '--release', '0.2.0', '--selector', 'vramGiB >= 80'])),
    ).toBe('INVALID_ARGUMENT');
    expect(
      codeOf(await cli(['rollouts', 'create', '--release', '0.2.0', '--selector', 'rack=nowhere'])),
    ).toBe('INVALID_ARGUMENT');
    // A NUL byte cannot be on a command line; through the API it is refused before anything is read.
    const nul = await fetch(`${url}/api/compute/rollouts/create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${env.rootKey}` },
      body: JSON.stringify({ tenantId: 'root', version: '0.2.0', poolId, reason: 'a\u0000b' }),
    });
    expect([nul.status, ((await nul.json()) as any).error?.code]).toEqual([400, 'INVALID_ARGUMENT']);
    const foreign = await cli(['rollouts', 'create', '--release', '0.2.0', '--pool', poolId], {
      key: env.acmeKey,
    });
    expect(codeOf(foreign)).toBe('ACCESS_DENIED');
    expect(codeOf(await cli(['rollouts', 'list'], { key: env.acmeKey }))).toBe('ACCESS_DENIED');
    // Nothing was created by any of them.
    const listed = await cliJson(['rollouts', 'list']);
    expect(listed.items.map((r: any) => r.version).sort()).toEqual([
      '0.2.0',
      '0.3.0',
      '0.3.1',
      '0.4.0',
      '0.7.0',
    ]);
  });

  it('get, pause, resume and abort refuse a malformed id, an unknown rollout and the wrong state', async () => {
    const completed = (await cliJson(['rollouts', 'list', '--state', 'completed'])).items[0];
    for (const verb of ['get', 'pause', 'resume', 'abort']) {
      const malformed = await cli(['rollouts', verb, 'wf_01m00000000000000000000000']);
      expect([malformed.status, codeOf(malformed)], verb).toEqual([2, 'INVALID_ARGUMENT']);
      expect(codeOf(await cli(['rollouts', verb, 'rollout_01m00000000000000000000000'])), verb).toBe(
        'NOT_FOUND',
      );
    }
    for (const verb of ['pause', 'resume', 'abort'])
      expect(codeOf(await cli(['rollouts', verb, completed.id])), verb).toBe('INVALID_STATE');
  });

  it('releases upload refuses a file that is not the signed build, an unknown release and a piece out of place', async () => {
    const wrong = join(scratch, 'wrong.cjs');
    writeFileSync(wrong, 'not the build');
    const refused = await cli(['releases', 'upload', '0.6.0', wrong]);
    expect(codeOf(refused)).toBe('DIGEST_MISMATCH');
    expect(codeOf(await cli(['releases', 'upload', '7.7.7', wrong]))).toBe('NOT_FOUND');
    expect(codeOf(await cli(['releases', 'upload', '0.6.0', join(scratch, 'missing.cjs')]))).toBe(
      'NOT_FOUND',
    );
    expect((await cliJson(['releases', 'get', '0.6.0'])).artifacts[0].stored).toBe(false);
    const piece = async (body: Record<string, unknown>) => {
      const response = await fetch(`${url}/api/compute/releases/upload`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${env.rootKey}` },
        body: JSON.stringify({ tenantId: 'root', version: '0.6.0', platform: 'linux-x64', ...body }),
      });
      return ((await response.json()) as any).error?.code;
    };
    expect(await piece({ offset: 100, data: 'AAAA' })).toBe('INVALID_ARGUMENT');
    expect(await piece({ offset: 0, data: 'AAB=' })).toBe('INVALID_ARGUMENT');
    expect(await piece({ offset: 0, data: 'A'.repeat(50_000) })).toBe('INVALID_ARGUMENT');
    expect(await piece({ offset: 0, data: 'AAAA', platform: 'linux-mips' })).toBe('NOT_FOUND');
    expect(await piece({ offset: 0, data: 'AAAA', version: '7.7.7' })).toBe('NOT_FOUND');
    // Not a byte of any of them was kept.
    const kept = await sql<{ stored: string }>`
      select coalesce(sum(length(data)), 0)::text as stored from compute.release_artifact_chunks c
        join compute.releases r on r.id = c.release_id where r.version = '0.6.0'`.execute(env.database.db);
    expect(kept.rows[0]!.stored).toBe('0');
  });

  it('bcd join refuses a --release-pins file that is not release keys, before asking to join', async () => {
    const dir = join(scratch, 'refused-join');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'token'), 'bcjt_not-a-token\n', { mode: 0o600 });
    for (const [name, content, message] of [
      ['threshold.json', { pins: [keyIds.k1], threshold: 2 }, /threshold must be a whole number from 1 to 1/],
      ['pin.json', { pins: ['sha256/short'] }, /is neither a release key id/],
      ['extra.json', { pins: [keyIds.k1], channel: 'beta' }, /has a field it should not: channel/],
      ['text.json', 'not json', /is not a JSON file/],
    ] as const) {
      writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content));
      const joining = start(
        join(daemonDir, 'bin', 'bcd.cjs'),
        [
          'join',
          ...['--url', url, '--token-file', join(dir, 'token'), '--state-dir', join(dir, 'state')],
          ...['--release-pins', join(dir, name)],
        ],
        {},
      );
      expect(await joining.exited, name).toBe(1);
      expect(joining.err.join('\n'), name).toMatch(new RegExp(`^INVALID_ARGUMENT: .*${message.source}`, 'm'));
      expect(existsSync(join(dir, 'state', 'node.json')), name).toBe(false);
    }
  });
});
