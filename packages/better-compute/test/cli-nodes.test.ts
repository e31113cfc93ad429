/**
 * The nodes, join-tokens, join-requests and inventory commands in process, against a deployment
 * with the real embedded Better IAM on PGlite and bootstrapDev()'s API keys. The test plays the
 * node daemon by calling the public nodes.join, nodes.claim and nodes.heartbeat routes itself.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createCli, main } from '../src/cli/index.js';
import { captureIO } from './cli-support.js';

let database: TestDatabase;
let compute: ComputeInstance;
let rootKey: string;
let acmeMemberKey: string;
/** Every method the commands sent, in order (`nodes.cordon`). */
const sent: string[] = [];
const scratch = mkdtempSync(join(import.meta.dirname, '.tmp-cli-nodes-'));

const borrowed = (): ComputeInstance =>
  ({
    ...compute,
    handler: (request: Request) => {
      sent.push(new URL(request.url).pathname.replace(/^\/api\/compute\//, '').replaceAll('/', '.'));
      return compute.handler(request);
    },
    close: async () => undefined,
  }) as ComputeInstance;
const cli = createCli({ projectCommands: false, loadCompute: async () => borrowed() });

const env = (token = rootKey): Record<string, string> => ({
  HOME: scratch,
  BETTER_IAM_HOME: join(scratch, 'iam'),
  BETTER_COMPUTE_TOKEN: token,
  BETTER_COMPUTE_TENANT: token === rootKey ? 'root' : 'acme',
});

/** Runs a command line; returns what it printed, or throws the failure. */
async function run(argv: string[], token?: string): Promise<string[]> {
  const { io, out } = captureIO(env(token), { cwd: scratch });
  await cli.run(argv, io);
  return out;
}
async function json<T = any>(argv: string[]): Promise<T> {
  return JSON.parse((await run([...argv, '--format', 'compact']))[0]!) as T;
}
/** Runs a command line like the binary: its exit status and what it printed on each stream. */
async function status(
  argv: string[],
  token?: string,
): Promise<{ code: number; out: string[]; err: string[] }> {
  const { io, out, err } = captureIO(env(token), { cwd: scratch });
  const code = await main(argv, cli, io);
  return { code, out, err };
}

/** The daemon's side: the public routes, without any IAM credential. */
async function daemon<T = any>(method: string, body: unknown): Promise<T> {
  const response = await compute.handler(
    new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
  const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
  if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
  return answer.data as T;
}

const gpus = Array.from({ length: 8 }, (_, index) => ({
  index,
  model: 'H100',
  product: 'H100-SXM5-80GB',
  vramGiB: 80,
  nvlinkDomain: 'nvl-a',
}));

beforeAll(async () => {
  database = await createTestDatabase('pglite');
  compute = await betterCompute({ database, trustedOrigins: [], rateLimit: false }, { log: () => {} });
  await compute.migrate();
  const dev = await compute.embeddedIam!.bootstrapDev();
  rootKey = dev!.rootAdmin.apiKey;
  acmeMemberKey = dev!.acmeMember.apiKey;
});
afterAll(async () => {
  await compute?.close();
  await database?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a machine joins a pool through the nodes commands', () => {
  let siteId: string;
  let poolId: string;
  let tokenId: string;
  let token: string;
  let joinRequestId: string;
  let claimSecret: string;
  let nodeId: string;
  let nodeCredential: string;

  it('sites create, then a pool (pools are another group’s commands: created through the API)', async () => {
    const site = await json([
      'sites',
      'create',
      'fra-1',
      '--region',
      'eu-central',
      '--key',
      'cli-nodes-site-1',
    ]);
    expect(site).toMatchObject({ name: 'fra-1', region: 'eu-central', tenantId: 'root', version: 1 });
    siteId = site.id;
    const api = await (
      await import('../src/cli/transport.js')
    ).createCliApi({
      io: { ...captureIO(env()).io, err: () => {}, cwd: scratch },
      global: {
        format: undefined,
        query: undefined,
        url: undefined,
        tenant: 'root',
        config: undefined,
        profile: undefined,
      },
      compute: async () => borrowed(),
    });
    const pool = await api.call('pools.create', { siteId, name: 'gpu-main', class: 'gpu' });
    poolId = pool.id;
  });

  it('join-tokens create --out writes the token to a new 0600 file and prints the rest', async () => {
    const out = await run([
      'join-tokens',
      'create',
      '--pool',
      poolId,
      '--uses',
      '2',
      '--ttl',
      '2h',
      '--out',
      'join.token',
      '--format',
      'compact',
    ]);
    const answer = JSON.parse(out[0]!);
    const path = join(scratch, 'join.token');
    expect(Object.keys(answer)).toEqual(['joinToken', 'out']);
    expect(answer.out).toBe(path);
    expect(answer.joinToken).toMatchObject({
      poolId,
      usesAllowed: 2,
      usesLeft: 2,
      state: 'active',
      preApproved: false,
    });
    tokenId = answer.joinToken.id;
    expect(Date.parse(answer.joinToken.expiresAt) - Date.parse(answer.joinToken.createdAt)).toBe(7200_000);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    token = readFileSync(path, 'utf8');
    expect(token).toMatch(new RegExp(`^${tokenId}\\.[A-Za-z0-9_-]+\\n$`));
    token = token.trim();
    expect(out.join('\n')).not.toContain(token.split('.')[1]);
  });

  it('a second run over the same file is ALREADY_EXISTS, writes nothing and mints no token', async () => {
    sent.length = 0;
    const failed = await status(['join-tokens', 'create', '--pool', poolId, '--out', 'join.token']);
    expect(failed.code).toBe(1);
    // The idempotency key line, when the command logs one, comes before the refusal.
    expect(failed.err.filter((line) => !line.startsWith('idempotency key: '))[0]).toBe(
      'ALREADY_EXISTS: join.token already exists; a token is never written over a file',
    );
    expect(sent).toEqual([]);
    expect(readFileSync(join(scratch, 'join.token'), 'utf8')).toBe(`${token}\n`);
    const listed = await json(['join-tokens', 'list']);
    expect(listed.items.map((t: { id: string }) => t.id)).toEqual([tokenId]);
  });

  it('join-tokens list prints a table by default, never a secret', async () => {
    const out = await run(['join-tokens', 'list']);
    const [header, row, ...more] = out[0]!.split('\n');
    expect(header).toMatch(/^id\s+pool\s+state\s+usesLeft\s+preApproved\s+expiresAt\s+description$/);
    expect(row).toMatch(new RegExp(`^${tokenId}\\s+${poolId}\\s+active\\s+2/2\\s+false\\s+\\S+Z$`));
    expect(more).toEqual([]);
    expect(out[0]).not.toContain(token);
  });

  it('join-tokens revoke refuses a pasted token (anything with a ".") before sending', async () => {
    sent.length = 0;
    const failed = await status(['join-tokens', 'revoke', token]);
    expect(failed.code).toBe(2);
    expect(failed.err[0]).toBe(
      'INVALID_ARGUMENT: joinToken must be a join token id (jtok_…), not a token: it contains a "."; nothing was sent',
    );
    expect(failed.err.join('\n')).not.toContain(token.split('.')[1]);
    const wrongKind = await status(['join-tokens', 'revoke', 'node_01k5w00000000000000000000']);
    expect(wrongKind.code).toBe(2);
    expect(wrongKind.err[0]).toMatch(/^INVALID_ARGUMENT: joinToken must be a join token id like jtok_01…/);
    expect(sent).toEqual([]);
  });

  it('the daemon joins with the token; join-requests list shows it pending; approve admits it', async () => {
    const joined = await daemon('nodes.join', {
      joinToken: token,
      hostname: 'gpu-node-1',
      inventory: { cpuCores: 64, memoryGiB: 512, gpus },
    });
    expect(joined).toMatchObject({ state: 'pending', nodeId: null, nodeCredential: null });
    joinRequestId = joined.joinRequestId;
    claimSecret = joined.claimSecret;

    const listed = await run(['join-requests', 'list', '--state', 'pending']);
    const lines = listed[0]!.split('\n');
    expect(lines[0]).toMatch(/^id\s+hostname\s+pool\s+state\s+gpus\s+node\s+createdAt$/);
    expect(lines[1]).toMatch(
      new RegExp(
        `^${joinRequestId}\\s+gpu-node-1\\s+${poolId}\\s+pending\\s+8x H100-SXM5-80GB\\s+-\\s+\\S+Z$`,
      ),
    );
    expect(lines).toHaveLength(2);

    const approved = await json(['join-requests', 'approve', joinRequestId, '--label', 'rack=r12']);
    expect(approved).toMatchObject({ id: joinRequestId, state: 'approved', hostname: 'gpu-node-1' });
    nodeId = approved.nodeId;
    expect(nodeId).toMatch(/^node_/);

    const claimed = await daemon('nodes.claim', { joinRequestId, claimSecret });
    expect(claimed).toMatchObject({ state: 'approved', nodeId });
    nodeCredential = claimed.nodeCredential;
    const beat = await daemon('nodes.heartbeat', { nodeCredential });
    expect(beat).toMatchObject({ nodeId, state: 'ready' });
  });

  it('join-requests approve and reject check the id kind before sending', async () => {
    sent.length = 0;
    const failed = await status(['join-requests', 'approve', nodeId]);
    expect(failed.code).toBe(2);
    expect(failed.err[0]).toBe(
      `INVALID_ARGUMENT: joinRequest must be a join request id like jreq_01… (got "${nodeId}")`,
    );
    expect(sent).toEqual([]);
  });

  it('nodes list prints the node as a table with its CPUs and memory (issue 31); --format json gives the page', async () => {
    const out = await run(['nodes', 'list']);
    const lines = out[0]!.split('\n');
    expect(lines[0]).toMatch(
      /^id\s+name\s+pool\s+state\s+cpus\s+memory\s+gpus\s+idle\s+version\s+heartbeat$/,
    );
    expect(lines[1]).toMatch(
      new RegExp(
        `^${nodeId}\\s+gpu-node-1\\s+${poolId}\\s+ready\\s+64\\s+512 GiB\\s+8x H100-SXM5-80GB\\s+8/8\\s+\\d+\\s+\\S+Z$`,
      ),
    );
    expect(lines).toHaveLength(2);
    const page = await json(['nodes', 'list', '--pool', poolId, '--state', 'ready']);
    expect(page.nextCursor).toBeNull();
    expect(page.items.map((n: { id: string }) => n.id)).toEqual([nodeId]);
    expect(await run(['nodes', 'list', '--state', 'cordoned'])).toEqual(['(no rows)']);
  });

  it('a list with more rows ends with the cursor footer', async () => {
    await json(['sites', 'create', 'fra-2']);
    const out = await run(['sites', 'list', '--limit', '1']);
    const lines = out[0]!.split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+region\s+labels\s+version\s+createdAt$/);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/^\(more rows: --cursor \S+\)$/);
    const cursor = /--cursor (\S+)\)$/.exec(lines[2]!)![1]!;
    const next = (await run(['sites', 'list', '--limit', '1', '--cursor', cursor]))[0]!.split('\n');
    expect(next).toHaveLength(2);
    expect(next[1]).not.toBe(lines[1]);
  });

  it('nodes get shows the node; a wrong id kind is a usage error before any call', async () => {
    const node = await json(['nodes', 'get', nodeId]);
    expect(node).toMatchObject({
      id: nodeId,
      poolId,
      name: 'gpu-node-1',
      state: 'ready',
      gpuCount: 8,
      freeGpus: 8,
    });
    expect(node.labels).toEqual({ rack: 'r12' });
    expect(await run(['nodes', 'get', nodeId, '--query', 'state'])).toEqual(['ready']);
    sent.length = 0;
    const failed = await status(['nodes', 'get', poolId]);
    expect(failed.code).toBe(2);
    expect(failed.err[0]).toBe(`INVALID_ARGUMENT: node must be a node id like node_01… (got "${poolId}")`);
    expect(sent).toEqual([]);
  });

  it('inventory get, history and diff', async () => {
    const inventory = await json(['inventory', 'get', nodeId]);
    expect(inventory).toMatchObject({ nodeId, revision: 1, applied: true });
    expect(inventory.inventory).toEqual({ cpuCores: 64, memoryGiB: 512, gpus });
    await daemon('nodes.heartbeat', { nodeCredential, inventory: { cpuCores: 64, memoryGiB: 1024, gpus } });
    const history = (await run(['inventory', 'history', nodeId]))[0]!.split('\n');
    expect(history[0]).toMatch(/^revision\s+recordedAt\s+cpuCores\s+memoryGiB\s+gpus$/);
    expect(history[1]).toMatch(/^2\s+\S+Z\s+64\s+1024\s+8x H100-SXM5-80GB$/);
    expect(history[2]).toMatch(/^1\s+\S+Z\s+64\s+512\s+8x H100-SXM5-80GB$/);
    const diff = await json(['inventory', 'diff', nodeId, '--from', '1', '--to', '2']);
    expect(diff).toEqual({
      nodeId,
      fromRevision: 1,
      toRevision: 2,
      changes: [{ path: 'memoryGiB', kind: 'changed', before: 512, after: 1024 }],
    });
  });

  it('inventory diff prints indented JSON by default, since it is not a list; --format table shows the changes', async () => {
    const diff = {
      nodeId,
      fromRevision: 1,
      toRevision: 2,
      changes: [{ path: 'memoryGiB', kind: 'changed', before: 512, after: 1024 }],
    };
    expect(await run(['inventory', 'diff', nodeId])).toEqual([JSON.stringify(diff, null, 2)]);
    expect(await run(['inventory', 'diff', nodeId, '--format', 'table'])).toEqual([
      'path       kind     before  after\nmemoryGiB  changed  512     1024',
    ]);
  });

  it('nodes label and taint', async () => {
    const labelled = await json(['nodes', 'label', nodeId, 'zone=eu-1', '--remove', 'rack']);
    expect(labelled.labels).toEqual({ zone: 'eu-1' });
    const tainted = await json(['nodes', 'taint', nodeId, 'maintenance=true:NoSchedule', 'gpu-check']);
    expect(tainted.taints).toEqual([
      { key: 'gpu-check', value: '', effect: 'NoSchedule' },
      { key: 'maintenance', value: 'true', effect: 'NoSchedule' },
    ]);
    const untainted = await json(['nodes', 'taint', nodeId, '--remove', 'maintenance,gpu-check']);
    expect(untainted.taints).toEqual([]);
    const bad = await status(['nodes', 'taint', nodeId, 'x=y:NoExecute']);
    expect(bad.code).toBe(2);
    expect(bad.err[0]).toBe('INVALID_ARGUMENT: a taint\'s effect must be NoSchedule (got "x=y:NoExecute")');
  });

  it('cordon with a stale --if-version is CONFLICT; with the current one it applies', async () => {
    const before = await json(['nodes', 'get', nodeId]);
    const stale = await status(['nodes', 'cordon', nodeId, '--if-version', String(before.version - 1)]);
    expect(stale.code).toBe(1);
    expect(stale.err[0]).toMatch(/^CONFLICT: /);
    expect((await json(['nodes', 'get', nodeId])).state).toBe('ready');
    const cordoned = await json([
      'nodes',
      'cordon',
      nodeId,
      '--if-version',
      String(before.version),
      '--reason',
      'maintenance',
    ]);
    expect(cordoned).toMatchObject({ id: nodeId, state: 'cordoned', version: before.version + 1 });
    const uncordoned = await json(['nodes', 'uncordon', nodeId]);
    expect(uncordoned.state).toBe('ready');
    const drained = await json(['nodes', 'drain', nodeId]);
    expect(['draining', 'drained']).toContain(drained.state);
  });

  it('nodes events lists the node’s events as a table', async () => {
    const out = (await run(['nodes', 'events', nodeId]))[0]!.split('\n');
    expect(out[0]).toMatch(/^position\s+type\s+occurredAt\s+actor\s+data$/);
    const types = out.slice(1).map((line) => line.split(/\s+/)[1]);
    expect(types).toContain('node.cordoned');
  });

  it('nodes delete refuses without --yes before any call; with --yes a retired node goes', async () => {
    sent.length = 0;
    const refused = await status(['nodes', 'delete', nodeId]);
    expect(refused.code).toBe(2);
    expect(refused.err[0]).toBe(
      `INVALID_ARGUMENT: nodes delete removes ${nodeId} for good: pass --yes to confirm`,
    );
    expect(sent).toEqual([]);
    const retired = await json(['nodes', 'retire', nodeId, '--reason', 'decommissioned']);
    expect(retired.state).toBe('retired');
    expect(await json(['nodes', 'delete', nodeId, '--yes'])).toEqual({ id: nodeId, deleted: true });
    expect(await run(['nodes', 'list'])).toEqual(['(no rows)']);
  });

  it('join-tokens revoke by id; another tenant sees none of them and cannot act as root', async () => {
    const revoked = await json(['join-tokens', 'revoke', tokenId]);
    expect(revoked).toMatchObject({ id: tokenId, state: 'revoked' });
    expect(await run(['join-tokens', 'list'], acmeMemberKey)).toEqual(['(no rows)']);
    const denied = await status(['join-tokens', 'list', '--tenant', 'root'], acmeMemberKey);
    expect(denied.code).toBe(1);
    expect(denied.err[0]).toMatch(/^ACCESS_DENIED: /);
  });

  it('join-tokens create without --out prints the token once; join-requests reject', async () => {
    const answer = await json(['join-tokens', 'create', '--pool', poolId]);
    expect(answer.token).toMatch(new RegExp(`^${answer.joinToken.id}\\.`));
    const joined = await daemon('nodes.join', {
      joinToken: answer.token,
      hostname: 'stranger',
      inventory: { cpuCores: 4, memoryGiB: 8, gpus: [] },
    });
    const rejected = await json([
      'join-requests',
      'reject',
      joined.joinRequestId,
      '--reason',
      'unknown host',
    ]);
    expect(rejected).toMatchObject({ state: 'rejected', reason: 'unknown host', nodeId: null });
  });

  it('join-tokens create prints its idempotency key; run again with --key, it prints the same token and mints none', async () => {
    const before = (await json(['join-tokens', 'list'])).items.length;
    const first = await status(['join-tokens', 'create', '--pool', poolId, '--format', 'compact']);
    expect(first.code).toBe(0);
    const key = /^idempotency key: (cli-[0-9a-f-]{36})$/.exec(first.err[0]!)?.[1];
    expect(key).toBeDefined();
    const again = await status([
      'join-tokens',
      'create',
      '--pool',
      poolId,
      '--key',
      key!,
      '--format',
      'compact',
    ]);
    expect(again.code).toBe(0);
    expect(again.out).toEqual(first.out);
    expect(JSON.parse(first.out[0]!).token).toMatch(/^jtok_[0-9a-z]{26}\./);
    expect((await json(['join-tokens', 'list'])).items.length).toBe(before + 1);
    // The same --key with other flags is another request: refused, with the server's hint.
    const other = await status(['join-tokens', 'create', '--pool', poolId, '--uses', '5', '--key', key!]);
    expect(other.code).toBe(1);
    expect(other.err.slice(1, 3)).toEqual([
      'CONFLICT: this idempotency key was used with a different input',
      'hint: Use a new --key for a different request, or repeat the first request exactly.',
    ]);
  });

  it('join-tokens create --out into a missing directory is INVALID_ARGUMENT and sends nothing', async () => {
    sent.length = 0;
    const failed = await status(['join-tokens', 'create', '--pool', poolId, '--out', 'missing/join.token']);
    expect(failed.code).toBe(2);
    expect(failed.err[0]).toBe(
      `INVALID_ARGUMENT: the directory of --out missing/join.token does not exist: ${join(scratch, 'missing')}`,
    );
    expect(failed.err[1]).toBe('hint: Create the directory first, or pass --out a path in an existing one.');
    expect(sent).toEqual([]);
  });
});
