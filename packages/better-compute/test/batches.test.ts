/**
 * The destructive-batch quorum's server side through the real routes, on a real database, with real
 * P-256 approver keys in the deployment's PKI bundle: a batch's members are held (the gateway's
 * delivery query never returns them) until a threshold of the approver set signed exactly what the
 * server holds; approvals for another trust domain, another root, a closed window, a key outside
 * the set and a replay are each refused and change nothing; cancel and expiry end the members; a
 * node deletion is carried out at approval under nodes.delete's rules; another tenant finds nothing.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Identity } from '@better-compute/core';
import {
  type ApproverChainEntry,
  type ApproverSet,
  type BatchStatement,
  encodePublicKey,
  fromHex,
  generateApproverKey,
  type ScopeLeaf,
  scopeTree,
  signApproval,
  signApproverSet,
  toHex,
} from '@better-compute/core/quorum';
import { createTestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import type { DatabaseKind } from '@better-compute/db';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute } from '../src/index.js';
import type { ComputeTables } from '../src/db/tables.js';
import { openCommands } from '../src/modules/commands/index.js';
import { createPkiBundle } from '../src/pki/create.js';
import {
  addNode,
  ApiFailure,
  eventTypesOf,
  type FleetDeployment,
  l40sx4,
  seedPool,
} from './fleet-support.js';
import { call, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const OPS = 't-root-ops';
const ACME = 't-acme-alice';
/** An agent acting for usr_ops (the bridge below knows it). */
const AGENT = 'agent-root-bot';
const HOUR = 3600;

/** The test bridge, and one agent acting for a person. */
class AgentBridge extends TestBridge {
  override async authenticate(credential: string): Promise<Identity | null> {
    if (credential !== AGENT) return super.authenticate(credential);
    return {
      principalId: 'agt_bot',
      principalKind: 'agent',
      tenantId: 'root',
      credentialKind: 'api-key',
      credentialId: 'key_botkey',
      mfa: false,
      expiresAt: null,
      actingFor: 'usr_ops',
      delegation: { id: 'dlg_bot', confirm: [], spendLimitGpuHours: null },
    };
  }
}

interface Approver {
  kid: string;
  privateKey: KeyObject;
  publicKey: string;
}

function approver(): Approver {
  const files = generateApproverKey();
  const privateKey = createPrivateKey(files.privatePem);
  return { kid: files.kid, privateKey, publicKey: encodePublicKey(createPublicKey(privateKey)) };
}

const setOf = (trustDomain: string, epoch: number, threshold: number, keys: Approver[]): ApproverSet => ({
  trustDomain,
  epoch,
  threshold,
  approvers: keys.map(({ kid, publicKey }) => ({ kid, publicKey })).sort((a, b) => (a.kid < b.kid ? -1 : 1)),
});

/** Writes the bundle's approver chain, as `pki approvers` does. */
function writeChain(path: string, chain: ApproverChainEntry[]) {
  const document = JSON.parse(readFileSync(path, 'utf8'));
  document.approvers = chain;
  writeFileSync(path, JSON.stringify(document, null, 2), { mode: 0o600 });
}

/** The statement the batch's view describes, as an approver signs it after reviewing it. */
const statementOf = (batch: {
  id: string;
  trustDomain: string;
  root: string;
  size: number;
  notAfter: string;
}): BatchStatement => ({
  batchId: batch.id,
  trustDomain: batch.trustDomain,
  root: fromHex(batch.root, 32)!,
  size: batch.size,
  notAfter: Date.parse(batch.notAfter),
});

const approve = (
  key: Approver,
  batch: Parameters<typeof statementOf>[0],
  change: Partial<BatchStatement> = {},
) => ({
  batchId: batch.id,
  kid: key.kid,
  signature: signApproval(key.privateKey, { ...statementOf(batch), ...change }).signature,
});

