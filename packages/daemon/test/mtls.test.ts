/**
 * The gateway's mutual TLS as an attacker meets it: a gateway serving its certificate from the
 * machine CA asks for client certificates; a node certificate that is valid and names the node
 * of the credential opens a session; one from another CA, for another node, expired, or a
 * gateway's is refused before any session, as is the link path without a gateway certificate.
 * Certificate requests over the session are checked (key type, proof of possession) and can only
 * name the session's own node. No answer is a 5xx.
 */
import { generateKeyPairSync, sign, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  betterCompute,
  type ComputeInstance,
  type NodeStreams,
  serve,
} from '../../better-compute/src/index.js';
import { StateDir } from '../src/state.js';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import { issueNodeCertificate } from '../../better-compute/src/pki/issue.js';
import { bcd, type Proc, until } from './daemon-support.js';
import { type Pki, scratchPki, SECRET } from './replicas-support.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-mtls-'));
let database: TestDatabase;
let compute: ComputeInstance;
let pki: Pki;
let url = '';
let gatewayTls: { cert: string; key: string };
const controller = new AbortController();
let running: Promise<void>;
const nodes: { nodeId: string; credential: string }[] = [];
let localStreams: NodeStreams | undefined;
let daemon: Proc | undefined;
let rootKey = '';
let poolId = '';

async function call<T = any>(method: string, body: Record<string, unknown>, key?: string): Promise<T> {
  const response = await compute.handler(
    new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    }),
  );
  const answer = (await response.json()) as { data?: T; error?: { code: string } };
  if (answer.error) throw new Error(answer.error.code);
  return answer.data as T;
}

