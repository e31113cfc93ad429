/**
 * Node streams across replicas, for real: two gateway replicas serving mutual TLS and an API and
 * controllers replica, each a `better-compute serve` process; the test process is one more API
 * replica holding `createNodeStreams`. A real `bcd` joins (its node certificate issued at join),
 * holds its session on one gateway by that certificate, and serves a node-console pty that a
 * stream opened here reaches over the internal mTLS link. Then the holding gateway is killed: the
 * daemon moves to the other without the node going offline, and a new stream works.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicKey, X509Certificate } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ComputeError } from '@better-compute/core';
import {
  createNodeStreams,
  type NodeStream,
  type NodeStreamEnd,
  type NodeStreams,
} from '../../better-compute/src/index.js';
import { STREAM_DISCONNECT_BYTES, STREAM_HIGH_WATER_BYTES } from '@better-compute/core';
import { bcd, deployment, type Deployment, freePort, type Proc, until } from './daemon-support.js';
import { type Pki, replica, scratchPki, SECRET } from './replicas-support.js';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import { issueNodeCertificate } from '../../better-compute/src/pki/issue.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-streams-'));
const stateDir = join(scratch, 'state');
let env: Deployment;
let pki: Pki;
let api: Proc;
const gateways: { proc: Proc; url: string; id?: string }[] = [];
let daemon: Proc;
let nodeId = '';
let streams: NodeStreams;

/** The node's session row: which replica holds it. */
const holder = async () =>
  (
    await sql<{
      gateway_id: string;
    }>`select gateway_id from compute.node_sessions where node_id = ${nodeId}`.execute(env.database.db)
  ).rows[0]?.gateway_id;
const replicaId = async (url: string) =>
  (
    await sql<{ id: string }>`select id from compute.gateway_replicas where url = ${url}`.execute(
      env.database.db,
    )
  ).rows[0]?.id;

/** Collects a stream's output as text and resolves its end. */
function watch(stream: NodeStream) {
  const chunks: Buffer[] = [];
  const ended = new Promise<Parameters<Parameters<NodeStream['onEnd']>[0]>[0]>((resolve) =>
    stream.onEnd(resolve),
  );
  stream.onData((chunk) => chunks.push(Buffer.from(chunk)));
  return { text: () => Buffer.concat(chunks).toString('utf8'), ended };
}