async function deploymentWithQuorum(kind: DatabaseKind, pki: string): Promise<FleetDeployment> {
  const database = await createTestDatabase(kind, 10);
  let nowMs = Date.parse('2026-01-01T00:00:00.000Z');
  const clock = { now: () => new Date(nowMs), advance: (seconds: number) => void (nowMs += seconds * 1000) };
  const compute = await betterCompute(
    {
      database,
      iam: new AgentBridge(),
      trustedOrigins: [],
      rateLimit: false,
      pki,
      secret: 'the batches test secret',
    },
    {
      log: ({ level, message, error }) => level === 'error' && console.error(message, error),
      now: clock.now,
    },
  );
  await compute.migrate();
  const api = async (method: string, body: Record<string, unknown>, token: string = OPS) => {
    const { body: answer } = await call(compute, method, body, { token });
    if (answer.error) throw new ApiFailure(answer.error.code, answer.error.message, answer.error.details);
    return answer.data as any;
  };
  return {
    compute,
    database,
    db: database.db as Kysely<ComputeTables>,
    clock,
    statements: [],
    api,
    async fails(method, body, token = OPS) {
      const { body: answer } = await call(compute, method, body, { token });
      if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
      return answer.error;
    },
    async close() {
      await compute.close();
      await database.close();
    },
  };
}

