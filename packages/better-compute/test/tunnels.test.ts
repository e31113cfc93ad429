/**
 * Tunnels as an attacker and a user meet them, against the real server, a real bcd and the real
 * CLI: tunnels.open decides on the node and answers a single-use ticket; the route spends it once
 * (a replay is refused), refuses an expired, forged, malformed, NUL-bearing or huge ticket, a
 * request without the credential that opened it, another credential and a foreign origin, always
 * with a 4xx; console, exec and forward refuse without --url or a terminal before a ticket is spent.
 */
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { newId } from '@better-compute/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { betterCompute, type ComputeInstance, serve } from '../src/index.js';
import { main } from '../src/cli/index.js';
import type { CliTerminal } from '../src/cli/io.js';
import { createPkiBundle } from '../src/pki/create.js';
import { bcd, bcdJoin, type Proc, until } from '../../daemon/test/daemon-support.js';
import { callServer, captureIO, cliLending, scratchDirectory } from './cli-support.js';

const secret = 'the tunnels test deployment secret';
const unknownInstance = newId('instance');
const scratch = scratchDirectory('.bc-tunnels-');
let database: TestDatabase;
let compute: ComputeInstance;
let url = '';
const stop = new AbortController();
let serving: Promise<void>;
let daemon: Proc;
let nodeId: string;
let oldNodeId: string;
let oldSession: WebSocket;
let rootKey: string;
let rootKey2: string;
let rootPassword: string;
let acmeKey: string;
let clockShiftMs = 0;

const call = <T = any>(method: string, body: Record<string, unknown>, token = rootKey): Promise<T> =>
  callServer<T>(url, method, body, token);

/** Opens the tunnel's WebSocket; resolves with the HTTP refusal, or the first frame and close. */
function attach(
  ticket: string,
  headers: Record<string, string> = { authorization: `Bearer ${rootKey}` },
): Promise<{ status?: number; body?: any; frames: string[]; opened?: boolean }> {
  return new Promise((resolve) => {
    const frames: string[] = [];
    const ws = new WebSocket(`${url.replace('http', 'ws')}/api/compute/tunnels/${ticket}`, { headers });
    ws.on('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
        resolve({ status: response.statusCode, body, frames });
      });
    });
    ws.on('error', () => undefined);
    // Upgraded: the node's console is attached; hang up at once.
    ws.on('open', () => {
      resolve({ frames, opened: true });
      ws.close(1000);
    });
  });
}

const tunnelRows = async () =>
  Number(
    (await sql<{ n: string }>`select count(*) as n from compute.tunnels`.execute(compute.database.db))
      .rows[0]!.n,
  );

beforeAll(async () => {
  const pki = join(scratch, 'pki.json');
  await createPkiBundle({ path: pki, secret });
  database = await createTestDatabase('postgres');
  compute = await betterCompute(
    { database, pki, secret, trustedOrigins: ['https://console.example.com'], rateLimit: false },
    { log: () => {}, now: () => new Date(Date.now() + clockShiftMs) },
  );
  await compute.migrate();
  const dev = (await compute.embeddedIam!.bootstrapDev())!;
  rootKey = dev.rootAdmin.apiKey;
  rootPassword = dev.rootAdmin.password;
  rootKey2 = (await compute.embeddedIam!.createApiKey(dev.rootAdmin.principalId, { name: 'second' })).key;
  acmeKey = dev.acmeAdmin.apiKey;
  serving = serve({
    compute,
    port: 0,
    roles: ['api', 'gateway'],
    signal: stop.signal,
    log: () => {},
    onListening: (u) => (url = u),
  });
  await until('serve', async () => url);
  const site = await call('sites.create', { name: 'lab' });
  const pool = await call('pools.create', { siteId: site.id, name: 'lab' });
  const { token } = await call('joinTokens.create', { poolId: pool.id, uses: 2, preApproved: true });
  const stateDir = join(scratch, 'state');
  const joined = await bcdJoin(url, token, scratch, stateDir);
  nodeId = JSON.parse(joined.out[0]!).nodeId;
  daemon = bcd(['run', '--state-dir', stateDir], { BCD_SSH_DIR: join(scratch, 'ssh') });
  await until(
    'the node to be ready',
    async () => (await call<any>('nodes.get', { nodeId })).state === 'ready',
  );
  // Ready comes with the join; the session row (its Hello's capabilities) when bcd has connected.
  await until(
    'the node’s session',
    async () =>
      (
        await sql<any>`select 1 from compute.node_sessions where node_id = ${nodeId}`.execute(
          compute.database.db,
        )
      ).rows.length,
  );
  // A node whose daemon is older: its Hello advertises no pty.
  const old = await call('nodes.join', {
    joinToken: token,
    hostname: 'old',
    inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
  });
  oldNodeId = old.nodeId;
  oldSession = new WebSocket(`${url.replace('http', 'ws')}/api/compute/gateway/session`, {
    headers: { authorization: `Bearer ${old.nodeCredential}` },
  });
  oldSession.on('message', (data) => {
    if (JSON.parse(data.toString()).t === 'ready')
      oldSession.send(
        JSON.stringify({
          t: 'hello',
          version: '0.0.9',
          capabilities: [],
          inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
        }),
      );
  });
  await until(
    'the old node’s session',
    async () =>
      (
        await sql<any>`select 1 from compute.node_sessions where node_id = ${oldNodeId}`.execute(
          compute.database.db,
        )
      ).rows.length,
  );
}, 120_000);

