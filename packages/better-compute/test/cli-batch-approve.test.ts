/**
 * The approver's online commands through the real binary against a real server whose PKI bundle
 * turns the quorum on (two of three approver keys): batch create, list, show (--scope-out), approve
 * (--key with the guide's summary, --root, --signature from an offline `batch sign`), members and
 * cancel. A proxy in front of the real server lies about one answer at a time, as a compromised
 * control plane would: the commands refuse with INVALID_RESPONSE, SCOPE_MISMATCH or SCOPE_CHANGED
 * before anything is signed. A bare-metal machine's power off goes the same way: `metal power off` names
 * the metal.bmc-power leaf, `batch create --scope FILE` holds it as a metal.bmc on the site agent.
 */
import { chmodSync, copyFileSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { readApproverSet, type ScopeLeaf, scopeTree, toHex } from '@better-compute/core/quorum';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createPkiBundle } from '../src/pki/create.js';
import {
  callServer,
  failureCode,
  runBinary,
  scratchDirectory,
  serveLive,
  type LiveServer,
} from './cli-support.js';
import { agentWithKey } from './iam-support.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 180_000 });

const scratch = scratchDirectory('.bc-batch-approve-');
const secret = 'the batch approve test deployment secret';

let database: TestDatabase;
let compute: ComputeInstance;
let url = '';
let server: LiveServer;
let rootKey: string;
let trustDomain: string;
const kids: Record<'a' | 'b' | 'c', string> = { a: '', b: '', c: '' };
const nodes: string[] = [];

/** The real binary, from `scratch`, as the root tenant's administrator (another URL or token when given). */
const run = (args: string[], env: Record<string, string> = {}) =>
  runBinary(args, scratch, {
    BETTER_IAM_HOME: join(scratch, 'iam'),
    BETTER_COMPUTE_URL: url,
    BETTER_COMPUTE_TOKEN: rootKey,
    BETTER_COMPUTE_TENANT: 'root',
    ...env,
  });
const codeOf = failureCode;
/** A command that must succeed: its JSON answer. */
async function json<T = any>(args: string[], env: Record<string, string> = {}): Promise<T> {
  const result = await run([...args, '--format', 'compact'], env);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}
const api = <T = any>(method: string, body: Record<string, unknown>) =>
  callServer<T>(url, method, body, rootKey);

const power = (subjects: string[], action = 'off'): ScopeLeaf[] =>
  subjects.map((subject) => ({ subject, kind: 'metal.power', payload: { action } }));
let files = 0;
function writeJson(value: unknown): string {
  const name = `file-${files++}.json`;
  writeFileSync(join(scratch, name), JSON.stringify(value));
  return name;
}
/** `batch create` without --key: the new batch. */
async function createBatch(
  leaves: unknown[],
  reason = 'power off rack 12 for the PDU swap',
  more: string[] = [],
) {
  return json(['batch', 'create', '--reason', reason, '--scope', writeJson(leaves), ...more]);
}