describe.each(kinds)('destructive batches on %s', (kind) => {
  const dir = mkdtempSync(join(tmpdir(), 'bc-batches-'));
  const path = join(dir, 'pki.json');
  const [a, b, c] = [approver(), approver(), approver()];
  const outsider = approver();
  let trustDomain = '';
  let chain: ApproverChainEntry[] = [];
  let d: FleetDeployment;
  let nodes: string[] = [];

  beforeAll(async () => {
    const bundle = await createPkiBundle({
      path,
      secret: 'the batches test secret',
      trustDomain: 'compute.example.com',
    });
    trustDomain = bundle.trustDomain;
    chain = [{ set: setOf(trustDomain, 1, 2, [a!, b!, c!]), signatures: [] }];
    writeChain(path, chain);
    d = await deploymentWithQuorum(kind, path);
    const { poolId } = await seedPool(d, `batches-${kind}`);
    for (const name of ['n1', 'n2', 'n3', 'n4', 'n5'])
      nodes.push((await addNode(d, poolId, `${kind}-${name}`, l40sx4())).nodeId);
  }, 120_000);
  afterAll(async () => {
    await d?.close();
  });

  const power = (nodeId: string, action = 'off'): ScopeLeaf => ({
    subject: nodeId,
    kind: 'metal.power',
    payload: { action },
  });
  const create = (leaves: unknown[], more: Record<string, unknown> = {}, token = OPS) =>
    d.api(
      'commandBatches.create',
      { reason: 'power off rack 12 after the firmware recall', leaves, ...more },
      token,
    );
  const members = async (batchId: string) => (await d.api('commandBatches.members', { batchId })).items;
  const delivered = async (batchId: string) =>
    (await openCommands(d.db, nodes)).filter((row) => row.batch_id === batchId);

  it('creates a pending batch whose members are held, and releases them only at the threshold', async () => {
    const leaves = [power(nodes[0]!), power(nodes[1]!), power(nodes[2]!, 'cycle')];
    const batch = await create(leaves);
    expect(batch).toMatchObject({
      state: 'pending',
      tenantId: 'root',
      size: 3,
      root: toHex(scopeTree(leaves).root),
      trustDomain,
      epoch: 1,
      approvalsNeeded: 2,
      approvals: [],
      createdBy: 'usr_ops',
      createdByAgent: null,
      delegationId: null,
      proposedBy: 'usr_ops',
      kinds: [{ kind: 'metal.power', count: 3 }],
      createdAt: '2026-01-01T00:00:00.000Z',
      notAfter: '2026-01-02T00:00:00.000Z',
      approvedAt: null,
    });
    expect(batch.id).toMatch(/^batch_/);
    const held = await members(batch.id);
    expect(held.map((m: any) => [m.index, m.nodeId, m.payload, m.state, m.awaitingApproval])).toEqual([
      [0, nodes[0], { action: 'off' }, 'queued', true],
      [1, nodes[1], { action: 'off' }, 'queued', true],
      [2, nodes[2], { action: 'cycle' }, 'queued', true],
    ]);
    expect(await delivered(batch.id)).toEqual([]);
    expect(await eventTypesOf(d, batch.id)).toEqual(['batch.created']);

    const once = await d.api('commandBatches.approve', approve(a!, batch));
    expect(once.state).toBe('pending');
    expect(once.approvals).toEqual([{ kid: a!.kid, approver: 'usr_ops', at: '2026-01-01T00:00:00.000Z' }]);
    expect(await delivered(batch.id)).toEqual([]);
    expect((await members(batch.id)).every((m: any) => m.awaitingApproval)).toBe(true);

    const twice = await d.api('commandBatches.approve', approve(b!, batch));
    expect(twice).toMatchObject({ state: 'approved', approvedAt: '2026-01-01T00:00:00.000Z' });
    expect(twice.approvals.map((x: any) => x.kid)).toEqual([a!.kid, b!.kid]);
    const released = await members(batch.id);
    expect(released.map((m: any) => [m.state, m.awaitingApproval])).toEqual([
      ['queued', false],
      ['queued', false],
      ['queued', false],
    ]);
    const rows = await delivered(batch.id);
    expect(rows.map((row) => [row.node_id, row.kind, row.batch_index, row.held])).toEqual([
      [nodes[0], 'metal.power', 0, false],
      [nodes[1], 'metal.power', 1, false],
      [nodes[2], 'metal.power', 2, false],
    ]);
    expect(new Date(rows[0]!.expires_at).toISOString()).toBe(batch.notAfter);
    expect(await eventTypesOf(d, batch.id)).toEqual([
      'batch.created',
      'batch.approval_added',
      'batch.approval_added',
      'batch.approved',
    ]);
    // Approved is final: a third approver finds nothing to approve.
    const late = await d.fails('commandBatches.approve', approve(c!, batch));
    expect(late.code).toBe('INVALID_STATE');
    expect(late.message).toContain('is approved');
  });

  it('pages the scope by index, and the pages give back the batch’s root', async () => {
    const leaves = [
      power(nodes[0]!),
      power(nodes[1]!, 'reset'),
      power(nodes[2]!),
      power(nodes[3]!, 'cycle'),
      power(nodes[4]!),
    ];
    const batch = await create(leaves);
    const seen: ScopeLeaf[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await d.api('commandBatches.scope', {
        batchId: batch.id,
        limit: 2,
        ...(cursor ? { cursor } : {}),
      });
      expect(page).toMatchObject({ batchId: batch.id, root: batch.root, size: 5 });
      expect(page.items.map((item: any) => item.index)).toEqual(
        seen.length === 4 ? [4] : [seen.length, seen.length + 1],
      );
      seen.push(...page.items.map(({ subject, kind, payload }: any) => ({ subject, kind, payload })));
      cursor = page.nextCursor ?? undefined;
      pages += 1;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(leaves);
    expect(toHex(scopeTree(seen).root)).toBe(batch.root);
    const past = await d.fails('commandBatches.scope', { batchId: batch.id, cursor: '5' });
    expect(past.code).toBe('INVALID_ARGUMENT');
    expect((await d.fails('commandBatches.scope', { batchId: batch.id, cursor: '-1' })).code).toBe(
      'INVALID_ARGUMENT',
    );
  });

  it('refuses an approval for another trust domain, another root, by a key outside the set and a replay, changing nothing', async () => {
    const batch = await create([power(nodes[0]!), power(nodes[1]!)]);
    await d.api('commandBatches.approve', approve(a!, batch));
    const before = await d.api('commandBatches.get', { batchId: batch.id });

    const otherDomain = await d.fails(
      'commandBatches.approve',
      approve(b!, batch, { trustDomain: 'other.example.com' }),
    );
    expect(otherDomain.code).toBe('SCOPE_MISMATCH');
    expect(otherDomain.message).toContain(batch.root);
    const otherRoot = scopeTree([power(nodes[0]!), power(nodes[1]!), power(nodes[2]!)]);
    const changed = await d.fails(
      'commandBatches.approve',
      approve(b!, batch, { root: otherRoot.root, size: otherRoot.size }),
    );
    expect(changed.code).toBe('SCOPE_MISMATCH');
    const longer = await d.fails(
      'commandBatches.approve',
      approve(b!, batch, { notAfter: Date.parse(batch.notAfter) + 1000 }),
    );
    expect(longer.code).toBe('SCOPE_MISMATCH');
    const garbage = await d.fails('commandBatches.approve', {
      batchId: batch.id,
      kid: b!.kid,
      signature: 'A'.repeat(86),
    });
    expect(garbage.code).toBe('SCOPE_MISMATCH');
    const outside = await d.fails('commandBatches.approve', approve(outsider, batch));
    expect(outside).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'kid' } });
    expect(outside.message).toContain('not in the approver set');
    const replay = await d.fails('commandBatches.approve', approve(a!, batch));
    expect(replay.code).toBe('ALREADY_EXISTS');
    const nul = await d.fails('commandBatches.approve', {
      batchId: batch.id,
      kid: `${a!.kid}\u0000`,
      signature: 'x',
    });
    expect(nul.code).toBe('INVALID_ARGUMENT');

    expect(await d.api('commandBatches.get', { batchId: batch.id })).toEqual(before);
    expect((await members(batch.id)).every((m: any) => m.awaitingApproval && m.state === 'queued')).toBe(
      true,
    );
    expect(await delivered(batch.id)).toEqual([]);
    expect(await eventTypesOf(d, batch.id)).toEqual(['batch.created', 'batch.approval_added']);
  });

  it('refuses approvals after the window closes; the batch reads expired and its members cancelled', async () => {
    const batch = await create([power(nodes[0]!)], { hours: 1 });
    await d.api('commandBatches.approve', approve(a!, batch));
    d.clock.advance(HOUR);
    const late = await d.fails('commandBatches.approve', approve(b!, batch));
    expect(late.code).toBe('INVALID_STATE');
    expect(late.message).toContain('window closed at 2026-01-01T01:00:00.000Z');
    expect((await d.fails('commandBatches.cancel', { batchId: batch.id })).code).toBe('INVALID_STATE');
    const read = await d.api('commandBatches.get', { batchId: batch.id });
    expect(read).toMatchObject({ state: 'expired', endedAt: batch.notAfter, approvedAt: null });
    expect(await members(batch.id)).toMatchObject([
      { state: 'cancelled', awaitingApproval: false, error: 'the batch expired before it was approved' },
    ]);
    expect(await delivered(batch.id)).toEqual([]);
    // Written once, whoever notices first.
    await d.api('commandBatches.list', { state: 'expired' });
    await d.compute.runDueJobs(['batch.expire']);
    expect(await eventTypesOf(d, batch.id)).toEqual([
      'batch.created',
      'batch.approval_added',
      'batch.expired',
    ]);
    const expired = await d.api('commandBatches.list', { state: 'expired' });
    expect(expired.items.map((item: any) => item.id)).toContain(batch.id);
  });

  it('expires a batch nobody reads, by the job queued for its window’s end', async () => {
    const batch = await create([power(nodes[1]!)], { hours: 2 });
    await d.compute.runDueJobs(['batch.expire']);
    d.clock.advance(HOUR);
    await d.compute.runDueJobs(['batch.expire']);
    const stillPending = await d.db
      .selectFrom('compute.command_batches' as any)
      .select('state')
      .where('id', '=', batch.id)
      .executeTakeFirstOrThrow();
    expect(stillPending).toEqual({ state: 'pending' });
    d.clock.advance(HOUR);
    await d.compute.runDueJobs(['batch.expire']);
    const stored = await d.db
      .selectFrom('compute.command_batches' as any)
      .select(['state', 'ended_at'])
      .where('id', '=', batch.id)
      .executeTakeFirstOrThrow();
    expect(stored.state).toBe('expired');
    expect(await eventTypesOf(d, batch.id)).toEqual(['batch.created', 'batch.expired']);
  });

  it('cancels a pending batch: its members are cancelled and never delivered', async () => {
    const batch = await create([power(nodes[2]!), power(nodes[3]!)]);
    await d.api('commandBatches.approve', approve(c!, batch));
    const cancelled = await d.api('commandBatches.cancel', { batchId: batch.id });
    expect(cancelled).toMatchObject({ state: 'cancelled', endedAt: d.clock.now().toISOString() });
    expect(await members(batch.id)).toMatchObject([
      { state: 'cancelled', awaitingApproval: false, error: 'its batch was cancelled' },
      { state: 'cancelled', awaitingApproval: false, error: 'its batch was cancelled' },
    ]);
    expect((await d.fails('commandBatches.cancel', { batchId: batch.id })).code).toBe('INVALID_STATE');
    expect((await d.fails('commandBatches.approve', approve(a!, batch))).code).toBe('INVALID_STATE');
    expect(await delivered(batch.id)).toEqual([]);
    const listed = await d.api('commandBatches.list', { state: 'cancelled' });
    expect(listed.items[0].id).toBe(batch.id);
    expect(await eventTypesOf(d, batch.id)).toEqual([
      'batch.created',
      'batch.approval_added',
      'batch.cancelled',
    ]);
  });

  it('carries out a node deletion when the batch is approved, under nodes.delete’s rules', async () => {
    const [ready, cordoned] = [nodes[3]!, nodes[4]!];
    await d.api('nodes.cordon', { nodeId: cordoned });
    const batch = await create([
      { subject: cordoned, kind: 'node.delete', payload: {} },
      { subject: ready, kind: 'node.delete', payload: {} },
      power(nodes[0]!, 'reset'),
    ]);
    expect(batch.kinds).toEqual([
      { kind: 'metal.power', count: 1 },
      { kind: 'node.delete', count: 2 },
    ]);
    await d.api('commandBatches.approve', approve(a!, batch));
    expect((await d.api('nodes.get', { nodeId: cordoned })).state).toBe('cordoned');
    const approved = await d.api('commandBatches.approve', approve(c!, batch));
    expect(approved.state).toBe('approved');
    expect((await d.fails('nodes.get', { nodeId: cordoned })).code).toBe('NOT_FOUND');
    expect((await d.api('nodes.get', { nodeId: ready })).state).toBe('ready');
    const [deleted, refused, powered] = await members(batch.id);
    expect(deleted).toMatchObject({
      kind: 'node.delete',
      state: 'succeeded',
      awaitingApproval: false,
      error: null,
    });
    expect(refused).toMatchObject({ kind: 'node.delete', state: 'failed', awaitingApproval: false });
    expect(refused.error).toContain(
      `INVALID_STATE: node ${ready} is ready; only a retired or cordoned node is deleted`,
    );
    expect(powered).toMatchObject({ kind: 'metal.power', state: 'queued', awaitingApproval: false });
    // Only the daemon's command is ever delivered.
    expect((await delivered(batch.id)).map((row) => row.kind)).toEqual(['metal.power']);
    expect(await eventTypesOf(d, cordoned)).toContain('node.deleted');
    nodes = nodes.filter((id) => id !== cordoned);
  });

  it('refuses nodes.delete outside a batch while the quorum is on, and deletes once it is off', async () => {
    const node = nodes.at(-1)!;
    await d.api('nodes.cordon', { nodeId: node });
    const refused = await d.fails('nodes.delete', { nodeId: node });
    expect(refused.code).toBe('INVALID_STATE');
    expect(refused.message).toContain('only through an approved batch');
    expect(refused.hint).toContain('better-compute batch create');
    expect((await d.api('nodes.get', { nodeId: node })).state).toBe('cordoned');
    writeChain(path, []);
    try {
      expect(await d.api('nodes.delete', { nodeId: node })).toEqual({ id: node, deleted: true });
    } finally {
      writeChain(path, chain);
    }
    nodes = nodes.filter((id) => id !== node);
  });

  it('answers NOT_FOUND to another tenant for every batch id and for a node it does not hold', async () => {
    const batch = await create([power(nodes[0]!)]);
    for (const method of ['get', 'scope', 'members', 'cancel']) {
      const refused = await d.fails(`commandBatches.${method}`, { batchId: batch.id }, ACME);
      expect(refused.code, method).toBe('NOT_FOUND');
      expect(refused.message).toBe(`batch ${batch.id} does not exist`);
    }
    expect((await d.fails('commandBatches.approve', approve(a!, batch), ACME)).code).toBe('NOT_FOUND');
    expect((await d.api('commandBatches.list', {}, ACME)).items).toEqual([]);
    const theirs = await d.fails('commandBatches.create', { reason: 'x', leaves: [power(nodes[0]!)] }, ACME);
    const nobody = `node_01k5w${'0'.repeat(21)}`;
    const absent = await d.fails('commandBatches.create', { reason: 'x', leaves: [power(nobody)] }, ACME);
    expect(theirs).toMatchObject({ code: 'NOT_FOUND', message: `node ${nodes[0]} does not exist` });
    expect(absent).toMatchObject({ code: 'NOT_FOUND', message: `node ${nobody} does not exist` });
    // Nothing of the refused batches stays behind.
    expect((await d.api('commandBatches.list', {}, ACME)).items).toEqual([]);
    expect((await d.api('commandBatches.get', { batchId: batch.id })).approvals).toEqual([]);
  });

  it('checks each leaf as its kind’s message and refuses what nothing carries out', async () => {
    const bad = async (leaves: unknown[], more: Record<string, unknown> = {}) => {
      const failure = await d.fails('commandBatches.create', { reason: 'leaf checks', leaves, ...more });
      return { code: failure.code, message: failure.message };
    };
    expect(
      await bad([
        power(nodes[0]!),
        { subject: nodes[1], kind: 'metal.power', payload: { action: 'explode' } },
      ]),
    ).toEqual({
      code: 'INVALID_ARGUMENT',
      message: 'leaf 1: "action" of metal.power must be one of off, reset, cycle',
    });
    expect((await bad([{ subject: nodes[0], kind: 'exec.script', payload: {} }])).message).toContain(
      'leaf 0:',
    );
    expect(
      (await bad([{ subject: 'pool_x', kind: 'metal.power', payload: { action: 'off' } }])).message,
    ).toContain('leaf 0:');
    expect(await bad([{ subject: nodes[0], kind: 'metal.deploy', payload: { image: 'debian-12' } }])).toEqual(
      {
        code: 'UNSUPPORTED',
        message: 'leaf 0: nothing in this deployment carries out metal.deploy yet, so a batch cannot hold it',
      },
    );
    expect((await bad([{ subject: nodes[0], kind: 'metal.power', payload: null }])).message).toContain(
      'needs runWith',
    );
    expect(
      (
        await bad([
          { subject: nodes[0], kind: 'metal.power', payload: { action: 'off' }, runWith: { action: 'off' } },
        ])
      ).message,
    ).toContain('runWith is for an unbound leaf only');
    expect(
      (await bad([{ subject: nodes[0], kind: 'metal.power', payload: null, runWith: { action: 'melt' } }]))
        .message,
    ).toContain('leaf 0: runWith:');
    expect((await bad([power(nodes[0]!)], { reason: 'two\nlines' })).code).toBe('INVALID_ARGUMENT');
    expect((await bad([power(nodes[0]!)], { reason: 'nul\u0000byte' })).code).toBe('INVALID_ARGUMENT');
    expect((await bad([power(nodes[0]!)], { reason: 'x'.repeat(501) })).code).toBe('INVALID_ARGUMENT');
    expect((await bad([power(nodes[0]!)], { hours: 73 })).code).toBe('INVALID_ARGUMENT');
    expect((await bad([])).code).toBe('INVALID_ARGUMENT');
    expect((await bad(Array.from({ length: 501 }, () => power(nodes[0]!)))).code).toBe('INVALID_ARGUMENT');

    // An unbound leaf: the scope admits any power action, the command runs with runWith.
    const unbound = await create([
      { subject: nodes[0], kind: 'metal.power', payload: null, runWith: { action: 'cycle' } },
    ]);
    expect(unbound.root).toBe(
      toHex(scopeTree([{ subject: nodes[0]!, kind: 'metal.power', payload: null }]).root),
    );
    expect((await d.api('commandBatches.scope', { batchId: unbound.id })).items[0].payload).toBeNull();
    expect((await members(unbound.id))[0].payload).toEqual({ action: 'cycle' });

    // A batch at the cap: 500 leaves, one member each, the root over all of them.
    const many = Array.from({ length: 500 }, (_, i) =>
      power(nodes[i % nodes.length]!, ['off', 'reset', 'cycle'][i % 3]),
    );
    const full = await create(many);
    expect(full.size).toBe(500);
    expect(full.root).toBe(toHex(scopeTree(many).root));
    const page = await d.api('commandBatches.members', { batchId: full.id, limit: 500 });
    expect(page.items.map((m: any) => m.index)).toEqual(many.map((_, i) => i));
    expect(page.nextCursor).toBeNull();
    const second = await d.api('commandBatches.members', {
      batchId: full.id,
      limit: 200,
      cursor: page.items[199].commandId,
    });
    expect(second.items[0].index).toBe(200);

    // A node's command list pages by its own commands: a cursor naming another node's command
    // names nothing this list can continue from.
    const first = await d.api('commands.list', { nodeId: nodes[0], limit: 2 });
    expect(first.items).toHaveLength(2);
    const next = await d.api('commands.list', { nodeId: nodes[0], limit: 2, cursor: first.nextCursor });
    expect(next.items[0].id).not.toBe(first.items[1].id);
    const other = await d.api('commands.list', { nodeId: nodes[1], limit: 1 });
    const foreign = await d.fails('commands.list', { nodeId: nodes[0], cursor: other.items[0].id });
    expect(foreign).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'cursor' } });
  });

  it('says who proposed it: the agent line for an agent acting for a person', async () => {
    const batch = await create([power(nodes[0]!)], { reason: 'the agent’s own words' }, AGENT);
    expect(batch).toMatchObject({
      createdBy: 'usr_ops',
      createdByAgent: 'agt_bot',
      delegationId: 'dlg_bot',
      proposedBy:
        "Proposed by agent agt_bot for usr_ops (delegation dlg_bot): the reason is the agent's own text.",
    });
  });

  it('counts only keys of the current set after the approver set changed epoch', async () => {
    const batch = await create([power(nodes[1]!)]);
    await d.api('commandBatches.approve', approve(c!, batch));
    const next = setOf(trustDomain, 2, 2, [a!, outsider]);
    writeChain(path, [
      ...chain,
      {
        set: next,
        signatures: [
          signApproverSet(a!.privateKey, a!.kid, next),
          signApproverSet(b!.privateKey, b!.kid, next),
        ],
      },
    ]);
    try {
      // c's approval was made under epoch 1 and c is not in epoch 2's set: it no longer counts.
      const one = await d.api('commandBatches.approve', approve(a!, batch));
      expect(one.state).toBe('pending');
      expect((await d.fails('commandBatches.approve', approve(b!, batch))).code).toBe('INVALID_ARGUMENT');
      const two = await d.api('commandBatches.approve', approve(outsider, batch));
      expect(two.state).toBe('approved');
    } finally {
      writeChain(path, chain);
    }
  });

  it('refuses a change of approvers signed by too few of the current set', async () => {
    const next = setOf(trustDomain, 2, 1, [outsider]);
    writeChain(path, [...chain, { set: next, signatures: [signApproverSet(a!.privateKey, a!.kid, next)] }]);
    try {
      const refused = await d.fails('commandBatches.create', { reason: 'x', leaves: [power(nodes[0]!)] });
      // The bundle's reader refuses the chain (its path stays in the server's log), and so does the quorum.
      expect(refused.code).toBe('INVALID_CONFIG');
      expect(refused.hint).toContain('better-compute pki approvers');
    } finally {
      writeChain(path, chain);
    }
  });

  it('refuses to create a batch while the quorum is off', async () => {
    writeChain(path, []);
    try {
      const off = await d.fails('commandBatches.create', { reason: 'x', leaves: [power(nodes[0]!)] });
      expect(off.code).toBe('INVALID_STATE');
      expect(off.hint).toContain('better-compute pki approvers');
    } finally {
      writeChain(path, chain);
    }
    expect((await create([power(nodes[0]!)])).state).toBe('pending');
  });
});