function nodeKey() {
  const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    publicKey: pair.publicKey,
    pem: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

async function nodeCertificate(
  nodeId: string,
  options: { now?: Date; days?: number; from?: Pki['bundle'] } = {},
) {
  const key = nodeKey();
  const issued = await issueNodeCertificate(options.from ?? pki.bundle, SECRET, {
    nodeId,
    publicKey: key.publicKey,
    ...(options.days ? { days: options.days } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  return { cert: issued.certificatePem, key: key.pem };
}

type Outcome = { status?: number; close?: number; message?: any; ws?: WebSocket; error?: string };

/** Connects to `path` over TLS with the given client certificate and headers. */
function connect(
  path: string,
  options: { cert?: string; key?: string; headers?: Record<string, string> },
  first?: (ws: WebSocket) => void,
): Promise<Outcome> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace('https', 'wss')}/api/compute/gateway/${path}`, {
      ca: [pki.bundle.machineCa.certificatePem],
      ...(options.cert ? { cert: options.cert, key: options.key } : {}),
      headers: options.headers ?? {},
    });
    ws.on('unexpected-response', (_request, response) => resolve({ status: response.statusCode }));
    ws.on('error', (error) => resolve({ error: error.message }));
    ws.on('close', (code) => resolve({ close: code }));
    ws.on('open', () => {
      if (path === 'link') first?.(ws);
    });
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString());
      if (message.t === 'ready' && first) return first(ws);
      resolve({ message, ws });
    });
  });
}
const session = (options: Parameters<typeof connect>[1], first?: (ws: WebSocket) => void) =>
  connect('session', options, first);
const bearer = (n: number) => ({ authorization: `Bearer ${nodes[n]!.credential}` });

beforeAll(async () => {
  pki = await scratchPki(scratch);
  const gw = await pki.gateway('gw');
  gatewayTls = { cert: gw.tls.certificatePem, key: gw.tls.privateKeyPem };
  database = await createTestDatabase('postgres');
  compute = await betterCompute(
    {
      database,
      trustedOrigins: [],
      rateLimit: false,
      pki: join(scratch, '.better-compute', 'pki.json'),
      secret: SECRET,
    },
    { log: () => {} },
  );
  await compute.migrate();
  const key = (await compute.embeddedIam!.bootstrapDev())!.rootAdmin.apiKey;
  rootKey = key;
  running = serve({
    compute,
    port: 0,
    roles: ['api', 'gateway'],
    signal: controller.signal,
    log: () => {},
    tls: { certFile: gw.certFile, keyFile: gw.keyFile },
    onListening: (u) => (url = u),
    onNodeStreams: (made) => (localStreams = made),
  });
  await until('serve', async () => url);
  expect(url).toMatch(/^https:/);
  const site = await call('sites.create', { tenantId: 'root', name: 's' }, key);
  const pool = await call('pools.create', { tenantId: 'root', siteId: site.id, name: 'p' }, key);
  poolId = pool.id;
  const { token } = await call(
    'joinTokens.create',
    { tenantId: 'root', poolId: pool.id, uses: 2, preApproved: true },
    key,
  );
  for (const hostname of ['a', 'b']) {
    const joined = await call('nodes.join', {
      joinToken: token,
      hostname,
      inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
    });
    nodes.push({ nodeId: joined.nodeId, credential: joined.nodeCredential });
  }
}, 120_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  controller.abort();
  await running;
  await database?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the gateway with mutual TLS', () => {
  it('opens a session for a valid node certificate that names the credential’s node', async () => {
    const opened = await session({ ...(await nodeCertificate(nodes[0]!.nodeId)), headers: bearer(0) });
    expect(opened.message).toEqual({ t: 'ready' });
    opened.ws!.close();
  });

  it('still takes the node credential alone (how a node gets its first certificate)', async () => {
    const opened = await session({ headers: bearer(0) });
    expect(opened.message).toEqual({ t: 'ready' });
    opened.ws!.close();
  });

  it('refuses a certificate for another node, an expired one, one from another CA, and a gateway’s', async () => {
    expect(await session({ ...(await nodeCertificate(nodes[1]!.nodeId)), headers: bearer(0) })).toEqual({
      status: 403,
    });
    const expired = await nodeCertificate(nodes[0]!.nodeId, {
      now: new Date(Date.now() - 3 * 86_400_000),
      days: 1,
    });
    expect(Date.parse(new X509Certificate(expired.cert).validTo)).toBeLessThan(Date.now());
    expect(await session({ ...expired, headers: bearer(0) })).toEqual({ status: 403 });
    const other = await createPkiBundle({ path: join(scratch, 'other', 'pki.json'), secret: SECRET });
    const forged = await nodeCertificate(nodes[0]!.nodeId, { from: other });
    expect(await session({ ...forged, headers: bearer(0) })).toEqual({ status: 403 });
    expect(await session({ ...gatewayTls, headers: bearer(0) })).toEqual({ status: 403 });
  });

  it('refuses a valid certificate without the credential, and malformed or huge headers, with no 5xx', async () => {
    const certificate = await nodeCertificate(nodes[0]!.nodeId);
    expect(await session(certificate)).toEqual({ status: 401 });
    expect(
      await session({ ...certificate, headers: { authorization: `Bearer ${'node_'.padEnd(5000, 'x')}` } }),
    ).toEqual({
      status: 401,
    });
    // A NUL byte in the header, sent raw (WebSocket clients refuse to): a 4xx from the parser, not a 5xx.
    const { connect: tlsConnect } = await import('node:tls');
    const { port } = new URL(url);
    const status = await new Promise<string>((resolve) => {
      const socket = tlsConnect(
        { host: '127.0.0.1', port: Number(port), ca: [pki.bundle.machineCa.certificatePem], ...certificate },
        () =>
          socket.write(
            'GET /api/compute/gateway/session HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
              'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer node_a\u0000b.c\r\n\r\n',
          ),
      );
      socket.on('data', (data) => resolve(data.toString('latin1').split('\r\n')[0]!));
      socket.on('error', () => resolve('closed'));
      socket.on('end', () => resolve('closed'));
    });
    expect(status).toMatch(/^HTTP\/1\.1 4\d\d|^closed$/);
  });

  it('the link path takes only a gateway certificate, and checks what it is asked', async () => {
    expect(await connect('link', {})).toEqual({ status: 403 });
    expect(await connect('link', await nodeCertificate(nodes[0]!.nodeId))).toEqual({ status: 403 });
    const malformed = await connect('link', gatewayTls, (ws) => ws.send('{"t":"open","nodeId":"x\\u0000"}'));
    expect(malformed.message).toMatchObject({ t: 'end', error: { code: 'INVALID_ARGUMENT' } });
    const absent = await connect('link', gatewayTls, (ws) =>
      ws.send(
        JSON.stringify({
          t: 'open',
          nodeId: nodes[1]!.nodeId,
          target: { kind: 'node-console', cols: 80, rows: 24 },
        }),
      ),
    );
    expect(absent.message).toMatchObject({ t: 'end', error: { code: 'UNAVAILABLE' } });
  });

  it('issues a certificate over the session only for the session’s node, a P-256 key and a valid proof', async () => {
    const ask = (request: Record<string, unknown>) =>
      session({ headers: bearer(0) }, (ws) =>
        ws.send(JSON.stringify({ t: 'certificate.request', ...request })),
      );
    const key = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const publicKey = key.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const proofFor = (nodeId: string) =>
      sign(
        'sha256',
        Buffer.from(`better-compute node certificate request for ${nodeId}`),
        key.privateKey,
      ).toString('base64');
    expect((await ask({ publicKey, proof: proofFor(nodes[1]!.nodeId) })).message).toMatchObject({
      t: 'certificate.refused',
    });
    const ed = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect((await ask({ publicKey: ed, proof: 'AAAA' })).message).toMatchObject({ t: 'certificate.refused' });
    expect((await ask({ publicKey: 'not a key\u0000', proof: 'x' })).message).toMatchObject({
      t: 'certificate.refused',
    });
    const issued = (await ask({ publicKey, proof: proofFor(nodes[0]!.nodeId) })).message;
    expect(issued.t).toBe('certificate');
    expect(new X509Certificate(issued.certificatePem).subject).toBe(`CN=${nodes[0]!.nodeId}`);
    expect(issued.caCertificates).toEqual([pki.bundle.machineCa.certificatePem]);
  });

  it('a bcd with only its credential gets its certificate on its first session, and serve’s own streams reach it in process', async () => {
    const stateDir = join(scratch, 'state');
    const state = new StateDir(stateDir);
    state.saveIdentity({
      url: `${url}/api/compute`,
      nodeId: nodes[1]!.nodeId,
      nodeCredential: nodes[1]!.credential,
      commandRoot: null,
      gatewayCa: pki.bundle.machineCa.certificatePem,
    });
    daemon = bcd(['run', '--state-dir', stateDir]);
    await until('its certificate', async () => state.certificate());
    const stream = await until('a stream', () =>
      localStreams!.open(nodes[1]!.nodeId, { kind: 'node-console', cols: 80, rows: 24 }),
    );
    const chunks: Buffer[] = [];
    stream.onData((chunk) => chunks.push(Buffer.from(chunk)));
    const ended = new Promise((resolve) => stream.onEnd(resolve));
    stream.write(Buffer.from('echo local; exit 5\n'));
    expect(await ended).toEqual({ exitStatus: 5 });
    expect(Buffer.concat(chunks).toString()).toContain('local');
  }, 120_000);

  it('bcd join reaches an API served with a machine-CA certificate when given --ca-file', async () => {
    const { token } = await call(
      'joinTokens.create',
      { tenantId: 'root', poolId, uses: 1, preApproved: true },
      rootKey,
    );
    const tokenFile = join(scratch, 'join-token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const caFile = join(scratch, 'machine-ca.pem');
    writeFileSync(caFile, pki.bundle.machineCa.certificatePem);
    // The server runs in this process, so bcd runs beside it, never blocking it.
    const run = async (stateDir: string, extra: string[]) => {
      const proc = bcd([
        'join',
        '--url',
        url,
        '--token-file',
        tokenFile,
        '--state-dir',
        stateDir,
        '--timeout',
        '30',
        ...extra,
      ]);
      return { status: await proc.exited, stderr: proc.err.join('\n') };
    };
    // Without the CA the server's certificate is not trusted: a clear refusal, and the token is not spent.
    const untrusted = await run(join(scratch, 'joined-untrusted'), []);
    expect(untrusted.status).not.toBe(0);
    expect(untrusted.stderr).toMatch(/not trusted.*--ca-file/);
    const joined = await run(join(scratch, 'joined'), ['--ca-file', caFile]);
    expect(joined.stderr).not.toContain(token);
    expect(joined.status).toBe(0);
    expect(new StateDir(join(scratch, 'joined')).identity()?.nodeId).toMatch(/^node_/);
  }, 120_000);
});