beforeAll(async () => {
  // Three approver keys, made as an approver makes them.
  for (const name of ['a', 'b', 'c'] as const) {
    const made = await run(['batch', 'keygen', '--out', `${name}.pem`]);
    expect(made.status, made.stderr).toBe(0);
    kids[name] = JSON.parse(made.stdout).kid;
  }
  // The deployment's bundle names them: two of the three must sign.
  const pki = join(scratch, 'pki.json');
  const bundle = await createPkiBundle({ path: pki, secret });
  trustDomain = bundle.trustDomain;
  const set = readApproverSet({
    trustDomain,
    epoch: 1,
    threshold: 2,
    approvers: ['a', 'b', 'c'].map((name) => ({
      publicKey: readFileSync(join(scratch, `${name}.pem.pub`), 'utf8'),
    })),
  });
  const document = JSON.parse(readFileSync(pki, 'utf8'));
  writeFileSync(pki, JSON.stringify({ ...document, approvers: [{ set, signatures: [] }] }));

  database = await createTestDatabase('pglite');
  compute = await betterCompute(
    { database, pki, secret, trustedOrigins: [], rateLimit: false },
    { log: () => {} },
  );
  await compute.migrate();
  rootKey = (await compute.embeddedIam!.bootstrapDev())!.rootAdmin.apiKey;
  server = await serveLive(compute);
  url = server.url;

  const site = await api('sites.create', { name: 'rack-12' });
  const pool = await api('pools.create', { siteId: site.id, name: 'metal', class: 'gpu' });
  for (const hostname of ['r12-n1', 'r12-n2', 'r12-n3']) {
    const { token } = await api('joinTokens.create', { poolId: pool.id, preApproved: true });
    // The machine's side: nodes.join is public, the join token decides.
    const response = await fetch(`${url}/api/compute/nodes/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        joinToken: token,
        hostname,
        inventory: { cpuCores: 8, memoryGiB: 64, gpus: [] },
        labels: {},
      }),
    });
    const joined = (await response.json()) as { data: { nodeId: string } };
    expect(joined.data?.nodeId, JSON.stringify(joined)).toMatch(/^node_/);
    nodes.push(joined.data.nodeId);
  }
});

afterAll(async () => {
  await server.close();
  await compute?.close();
  await database?.close();
});

describe('batch create, list, show and members', () => {
  let batch: any;

  it('create holds the leaves in a pending batch; list shows its reason, state, size and approvals', async () => {
    batch = await createBatch(power(nodes));
    expect(batch).toMatchObject({
      state: 'pending',
      reason: 'power off rack 12 for the PDU swap',
      size: 3,
      root: toHex(scopeTree(power(nodes)).root),
      trustDomain,
      approvals: [],
      approvalsNeeded: 2,
    });
    const table = await run(['batch', 'list']);
    expect(table.status, table.stderr).toBe(0);
    const [header, ...rows] = table.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^id\s+state\s+size\s+approvals\s+closes\s+proposed\s+reason$/);
    expect(rows.find((row) => row.startsWith(batch.id))).toMatch(
      new RegExp(
        `^${batch.id}\\s+pending\\s+3\\s+0 of 2\\s+${batch.notAfter}\\s+\\S+\\s+power off rack 12 for the PDU swap$`,
      ),
    );
    expect((await json(['batch', 'list', '--state', 'approved'])).items).toEqual([]);
    expect((await json(['batch', 'list', '--state', 'pending'])).items.map((b: any) => b.id)).toContain(
      batch.id,
    );
  });

  it('show prints the batch with its verified leaves; --scope-out writes what batch sign reads, never over a file', async () => {
    const shown = await run(['batch', 'show', '--batch', batch.id, '--format', 'compact']);
    expect(shown.status, shown.stderr).toBe(0);
    expect(shown.stderr).toBe(`Verified: the 3 leaves give root ${batch.root}.\n`);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: batch.id, root: batch.root, leaves: power(nodes) });

    const written = await json(['batch', 'show', '--batch', batch.id, '--scope-out', 'rack12.json']);
    expect(written).toEqual({
      out: join(scratch, 'rack12.json'),
      batchId: batch.id,
      root: batch.root,
      size: 3,
    });
    expect(statSync(join(scratch, 'rack12.json')).mode & 0o777).toBe(0o600);
    const scope = JSON.parse(readFileSync(join(scratch, 'rack12.json'), 'utf8'));
    expect(scope).toEqual({
      format: 'better-compute.batch-scope/v1',
      batchId: batch.id,
      trustDomain,
      createdAt: batch.createdAt,
      notAfter: batch.notAfter,
      reason: batch.reason,
      proposedBy: batch.proposedBy,
      leaves: power(nodes),
      root: batch.root,
      size: 3,
    });
    const again = await run(['batch', 'show', '--batch', batch.id, '--scope-out', 'rack12.json']);
    expect(again.status).toBe(1);
    expect(codeOf(again)).toBe('ALREADY_EXISTS');
  });

  it('members lists the held commands in leaf order, awaiting approval', async () => {
    const page = await json(['batch', 'members', '--batch', batch.id]);
    expect(page.items.map((m: any) => [m.index, m.nodeId, m.kind, m.awaitingApproval])).toEqual(
      nodes.map((node, index) => [index, node, 'metal.power', true]),
    );
    const table = await run(['batch', 'members', '--batch', batch.id]);
    expect(table.stdout.split('\n')[0]).toMatch(/^index\s+command\s+node\s+kind\s+state\s+finished\s+error$/);
    expect(table.stdout).toContain('(awaiting approval)');
  });
});

describe('batch approve', () => {
  it('without --yes or --root prints the guide’s summary and stops, exit 1, nothing approved', async () => {
    const batch = await createBatch(power(nodes));
    const result = await run(['batch', 'approve', '--batch', batch.id, '--key', 'a.pem']);
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      [
        `Batch ${batch.id}: power off rack 12 for the PDU swap`,
        `3 command(s) on 3 subject(s): metal.power action=off ×3:`,
        `  metal.power action=off: ${nodes.join(', ')}`,
        `Approvals: 0 of 2; the window closes at ${batch.notAfter}.`,
        `Not approved. Re-run with --yes, or with --root ${batch.root}.`,
        '',
      ].join('\n'),
    );
    expect((await api('commandBatches.get', { batchId: batch.id })).approvals).toEqual([]);
  });

  it('the two-of-three flow: one approval with --key --root, one signed offline from show --scope-out and submitted with --signature', async () => {
    const batch = await createBatch(power(nodes));
    const first = await run([
      'batch',
      'approve',
      '--batch',
      batch.id,
      '--key',
      'a.pem',
      '--root',
      batch.root,
      '--format',
      'compact',
    ]);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr.split('\n').slice(-2)).toEqual([
      `Approved as ${kids.a}: approvals 1 of 2; the batch is pending.`,
      '',
    ]);
    expect(JSON.parse(first.stdout)).toMatchObject({
      id: batch.id,
      state: 'pending',
      approvals: [{ kid: kids.a }],
    });

    // The offline machine: no URL, no token; only the scope file and the key.
    await json(['batch', 'show', '--batch', batch.id, '--scope-out', `offline-${batch.id}.json`]);
    const signed = await run(
      [
        'batch',
        'sign',
        '--key',
        'c.pem',
        '--scope',
        `offline-${batch.id}.json`,
        '--out',
        `approval-${batch.id}.json`,
      ],
      {
        BETTER_COMPUTE_URL: '',
        BETTER_COMPUTE_TOKEN: '',
      },
    );
    expect(signed.status, signed.stderr).toBe(0);

    const second = await run([
      'batch',
      'approve',
      '--batch',
      batch.id,
      '--signature',
      `approval-${batch.id}.json`,
      '--format',
      'compact',
    ]);
    expect(second.status, second.stderr).toBe(0);
    expect(second.stderr).toContain(`Approvals: 1 of 2; the window closes at ${batch.notAfter}.`);
    expect(second.stderr).toContain(`Approved as ${kids.c}: approvals 2 of 2; the batch is approved.`);
    const approved = JSON.parse(second.stdout);
    expect(approved).toMatchObject({ id: batch.id, state: 'approved' });
    expect(approved.approvals.map((a: any) => a.kid)).toEqual([kids.a, kids.c]);
    expect(
      (await json(['batch', 'members', '--batch', batch.id])).items.every((m: any) => !m.awaitingApproval),
    ).toBe(true);

    // Approved batches take no more approvals; the CLI says so before signing.
    const late = await run(['batch', 'approve', '--batch', batch.id, '--key', 'b.pem', '--yes']);
    expect(late.status).toBe(1);
    expect(codeOf(late)).toBe('INVALID_STATE');
    expect(late.stderr).toContain(`batch ${batch.id} is approved, not pending`);
  });

  it('--signature of another batch is SCOPE_MISMATCH, and nothing is submitted', async () => {
    const one = await createBatch(power(nodes.slice(0, 1)));
    const other = await createBatch(power(nodes.slice(1, 2)));
    await json(['batch', 'show', '--batch', one.id, '--scope-out', `mix-${one.id}.json`]);
    const signed = await run([
      'batch',
      'sign',
      '--key',
      'b.pem',
      '--scope',
      `mix-${one.id}.json`,
      '--out',
      `mix-approval-${one.id}.json`,
    ]);
    expect(signed.status, signed.stderr).toBe(0);
    const wrong = await run([
      'batch',
      'approve',
      '--batch',
      other.id,
      '--signature',
      `mix-approval-${one.id}.json`,
    ]);
    expect(wrong.status).toBe(1);
    expect(codeOf(wrong)).toBe('SCOPE_MISMATCH');
    expect(wrong.stderr).toContain(`the approval signs batch ${one.id}, not ${other.id}`);
    expect((await api('commandBatches.get', { batchId: other.id })).approvals).toEqual([]);
  });

  it('--expect with a difference is SCOPE_UNEXPECTED naming it; an exact list approves', async () => {
    const batch = await createBatch(power(nodes));
    writeFileSync(
      join(scratch, 'expect-wrong.txt'),
      `${nodes[0]}\n${nodes[1]}\nnode_01k5w000000000000000000099\n`,
    );
    const wrong = await run([
      'batch',
      'approve',
      '--batch',
      batch.id,
      '--key',
      'a.pem',
      '--root',
      batch.root,
      '--expect',
      'expect-wrong.txt',
    ]);
    expect(wrong.status).toBe(1);
    expect(codeOf(wrong)).toBe('SCOPE_UNEXPECTED');
    expect(wrong.stderr).toContain(
      `not expected: ${nodes[2]}; expected but absent: node_01k5w000000000000000000099`,
    );
    writeFileSync(
      join(scratch, 'expect-right.json'),
      JSON.stringify(nodes.map((subject) => ({ subject, kind: 'metal.power' }))),
    );
    const right = await run([
      'batch',
      'approve',
      '--batch',
      batch.id,
      '--key',
      'a.pem',
      '--root',
      batch.root,
      '--expect',
      'expect-right.json',
    ]);
    expect(right.status, right.stderr).toBe(0);
  });

  it('an unbound leaf is UNBOUND_SCOPE without --allow-unbound, and approved with it', async () => {
    const batch = await createBatch([
      { subject: nodes[0], kind: 'metal.power', payload: null, runWith: { action: 'cycle' } },
    ]);
    const refused = await run(['batch', 'approve', '--batch', batch.id, '--key', 'a.pem', '--yes']);
    expect(refused.status).toBe(1);
    expect(codeOf(refused)).toBe('UNBOUND_SCOPE');
    expect(refused.stderr).toContain(`1 leaf(s) admit any payload of their kind: metal.power on ${nodes[0]}`);
    const allowed = await run([
      'batch',
      'approve',
      '--batch',
      batch.id,
      '--key',
      'a.pem',
      '--yes',
      '--allow-unbound',
    ]);
    expect(allowed.status, allowed.stderr).toBe(0);
    expect(allowed.stderr).toContain(`  metal.power (any payload): ${nodes[0]}`);
  });

  it('a key others can read is INVALID_STATE; a window longer than --max-hours is INVALID_STATE', async () => {
    const batch = await createBatch(power(nodes), 'reboot rack 12', ['--hours', '6']);
    copyFileSync(join(scratch, 'a.pem'), join(scratch, 'loose.pem'));
    chmodSync(join(scratch, 'loose.pem'), 0o644);
    const loose = await run(['batch', 'approve', '--batch', batch.id, '--key', 'loose.pem', '--yes']);
    expect(loose.status).toBe(1);
    expect(codeOf(loose)).toBe('INVALID_STATE');
    expect(loose.stderr).toContain('loose.pem can be read by other users (mode 644)');
    const long = await run([
      'batch',
      'approve',
      '--batch',
      batch.id,
      '--key',
      'a.pem',
      '--yes',
      '--max-hours',
      '2',
    ]);
    expect(long.status).toBe(1);
    expect(codeOf(long)).toBe('INVALID_STATE');
    expect(long.stderr).toContain('longer than --max-hours 2');
    expect((await api('commandBatches.get', { batchId: batch.id })).approvals).toEqual([]);
  });

  it('usage mistakes exit 2 before any call: no --key or --signature, or both', async () => {
    const neither = await run(['batch', 'approve', '--batch', 'batch_01k5w00000000000000000000a']);
    expect(neither.status).toBe(2);
    expect(codeOf(neither)).toBe('INVALID_ARGUMENT');
    const both = await run([
      'batch',
      'approve',
      '--batch',
      'batch_01k5w00000000000000000000a',
      '--key',
      'a.pem',
      '--signature',
      'x.json',
    ]);
    expect(both.status).toBe(2);
    expect((await run(['batch', 'show'])).status).toBe(2);
  });
});

describe('batch create --key and batch cancel', () => {
  it('create --key approves the new batch at once as its creator, once its root is that of the file’s leaves', async () => {
    const created = await run([
      'batch',
      'create',
      '--reason',
      'drain and power off n1',
      '--scope',
      writeJson(power(nodes.slice(0, 1))),
      '--key',
      'b.pem',
      '--format',
      'compact',
    ]);
    expect(created.status, created.stderr).toBe(0);
    const batch = JSON.parse(created.stdout);
    expect(batch).toMatchObject({ state: 'pending', size: 1, approvals: [{ kid: kids.b }] });
    expect(created.stderr).toContain(`Created batch ${batch.id}: 1 command(s); 2 approval(s) needed.`);
    expect(created.stderr).toContain(`Approvals: 0 of 2; the window closes at ${batch.notAfter}.`);
  });

  it('create --key with an unbound leaf is UNBOUND_SCOPE before anything is created', async () => {
    const before = (await json(['batch', 'list', '--limit', '500'])).items.length;
    const leaves = [{ subject: nodes[1], kind: 'metal.power', payload: null, runWith: { action: 'off' } }];
    const refused = await run([
      'batch',
      'create',
      '--reason',
      'anything on n2',
      '--scope',
      writeJson(leaves),
      '--key',
      'b.pem',
    ]);
    expect(refused.status).toBe(1);
    expect(codeOf(refused)).toBe('UNBOUND_SCOPE');
    expect((await json(['batch', 'list', '--limit', '500'])).items.length).toBe(before);
    const bad = await run([
      'batch',
      'create',
      '--reason',
      'x',
      '--scope',
      writeJson([{ subject: nodes[0], kind: 'metal.power', payload: { action: 'melt' } }]),
    ]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('leaf 0: "action" of metal.power must be one of off, reset, cycle');
  });

  it('cancel ends a pending batch without --yes; its commands are cancelled and it can no longer be approved', async () => {
    const batch = await createBatch(power(nodes.slice(2)));
    const cancelled = await json(['batch', 'cancel', '--batch', batch.id]);
    expect(cancelled).toMatchObject({ id: batch.id, state: 'cancelled' });
    expect((await json(['batch', 'members', '--batch', batch.id])).items.map((m: any) => m.state)).toEqual([
      'cancelled',
    ]);
    const late = await run(['batch', 'approve', '--batch', batch.id, '--key', 'a.pem', '--yes']);
    expect(codeOf(late)).toBe('INVALID_STATE');
  });

  it('a batch an agent proposed carries the agent warning line after the reason', async () => {
    const iam = compute.embeddedIam!;
    const person = (await iam.listPrincipals({ tenantId: 'root', kind: 'person' })).items[0]!;
    const agent = await agentWithKey(iam, {
      tenantId: 'root',
      displayName: 'fleet-helper',
      actingFor: person.id,
      role: 'platform-admin',
    });
    const batch = await json(
      [
        'batch',
        'create',
        '--reason',
        'the agent says rack 12 must go dark',
        '--scope',
        writeJson(power(nodes.slice(0, 2))),
      ],
      {
        BETTER_COMPUTE_TOKEN: agent.key,
      },
    );
    expect(batch.createdByAgent).toBe(agent.id);
    const result = await run(['batch', 'approve', '--batch', batch.id, '--key', 'a.pem']);
    expect(result.stderr.split('\n').slice(0, 3)).toEqual([
      `Batch ${batch.id}: the agent says rack 12 must go dark`,
      `Proposed by agent ${agent.id} for ${person.id} (delegation ${batch.delegationId}): the reason is the agent's own text.`,
      `2 command(s) on 2 subject(s): metal.power action=off ×2:`,
    ]);
  });
});