afterAll(async () => {
  oldSession?.close();
  daemon?.child.kill('SIGTERM');
  await daemon?.exited;
  stop.abort();
  await serving;
  await database?.close();
});

describe('tunnels.open', () => {
  it('answers a single-use ticket for a node console, bound to the caller and recorded', async () => {
    const opened = await call('tunnels.open', { nodeId, op: 'console', cols: 100, rows: 30 });
    expect(opened).toMatchObject({ nodeId, op: 'console', instanceId: null, port: null });
    expect(opened.ticket).toMatch(/^bct1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(Date.parse(opened.expiresAt) - Date.now()).toBeLessThanOrEqual(60_000);
    const claims = JSON.parse(Buffer.from(opened.ticket.split('.')[1], 'base64url').toString());
    expect(claims).toMatchObject({
      id: opened.tunnelId,
      nodeId,
      op: 'console',
      cols: 100,
      rows: 30,
      action: 'compute:nodes:console',
    });
    const row = (
      await sql<any>`select * from compute.tunnels where id = ${opened.tunnelId}`.execute(compute.database.db)
    ).rows[0];
    expect(row).toMatchObject({ node_id: nodeId, op: 'console', spent_at: null });
    // Events show once every older transaction has committed (docs/live-events.md).
    await until('the tunnel.opened event', async () =>
      (await call<any>('events.list', { type: 'tunnel.opened' })).items.some(
        (e: any) => e.subject.id === opened.tunnelId,
      ),
    );
  });

  it('is decided as compute:nodes:console on the node: another tenant is refused, a wrong shape is INVALID_ARGUMENT', async () => {
    await expect(
      call('tunnels.open', { tenantId: 'acme', nodeId, op: 'console' }, acmeKey),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(call('tunnels.open', { nodeId, op: 'console' }, acmeKey)).rejects.toMatchObject({
      code: 'ACCESS_DENIED',
    });
    for (const input of [
      { op: 'console' },
      { nodeId, instanceId: unknownInstance, op: 'console' },
      { nodeId, op: 'tcp', port: 22 },
      { nodeId, op: 'console', port: 22 },
      { instanceId: unknownInstance, op: 'tcp' },
      { nodeId, op: 'console', cols: 0 },
    ])
      await expect(call('tunnels.open', input), JSON.stringify(input)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
  });

  it('refuses an agent acting for an administrator unless its own bindings grant the console', async () => {
    const iam = compute.embeddedIam!;
    const person = (await iam.listPrincipals({ tenantId: 'root', kind: 'person' })).items[0]!;
    const agent = await iam.createAgent({ tenantId: 'root', displayName: 'helper', actingFor: person.id });
    const { key } = await iam.createApiKey(agent.id, { name: 'agent' });
    await expect(call('tunnels.open', { nodeId, op: 'console' }, key)).rejects.toMatchObject({
      code: 'ACCESS_DENIED',
    });
  });

  it('refuses a daemon without the capability with UNSUPPORTED daemon-capability, and an unknown instance with NOT_FOUND', async () => {
    await expect(call('tunnels.open', { nodeId: oldNodeId, op: 'console' })).rejects.toMatchObject({
      code: 'UNSUPPORTED',
      details: { reason: 'daemon-capability', capability: 'pty' },
    });
    await expect(
      call('tunnels.open', { instanceId: unknownInstance, op: 'tcp', port: 22 }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('the tunnel route', () => {
  it('spends a ticket on first use: a second use is refused', async () => {
    const { ticket } = await call('tunnels.open', { nodeId, op: 'console' });
    const first = await attach(ticket);
    expect(first).toMatchObject({ opened: true });
    const second = await attach(ticket);
    expect(second.status).toBe(401);
    expect(second.body.error).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(second.body.error.message).toContain('already used');
  });

  it('opens from the console’s own origin with the session cookie that asked for the ticket', async () => {
    const signedIn = await compute.embeddedIam!.signIn('admin@root.localhost', rootPassword, 'root');
    const { ticket } = await call('tunnels.open', { nodeId, op: 'console' }, signedIn.token);
    const cookie = `better-iam.session=${signedIn.token}`;
    expect((await attach(ticket, { cookie, origin: 'https://evil.example' })).status).toBe(403);
    expect((await attach(ticket, { cookie })).status).toBe(401);
    const fromConsole = await attach(ticket, { cookie, origin: 'https://console.example.com' });
    expect(fromConsole).toMatchObject({ opened: true });
  });

  it('refuses an expired ticket', async () => {
    clockShiftMs = -2 * 60_000;
    let ticket: string;
    try {
      ({ ticket } = await call('tunnels.open', { nodeId, op: 'console' }));
    } finally {
      clockShiftMs = 0;
    }
    const attempt = await attach(ticket);
    expect(attempt.status).toBe(401);
    expect(attempt.body.error.message).toContain('expired');
  });

  it('refuses without the credential that opened it, from another credential, tenant or origin, and a forged, malformed, NUL or huge ticket: 4xx, never 5xx', async () => {
    const { ticket } = await call('tunnels.open', { nodeId, op: 'console' });
    const [head, claims, signature] = ticket.split('.');
    const forgedClaims = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(claims!, 'base64url').toString()), nodeId: oldNodeId }),
    ).toString('base64url');
    const cases: [string, string, Record<string, string>, number][] = [
      ['no credential', ticket, {}, 401],
      ['a malformed Authorization header', ticket, { authorization: 'Basic abc' }, 401],
      ['an unknown token', ticket, { authorization: 'Bearer biam_nope' }, 401],
      ['another credential of the same person', ticket, { authorization: `Bearer ${rootKey2}` }, 403],
      ['another tenant’s credential', ticket, { authorization: `Bearer ${acmeKey}` }, 403],
      [
        'a foreign origin',
        ticket,
        { authorization: `Bearer ${rootKey}`, origin: 'https://evil.example' },
        403,
      ],
      ['a cookie without an origin', ticket, { cookie: 'better-iam.session=abc' }, 401],
      ['forged claims', `${head}.${forgedClaims}.${signature}`, { authorization: `Bearer ${rootKey}` }, 401],
      ['a malformed ticket', 'bct1.abc', { authorization: `Bearer ${rootKey}` }, 401],
      ['a NUL byte', `${ticket}%00`, { authorization: `Bearer ${rootKey}` }, 401],
      ['a huge ticket', 'a'.repeat(4000), { authorization: `Bearer ${rootKey}` }, 401],
      ['a path past the ticket', `${ticket}/x`, { authorization: `Bearer ${rootKey}` }, 401],
    ];
    for (const [name, path, headers, status] of cases) {
      const attempt = await attach(path, headers);
      expect(attempt.status, name).toBe(status);
    }
    const huge = await attach('a'.repeat(70_000));
    expect(huge.status).toBeGreaterThanOrEqual(400);
    expect(huge.status).toBeLessThan(500);
    // None of them spent it: its holder still can.
    const good = await attach(ticket);
    expect(good).toMatchObject({ opened: true });
  });
});

describe('console, exec and forward', () => {
  const terminal = (): CliTerminal & { written: string[] } => {
    const written: string[] = [];
    return {
      written,
      onInput: () => () => undefined,
      write: (data) => void written.push(typeof data === 'string' ? data : Buffer.from(data).toString()),
      size: () => ({ columns: 80, rows: 24 }),
    };
  };
  const run = async (argv: string[], env: Record<string, string>, withTerminal = true) => {
    const { io, err } = captureIO(
      { HOME: scratch, BETTER_COMPUTE_TOKEN: rootKey, ...env },
      { cwd: scratch, ...(withTerminal ? { terminal: terminal() } : {}) },
    );
    const code = await main(
      argv,
      cliLending(() => compute),
      io,
    );
    return { code, err: err.join('\n') };
  };

  it('need --url and a terminal, and refuse without them before a ticket is spent', async () => {
    const before = await tunnelRows();
    for (const argv of [
      ['console', '--tenant', 'root', '--node', nodeId],
      ['exec', '--tenant', 'root', '--instance', unknownInstance],
      ['forward', '--tenant', 'root', '--instance', unknownInstance, '--port', '22'],
    ]) {
      const result = await run(argv, {});
      expect(result.code, argv[0]).toBe(1);
      expect(result.err).toContain('UNSUPPORTED');
      expect(result.err).toContain('--url');
    }
    const noTerminal = await run(
      ['console', '--tenant', 'root', '--node', nodeId],
      { BETTER_COMPUTE_URL: url },
      false,
    );
    expect(noTerminal.code).toBe(1);
    expect(noTerminal.err).toContain('UNSUPPORTED');
    expect(noTerminal.err).toContain('terminal');
    expect(await tunnelRows()).toBe(before);
  });

  it('console takes exactly one of --node and --instance', async () => {
    const both = await run(['console', '--node', nodeId, '--instance', unknownInstance], {
      BETTER_COMPUTE_URL: url,
    });
    expect(both.code).toBe(2);
    const neither = await run(['console'], { BETTER_COMPUTE_URL: url });
    expect(neither.code).toBe(2);
  });

  it('console --node gives a root shell with a prompt on the real node: typed input echoes, the size follows resizes, exit 7 exits 7', async () => {
    let input: ((data: Uint8Array) => void) | null = null;
    let resize: ((size: { columns: number; rows: number }) => void) | null = null;
    const written: string[] = [];
    const raw: boolean[] = [];
    const shell: CliTerminal = {
      onInput(listener) {
        input = listener;
        return () => (input = null);
      },
      write: (data) => void written.push(typeof data === 'string' ? data : Buffer.from(data).toString()),
      size: () => ({ columns: 90, rows: 33 }),
      onResize(listener) {
        resize = listener;
        return () => (resize = null);
      },
      raw: (enabled) => void raw.push(enabled),
    };
    const type = (text: string) => input!(new TextEncoder().encode(text));
    const seen = (text: string) =>
      until(`the shell to print ${text}`, async () => written.join('').includes(text));
    const { io, err } = captureIO(
      { HOME: scratch, BETTER_COMPUTE_TOKEN: rootKey, BETTER_COMPUTE_URL: url },
      { cwd: scratch, terminal: shell },
    );
    const running = main(
      ['console', '--tenant', 'root', '--node', nodeId],
      cliLending(() => compute),
      io,
    );
    await until('the terminal to attach', async () => input !== null);
    // An interactive login shell: its prompt comes before anything is typed (issue 31: a console
    // that showed none): "# " as root, "$ " as anyone else.
    await until('the shell’s prompt', async () => /[#$] $/.test(written.join('')));
    type('echo typed-$((6*7)); id -u; stty size\r');
    await seen('typed-42');
    await seen('33 90');
    expect(written.join('')).toContain('echo typed-$((6*7))');
    resize!({ columns: 101, rows: 27 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    type('stty size\r');
    await seen('27 101');
    type('exit 7\r');
    expect(await running).toBe(7);
    expect(err.join('\n')).toContain('REMOTE_EXIT');
    expect(written.join('')).toMatch(/\b0\r?\n/);
    expect(raw).toEqual([true, false]);
  }, 120_000);
});

describe('a console on the real node', () => {
  /** A scripted terminal: what the test types, what the shell printed, resizes on demand. */
  function scriptedTerminal() {
    let input: ((data: Uint8Array) => void) | null = null;
    const written: string[] = [];
    const terminal: CliTerminal = {
      onInput(listener) {
        input = listener;
        return () => (input = null);
      },
      write: (data) => void written.push(typeof data === 'string' ? data : Buffer.from(data).toString()),
      size: () => ({ columns: 80, rows: 24 }),
    };
    return {
      terminal,
      written,
      type: (text: string) => input?.(new TextEncoder().encode(text)),
      attached: () => input !== null,
      seen: (text: string) =>
        until(`the shell to print ${text}`, async () => written.join('').includes(text)),
    };
  }

  function consoleRun(token: string, scripted: ReturnType<typeof scriptedTerminal>) {
    const { io, err } = captureIO(
      { HOME: scratch, BETTER_COMPUTE_TOKEN: token, BETTER_COMPUTE_URL: url },
      { cwd: scratch, terminal: scripted.terminal },
    );
    return main(
      ['console', '--tenant', 'root', '--node', nodeId],
      cliLending(() => compute),
      io,
    ).then((code) => ({ code, err: err.join('\n') }));
  }

  it('exits 0 when the shell does, and Ctrl-] detaches', async () => {
    const quitting = scriptedTerminal();
    const quit = consoleRun(rootKey, quitting);
    await until('the terminal to attach', async () => quitting.attached());
    quitting.type('exit 0\r');
    expect((await quit).code).toBe(0);
    const detaching = scriptedTerminal();
    const detached = consoleRun(rootKey, detaching);
    await until('the terminal to attach', async () => detaching.attached());
    detaching.type('echo still-$((1+1))\r');
    await detaching.seen('still-2');
    detaching.type('\u001d');
    const outcome = await detached;
    expect(outcome.code).toBe(0);
    expect(outcome.err).toContain('detached');
  });

  it('a revoked credential closes its open tunnel: the console exits 255', async () => {
    const person = (await compute.embeddedIam!.listPrincipals({ tenantId: 'root', kind: 'person' }))
      .items[0]!;
    const created = await compute.embeddedIam!.createApiKey(person.id, { name: 'short-lived' });
    const scripted = scriptedTerminal();
    const running = consoleRun(created.key, scripted);
    await until('the terminal to attach', async () => scripted.attached());
    scripted.type('echo open-$((2*3))\r');
    await scripted.seen('open-6');
    await compute.embeddedIam!.revokeApiKey(created.apiKey.id);
    const { code, err } = await running;
    expect(code).toBe(255);
    expect(err).toContain('REMOTE_EXIT');
    await until('the tunnel’s end to be recorded', async () => {
      const row = (
        await sql<any>`select end_reason from compute.tunnels where principal = ${person.id} and end_reason like 'UNAUTHENTICATED%' limit 1`.execute(
          compute.database.db,
        )
      ).rows[0];
      return row?.end_reason?.includes('UNAUTHENTICATED');
    });
  });

  it('holds the node’s output back while the client is behind, and loses nothing: 32 MiB arrive whole', async () => {
    const { ticket } = await call('tunnels.open', { nodeId, op: 'console' });
    const ws = new WebSocket(`${url.replace('http', 'ws')}/api/compute/tunnels/${ticket}`, {
      headers: { authorization: `Bearer ${rootKey}` },
      maxPayload: 64 * 1024 * 1024,
    });
    let zeros = 0;
    let exit: any;
    ws.on('message', (data: Buffer, isBinary) => {
      if (!isBinary) exit = JSON.parse(data.toString());
      else for (const byte of data) if (byte === 0) zeros++;
    });
    await new Promise((resolve) => ws.once('open', resolve));
    // The shell lingers a second after the output: bytes a pty still holds when its program exits
    // at once are the daemon's end of the story (node-console), not what this test is about.
    ws.send(Buffer.from('stty -echo; head -c 33554432 /dev/zero; sleep 1; exit 0\r'), { binary: true });
    ws.pause();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    ws.resume();
    // Paused, the client read nothing; the node was held back rather than buffered without bound.
    await new Promise((resolve) => ws.once('close', resolve));
    expect(zeros).toBe(32 * 1024 * 1024);
    expect(exit).toMatchObject({ t: 'exit', status: 0 });
  }, 120_000);
});