beforeAll(async () => {
  env = await deployment();
  pki = await scratchPki(scratch);
  api = await replica(scratch, env.database.url!, [
    '--roles',
    'api,controllers',
    '--port',
    String(await freePort()),
  ]);
  for (const name of ['gw1', 'gw2']) {
    const port = await freePort();
    const cert = await pki.gateway(name);
    const url = `https://127.0.0.1:${port}`;
    const proc = await replica(scratch, env.database.url!, [
      '--roles',
      'gateway',
      '--port',
      String(port),
      '--tls-cert',
      cert.certFile,
      '--tls-key',
      cert.keyFile,
    ]);
    gateways.push({ proc, url, id: await until(`${name} recorded`, () => replicaId(url)) });
  }
  // This test process is an API replica too: it links to the gateways with its own certificate.
  streams = createNodeStreams({ compute: env.compute, tls: (await pki.gateway('api')).tls });
}, 120_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  for (const gateway of gateways) gateway.proc.child.kill('SIGKILL');
  api?.child.kill('SIGKILL');
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('node streams across gateway replicas', () => {
  it('bcd join gets its node certificate from the machine CA and keeps it and its key 0600', async () => {
    const site = await env.call('sites.create', { name: 'streams' });
    const pool = await env.call('pools.create', { siteId: site.id, name: 'streams-pool' });
    const token = await env.call('joinTokens.create', { poolId: pool.id });
    const tokenFile = join(scratch, 'token');
    writeFileSync(tokenFile, token.token, { mode: 0o600 });
    const apiUrl = api.err
      .concat(api.out)
      .join('\n')
      .match(/serving (http:\/\/[0-9.:]+)/)![1]!;
    const joining = bcd([
      'join',
      '--url',
      apiUrl,
      '--url',
      gateways[0]!.url,
      '--url',
      gateways[1]!.url,
      '--ca-file',
      pki.caFile,
      '--token-file',
      tokenFile,
      '--state-dir',
      stateDir,
    ]);
    await until('the join request', async () =>
      joining.err.some((line) => line.includes('waiting for an operator')),
    );
    const [request] = (await env.call('joinRequests.list', { state: 'pending' })).items;
    await env.call('joinRequests.approve', { joinRequestId: request.id });
    expect(await joining.exited).toBe(0);
    nodeId = JSON.parse(joining.out[0]!).nodeId;
    expect(joining.err.join('\n')).toMatch(/node certificate issued, valid until/);
    for (const file of ['node-key.json', 'certificate.json'])
      expect(statSync(join(stateDir, file)).mode & 0o777).toBe(0o600);
    const held = JSON.parse(readFileSync(join(stateDir, 'certificate.json'), 'utf8'));
    const { X509Certificate } = await import('node:crypto');
    const certificate = new X509Certificate(held.certificatePem);
    expect(certificate.subject).toContain(`CN=${nodeId}`);
    expect(certificate.verify(pki.bundle.machineCa.certificate.publicKey)).toBe(true);
    const key = readFileSync(join(stateDir, 'node-key.json'), 'utf8');
    expect(joining.err.join('\n')).not.toContain(JSON.parse(key).privateKeyPem.split('\n')[1]);
    const status = bcd(['status', '--state-dir', stateDir]);
    expect(await status.exited).toBe(0);
    expect(JSON.parse(status.out.join('\n')).certificate.notAfter).toBe(held.notAfter);
  }, 120_000);

  it('bcd run holds its session on the first gateway by its node certificate', async () => {
    const started = Date.now();
    daemon = bcd(['run', '--state-dir', stateDir, '--url', gateways[0]!.url, '--url', gateways[1]!.url]);
    await until('the session on gw1', async () => (await holder()) === gateways[0]!.id);
    console.log(`bcd run: start to session held in ${Date.now() - started} ms`);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const rss =
      Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${daemon.child.pid}/status`, 'utf8'))![1]) / 1024;
    console.log(`bcd run, connected and idle: ${rss.toFixed(1)} MiB RSS`);
    await until('the node ready', async () => (await env.call('nodes.get', { nodeId })).state === 'ready');
    expect(gateways[0]!.proc.err.join('\n')).toContain(
      `${nodeId} connected, authenticated by its node certificate`,
    );
  }, 120_000);

  it('a stream opened on another replica reaches a node-console pty over the link: output, window size and exit status', async () => {
    const stream = await streams.open(nodeId, { kind: 'node-console', cols: 80, rows: 24 });
    const seen = watch(stream);
    stream.resize(132, 43);
    stream.write(Buffer.from('stty size; echo hi; exit 3\n'));
    const end = await seen.ended;
    expect(end).toEqual({ exitStatus: 3 });
    expect(seen.text()).toContain('43 132');
    expect(seen.text()).toMatch(/\bhi\r?\n/);
  }, 120_000);

  it('refuses what the node cannot serve, and a node with no session, with the documented codes', async () => {
    const refused = await streams
      .open(nodeId, {
        kind: 'instance-exec',
        instanceId: 'inst_nothere',
        argv: [],
        tty: true,
        cols: 80,
        rows: 24,
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ComputeError);
    expect((refused as ComputeError).code).toBe('UNSUPPORTED');
    expect((refused as ComputeError).message).toContain('instance exec');
    // An instance this node does not hold: the stream opens, and ends with the node's reason.
    const serial = await streams.open(nodeId, {
      kind: 'instance-console',
      instanceId: 'inst_nothere',
      cols: 80,
      rows: 24,
    });
    const end = await new Promise<NodeStreamEnd>((resolve) => serial.onEnd(resolve));
    expect(end.exitStatus).toBeNull();
    expect(end.error?.message).toContain('inst_nothere is not on this node');
    const missing = await streams
      .open('node_doesnotexist', { kind: 'node-console', cols: 80, rows: 24 })
      .catch((error: unknown) => error);
    expect((missing as ComputeError).code).toBe('UNAVAILABLE');
    const malformed = await streams
      .open(nodeId, { kind: 'node-console', cols: 0, rows: 1e9 } as never)
      .catch((error: unknown) => error);
    expect((malformed as ComputeError).code).toBe('INVALID_ARGUMENT');
  });

  it('a reader that stops reading pauses the pty within the high-water mark; resumed, everything arrives', async () => {
    const stream = await streams.open(nodeId, { kind: 'node-console', cols: 80, rows: 24 });
    let received = 0;
    stream.onData((chunk) => (received += chunk.byteLength));
    stream.pause();
    const total = 48 * 1024 * 1024;
    stream.write(Buffer.from(`stty -echo; head -c ${total} /dev/zero | tr '\\0' x; echo; exit 0\n`));
    const flow = stream as unknown as { backlog: { queued: number } };
    await until('the backlog to fill', async () => flow.backlog.queued > STREAM_HIGH_WATER_BYTES / 2);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const held = flow.backlog.queued;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    // Paused: the daemon stopped the pty, so the backlog no longer grows, and it stayed under the bound.
    expect(flow.backlog.queued).toBe(held);
    expect(held).toBeLessThan(STREAM_DISCONNECT_BYTES);
    expect(held).toBeLessThan(STREAM_HIGH_WATER_BYTES + 2 * 1024 * 1024);
    expect(received).toBe(0);
    const rss =
      Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${daemon.child.pid}/status`, 'utf8'))![1]) / 1024;
    console.log(`bcd RSS while a reader is paused: ${rss.toFixed(1)} MiB`);
    const ended = new Promise((resolve) => stream.onEnd(resolve));
    stream.resume();
    expect(await ended).toEqual({ exitStatus: 0 });
    expect(received).toBeGreaterThanOrEqual(total);
  }, 120_000);

  it('the gateway holding the node dies: the daemon moves to the other without the node going offline, and a new stream works', async () => {
    const states = new Set<string>();
    let watching = true;
    const poll = (async () => {
      while (watching) {
        states.add((await env.call('nodes.get', { nodeId })).state);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    gateways[0]!.proc.child.kill('SIGKILL');
    await until('the session on gw2', async () => (await holder()) === gateways[1]!.id, 30_000);
    const stream = await streams.open(nodeId, { kind: 'node-console', cols: 80, rows: 24 });
    const seen = watch(stream);
    stream.write(Buffer.from('echo moved; exit 7\n'));
    expect(await seen.ended).toEqual({ exitStatus: 7 });
    expect(seen.text()).toContain('moved');
    watching = false;
    await poll;
    expect([...states]).toEqual(['ready']);
    expect(gateways[1]!.proc.err.join('\n')).toContain(
      `${nodeId} connected, authenticated by its node certificate`,
    );
  }, 120_000);

  it('a certificate the gateway refuses (from a CA no longer trusted) is set aside: the daemon gets a new one over its credential', async () => {
    daemon.child.kill('SIGKILL');
    await daemon.exited;
    const other = await createPkiBundle({ path: join(scratch, 'retired', 'pki.json'), secret: SECRET });
    const key = JSON.parse(readFileSync(join(stateDir, 'node-key.json'), 'utf8'));
    const foreign = await issueNodeCertificate(other, SECRET, {
      nodeId,
      publicKey: createPublicKey(key.publicKeyPem),
    });
    const held = JSON.parse(readFileSync(join(stateDir, 'certificate.json'), 'utf8'));
    writeFileSync(
      join(stateDir, 'certificate.json'),
      JSON.stringify({
        ...held,
        certificatePem: foreign.certificatePem,
        caCertificates: [pki.bundle.machineCa.certificatePem],
      }),
    );
    daemon = bcd(['run', '--state-dir', stateDir, '--url', gateways[1]!.url]);
    await until('a new certificate', async () => {
      const now = JSON.parse(readFileSync(join(stateDir, 'certificate.json'), 'utf8'));
      return now.certificatePem !== foreign.certificatePem;
    });
    expect(daemon.err.join('\n')).toContain('the gateway refused the node certificate');
    const renewed = new X509Certificate(
      JSON.parse(readFileSync(join(stateDir, 'certificate.json'), 'utf8')).certificatePem,
    );
    expect(renewed.verify(pki.bundle.machineCa.certificate.publicKey)).toBe(true);
  }, 120_000);
});