describe('a server that lies about the scope', () => {
  let proxy: Server;
  let proxyUrl = '';
  /** Rewrites the answer (`data`) of the methods named, leaving every other as the real server gave it. */
  let lies: Record<string, (data: any) => any> = {};
  /** When set, the scope pages the real server is asked for hold this many leaves (its cursors are real). */
  let pageLimit: number | undefined;

  beforeAll(async () => {
    proxy = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', async () => {
        const path = request.url ?? '/';
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(request.headers))
          if (typeof value === 'string' && !['host', 'content-length', 'connection'].includes(name))
            headers[name] = value;
        const method = path
          .replace(/^\/api\/compute\//, '')
          .replaceAll('/', '.')
          .split('?')[0];
        let sent = Buffer.concat(chunks);
        if (pageLimit !== undefined && method === 'commandBatches.scope')
          sent = Buffer.from(JSON.stringify({ ...JSON.parse(sent.toString()), limit: pageLimit }));
        const answer = await fetch(`${url}${path}`, {
          method: request.method,
          headers,
          ...(request.method === 'GET' || request.method === 'HEAD' ? {} : { body: sent }),
        });
        let body = Buffer.from(await answer.arrayBuffer());
        const alter = lies[method ?? ''];
        if (alter && answer.ok) {
          const envelope = JSON.parse(body.toString());
          body = Buffer.from(JSON.stringify({ ...envelope, data: alter(envelope.data) }));
        }
        response.writeHead(answer.status, {
          'content-type': answer.headers.get('content-type') ?? 'application/json',
        });
        response.end(body);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => proxy.close(() => resolve())));

  const through = (args: string[]) => run(args, { BETTER_COMPUTE_URL: proxyUrl });

  it('answers truthfully through the proxy when nothing is altered', async () => {
    lies = {};
    const batch = await createBatch(power(nodes));
    const shown = await through(['batch', 'show', '--batch', batch.id]);
    expect(shown.status, shown.stderr).toBe(0);
  });

  it('follows the scope page by page to the end, and refuses a page whose cursor goes back', async () => {
    const batch = await createBatch(power(nodes));
    pageLimit = 1;
    const shown = await through(['batch', 'show', '--batch', batch.id, '--format', 'compact']);
    expect(shown.status, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout).leaves).toEqual(power(nodes));
    // The second page answers the first again, its cursor pointing back: it never ends.
    lies = {
      'commandBatches.scope': (page: any) =>
        page.items[0]?.index === 1
          ? { ...page, items: [{ ...page.items[0], index: 0 }], nextCursor: '1' }
          : page,
    };
    const looping = await through(['batch', 'show', '--batch', batch.id]);
    lies = {};
    pageLimit = undefined;
    expect(looping.status).toBe(1);
    expect(codeOf(looping)).toBe('INVALID_RESPONSE');
    expect(looping.stderr).toContain('repeats or skips leaves');
  });

  it.each([
    ['a page without items', (page: any) => ({ ...page, items: 'none' }), 'is not { items, nextCursor }'],
    [
      'a page that repeats a leaf',
      (page: any) => ({ ...page, items: [page.items[0], page.items[0], page.items[1]] }),
      'repeats or skips leaves',
    ],
    [
      'a page that does not advance',
      (page: any) => ({ ...page, items: page.items.slice(0, 1), nextCursor: '0' }),
      'does not advance',
    ],
    [
      'more leaves than the batch’s size',
      (page: any) => ({ ...page, items: [...page.items, { ...page.items[0], index: page.items.length }] }),
      'more leaves than the batch’s size 3',
    ],
    [
      'a malformed leaf',
      (page: any) => ({
        ...page,
        items: page.items.map((item: any, i: number) => (i === 1 ? { ...item, kind: 'rm -rf' } : item)),
      }),
      'leaf 1 of',
    ],
  ])('%s is INVALID_RESPONSE, and nothing is signed', async (_name, alter, words) => {
    const batch = await createBatch(power(nodes));
    lies = { 'commandBatches.scope': alter };
    const shown = await through(['batch', 'show', '--batch', batch.id]);
    expect(shown.status).toBe(1);
    expect(codeOf(shown)).toBe('INVALID_RESPONSE');
    expect(shown.stderr.replaceAll('’', "'")).toContain(words.replaceAll('’', "'"));
    const approved = await through(['batch', 'approve', '--batch', batch.id, '--key', 'a.pem', '--yes']);
    expect(codeOf(approved)).toBe('INVALID_RESPONSE');
    lies = {};
    expect((await api('commandBatches.get', { batchId: batch.id })).approvals).toEqual([]);
  });

  it.each([
    [
      'a leaf whose payload was changed',
      (page: any) => ({
        ...page,
        items: page.items.map((item: any, i: number) =>
          i === 0 ? { ...item, payload: { action: 'cycle' } } : item,
        ),
      }),
    ],
    ['a scope cut short', (page: any) => ({ ...page, items: page.items.slice(0, 2) })],
  ])('%s is SCOPE_MISMATCH: the leaves do not give the batch’s root', async (_name, alter) => {
    const batch = await createBatch(power(nodes));
    lies = { 'commandBatches.scope': alter };
    for (const args of [
      ['batch', 'show', '--batch', batch.id, '--scope-out', `lie-${batch.id}.json`],
      ['batch', 'approve', '--batch', batch.id, '--key', 'a.pem', '--yes'],
    ]) {
      const result = await through(args);
      expect(result.status).toBe(1);
      expect(codeOf(result)).toBe('SCOPE_MISMATCH');
    }
    lies = {};
    expect(existsSync(join(scratch, `lie-${batch.id}.json`))).toBe(false);
    expect((await api('commandBatches.get', { batchId: batch.id })).approvals).toEqual([]);
  });

  it('a batch changed after review (new leaves and a root they give) is SCOPE_CHANGED for the --root reviewed', async () => {
    const batch = await createBatch(power(nodes));
    const changedRoot = toHex(scopeTree(power(nodes, 'cycle')).root);
    // A compromised server rewrites the batch whole: its root, and leaves that give that root.
    lies = {
      'commandBatches.get': (data: any) => ({ ...data, root: changedRoot }),
      'commandBatches.scope': (page: any) => ({
        ...page,
        root: changedRoot,
        items: page.items.map((item: any) => ({ ...item, payload: { action: 'cycle' } })),
      }),
    };
    const result = await through([
      'batch',
      'approve',
      '--batch',
      batch.id,
      '--key',
      'a.pem',
      '--root',
      batch.root,
    ]);
    lies = {};
    expect(result.status).toBe(1);
    expect(codeOf(result)).toBe('SCOPE_CHANGED');
    expect(result.stderr).toContain(`has root ${changedRoot}, not the --root ${batch.root} you reviewed`);
    expect((await api('commandBatches.get', { batchId: batch.id })).approvals).toEqual([]);
  });
});

describe('BMC power of a bare-metal machine (docs/decisions/metal-power-quorum.md)', () => {
  it('metal power off names the leaf; batch create --scope FILE holds a metal.bmc on the site agent until two approve', async () => {
    const site = await api('sites.create', { name: 'rack-14' });
    const pool = await api('pools.create', { siteId: site.id, name: 'agents', class: 'gpu' });
    const { token } = await api('siteTokens.create', { poolId: pool.id, preApproved: true });
    const post = async (method: string, body: unknown) =>
      (await (
        await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
      ).json()) as { data: any };
    const agent = (
      await post('nodes.join', {
        joinToken: token,
        hostname: 'r14-agent',
        inventory: { cpuCores: 2, memoryGiB: 4, gpus: [] },
        labels: {},
      })
    ).data;
    await post('nodes.heartbeat', { nodeCredential: agent.nodeCredential });
    const machine = await api('metal.enroll', {
      siteId: site.id,
      name: 'r14-u02',
      bmcDriver: 'ipmi',
      bmcAddress: '10.0.14.2',
      bmcUser: 'admin',
      bmcPassword: 'bmc-r14-u02-pw',
      productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e40',
    });
    // Stands in for a manage whose BMC check succeeded (metal.test.ts runs that workflow).
    await sql`update compute.metal_machines set provision_state = 'manageable' where id = ${machine.id}`.execute(
      database.db as Kysely<any>,
    );

    const refused = await run(['metal', 'power', 'off', machine.id]);
    expect(codeOf(refused)).toBe('INVALID_STATE');
    const leaves = JSON.parse(/FILE holding (\[.*\]); it runs/.exec(refused.stderr)![1]!);
    expect(leaves).toEqual([
      {
        subject: machine.id,
        kind: 'metal.bmc-power',
        payload: {
          action: 'off',
          runner: agent.nodeId,
          bmc: expect.stringMatching(/^ipmi:\/\/10\.0\.14\.2/),
        },
      },
    ]);

    const batch = await createBatch(leaves, 'power off r14-u02 for the PSU swap');
    expect(batch).toMatchObject({ state: 'pending', size: 1, approvalsNeeded: 2 });
    const held = await json(['batch', 'members', '--batch', batch.id]);
    expect(held.items.map((m: any) => [m.nodeId, m.kind, m.awaitingApproval])).toEqual([
      [agent.nodeId, 'metal.bmc', true],
    ]);
    for (const key of ['a.pem', 'b.pem']) {
      const approved = await run(['batch', 'approve', '--batch', batch.id, '--key', key, '--yes']);
      expect(approved.status, approved.stderr).toBe(0);
    }
    const released = await json(['batch', 'members', '--batch', batch.id]);
    expect(released.items.map((m: any) => [m.nodeId, m.kind, m.awaitingApproval])).toEqual([
      [agent.nodeId, 'metal.bmc', false],
    ]);
  });
});

describe('help and the manifest', () => {
  it('help --json lists every batch command with its flags; completion offers them', async () => {
    const manifest = JSON.parse((await run(['help', '--json'])).stdout);
    const batch = manifest.commands.filter((c: any) => c.name.startsWith('batch '));
    expect(batch.map((c: any) => c.name)).toEqual([
      'batch list',
      'batch show',
      'batch approve',
      'batch create',
      'batch members',
      'batch cancel',
      'batch keygen',
      'batch sign',
      'batch sign-approvers',
    ]);
    const approve = batch.find((c: any) => c.name === 'batch approve');
    expect(approve.flags.filter((f: any) => !f.shared).map((f: any) => f.name)).toEqual([
      'batch',
      'key',
      'signature',
      'yes',
      'root',
      'expect',
      'allow-unbound',
      'max-hours',
    ]);
    expect(approve.calls).toEqual(['commandBatches.get', 'commandBatches.scope', 'commandBatches.approve']);
    const help = await run(['help', 'batch', 'approve']);
    expect(help.stdout).toContain(
      'better-compute batch approve --tenant acme --batch batch_01k5w… --key ~/.better-compute/approver.pem',
    );
    expect((await run(['completion', 'bash'])).stdout).toMatch(/approve/);
  });
});
