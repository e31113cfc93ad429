/**
 * createBatchesView against a real deployment with the destructive-batch quorum on (a PKI bundle
 * whose approver chain holds a two-of-two set): the pending list and its filters, Details paging
 * the scope 5,000 at a time up to the cap with a warning when cut short, the scope grouped by kind,
 * members "awaiting approval", an approval read back, Cancel; and the row's words, the countdown
 * and the approve command, which take a batch as the API answers it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPrivateKey } from 'node:crypto';
import { createComputeClient, type ComputeClient } from '@better-compute/client';
import { fromHex, generateApproverKey, signApproval } from '@better-compute/core/quorum';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, createPkiBundle, serve } from 'better-compute';
import {
  approveCommand,
  BATCH_SCOPE_CAP,
  BATCH_SCOPE_PAGE,
  countdownText,
  createBatchesView,
  describeBatch,
  groupScope,
  secondsLeft,
  type Batch,
} from '../src/index.js';

const TRUST_DOMAIN = 'kit.test';
const SECRET = 'console-kit-batches-secret-0123456789abcdef';
const approvers = [generateApproverKey(), generateApproverKey()];

let database: TestDatabase;
let dir: string;
let stopServer: () => Promise<void>;
let url: string;
let token: string;
let client: ComputeClient;
let nodes: string[];
/** The `limit` of every commandBatches.scope call the recording client sent. */
const scopeLimits: number[] = [];
let recording: ComputeClient;

beforeAll(async () => {
  database = await createTestDatabase('postgres');
  dir = mkdtempSync(join(tmpdir(), 'kit-batches-'));
  const pki = join(dir, 'pki.json');
  await createPkiBundle({ path: pki, secret: SECRET, trustDomain: TRUST_DOMAIN });
  // The quorum is on: a first approver set of two keys, both needed.
  const document = JSON.parse(readFileSync(pki, 'utf8')) as Record<string, unknown>;
  document.approvers = [
    {
      set: {
        trustDomain: TRUST_DOMAIN,
        epoch: 1,
        threshold: 2,
        approvers: approvers.map((key) => ({ kid: key.kid, publicKey: key.publicPem })),
      },
      signatures: [],
    },
  ];
  writeFileSync(pki, JSON.stringify(document), { mode: 0o600 });

  const compute = await betterCompute({ database, secret: SECRET, pki }, { log: () => {} });
  await compute.migrate();
  const stopper = new AbortController();
  let announce!: (url: string) => void;
  const listening = new Promise<string>((resolve) => (announce = resolve));
  const email = 'root@kit.test';
  const password = 'kit-password-123456';
  const running = serve({
    compute,
    port: 0,
    roles: ['api'],
    signal: stopper.signal,
    log: () => {},
    env: { BETTER_COMPUTE_ADMIN_EMAIL: email, BETTER_COMPUTE_ADMIN_PASSWORD: password },
    onListening: announce,
  });
  url = await Promise.race([listening, running.then(() => Promise.reject(new Error('serve stopped')))]);
  stopServer = async () => {
    stopper.abort();
    await running;
  };
  const signIn = await fetch(`${url}/api/iam/sessions/signIn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tenantId: 'root', email, password }),
  });
  token = ((await signIn.json()) as { data: { token: string } }).data.token;
  client = createComputeClient({ baseURL: url, token });
  recording = createComputeClient({
    baseURL: url,
    token,
    fetch: async (request) => {
      if (new URL(request.url).pathname.endsWith('/commandBatches/scope'))
        scopeLimits.push(((await request.clone().json()) as { limit: number }).limit);
      return fetch(request);
    },
  });

  // Two real nodes of the root tenant, joined with a pre-approved token.
  const site = await client.sites.create({ name: 'batches-site' });
  const pool = await client.pools.create({ siteId: site.id, name: 'batches-pool', class: 'gpu' });
  const { token: joinToken } = await client.joinTokens.create({
    poolId: pool.id,
    uses: 2,
    preApproved: true,
  });
  nodes = [];
  for (const hostname of ['rack12-a', 'rack12-b']) {
    const joined = await client.nodes.join({
      joinToken,
      hostname,
      inventory: { cpuCores: 8, memoryGiB: 64, gpus: [] },
    });
    nodes.push(joined.nodeId!);
  }
}, 120_000);

afterAll(async () => {
  await stopServer?.();
  await database?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const ACTIONS = ['off', 'reset', 'cycle'] as const;

/** A batch of `size` leaves: power actions on the two nodes, and one node deletion at index 3. */
function createBatch(size: number, reason = 'power-cycle rack 12 after the firmware recall') {
  return client.commandBatches.create({
    tenantId: 'root',
    reason,
    leaves: Array.from(
      { length: size },
      (_, index): { subject: string; kind: string; payload: Record<string, string> } =>
        index === 3
          ? { subject: nodes[1]!, kind: 'node.delete', payload: {} }
          : { subject: nodes[index % 2]!, kind: 'metal.power', payload: { action: ACTIONS[index % 3]! } },
    ),
  });
}

describe('the list', () => {
  it('shows pending batches by default, and the other states through the filter', async () => {
    const pending = await createBatch(4, 'the pending one');
    const gone = await createBatch(4, 'the cancelled one');
    await client.commandBatches.cancel({ tenantId: 'root', batchId: gone.id });
    const view = createBatchesView(client, { tenantId: 'root' });
    expect(view.filter.get()).toBe('pending');
    await view.list.ensure();
    const ids = () => view.list.get().items.map((batch) => batch.id);
    expect(ids()).toContain(pending.id);
    expect(ids()).not.toContain(gone.id);
    expect(view.list.get().items.every((batch) => batch.state === 'pending')).toBe(true);

    await view.setFilter('cancelled');
    expect(ids()).toContain(gone.id);
    expect(ids()).not.toContain(pending.id);
    await view.setFilter('all');
    expect(ids()).toEqual(expect.arrayContaining([pending.id, gone.id]));
    await view.setFilter('approved');
    expect(ids()).toEqual([]);
  });

  it('an event re-reads the row, and a batch that left the filter’s state leaves the list', async () => {
    const batch = await createBatch(2);
    const view = createBatchesView(client, { tenantId: 'root' });
    await view.list.ensure();
    expect(view.list.get().items.map((item) => item.id)).toContain(batch.id);
    await client.commandBatches.cancel({ tenantId: 'root', batchId: batch.id });
    await view.tracked.refreshItem!(batch.id);
    expect(view.list.get().items.map((item) => item.id)).not.toContain(batch.id);
  });
});

describe('Details', () => {
  it('pages the whole scope 5,000 at a time, grouped by kind, with members awaiting approval', async () => {
    const batch = await createBatch(500);
    const view = createBatchesView(recording, { tenantId: 'root' });
    const details = view.details(batch.id);
    scopeLimits.length = 0;
    await details.refresh();
    const data = details.get().data!;
    expect(details.get().error).toBeNull();
    expect(scopeLimits).toEqual([BATCH_SCOPE_PAGE]);
    expect(BATCH_SCOPE_PAGE).toBe(5_000);
    expect(BATCH_SCOPE_CAP).toBe(20_000);
    expect(data.warnings).toEqual([]);
    expect(data.entriesRead).toBe(500);
    expect(data.batch.root).toBe(batch.root);
    expect(data.groups.map((group) => [group.kind, group.count])).toEqual([
      ['metal.power', 499],
      ['node.delete', 1],
    ]);
    const [power, deletion] = data.groups;
    expect(power!.summary).toBe('power off, reset or cycle the machine');
    expect(power!.entries.slice(0, 4)).toEqual([
      { index: 0, subject: nodes[0], payload: 'action off', unbound: false },
      { index: 1, subject: nodes[1], payload: 'action reset', unbound: false },
      { index: 2, subject: nodes[0], payload: 'action cycle', unbound: false },
      { index: 4, subject: nodes[0], payload: 'action reset', unbound: false },
    ]);
    expect(deletion!.entries).toEqual([
      { index: 3, subject: nodes[1], payload: 'no payload', unbound: false },
    ]);
    expect(data.membersRead).toBe(500);
    expect(data.members.map((group) => [group.state, group.count])).toEqual([['awaiting approval', 500]]);
  });

  it('stops at the cap and says the scope was cut short', async () => {
    const batch = await createBatch(500);
    const view = createBatchesView(recording, { tenantId: 'root', scopePageSize: 100, scopeCap: 250 });
    const details = view.details(batch.id);
    scopeLimits.length = 0;
    await details.refresh();
    const data = details.get().data!;
    expect(scopeLimits).toEqual([100, 100, 50]);
    expect(data.entriesRead).toBe(250);
    expect(data.groups.reduce((sum, group) => sum + group.count, 0)).toBe(250);
    expect(data.warnings).toContain(
      'Showing the first 250 of 500 scope entries: the console reads at most 250. Review the whole scope with better-compute batch show --scope-out.',
    );
    expect(data.membersRead).toBe(250);
    expect(data.warnings.some((warning) => warning.startsWith('Showing the first 250 member commands'))).toBe(
      true,
    );
  });

  it('shows an approval so far with its key id and approver', async () => {
    const batch = await createBatch(3);
    const approval = signApproval(createPrivateKey(approvers[0]!.privatePem), {
      batchId: batch.id,
      trustDomain: batch.trustDomain,
      root: fromHex(batch.root, 32)!,
      size: batch.size,
      notAfter: Date.parse(batch.notAfter),
    });
    await client.commandBatches.approve({ tenantId: 'root', batchId: batch.id, ...approval });
    const details = createBatchesView(client, { tenantId: 'root' }).details(batch.id);
    await details.refresh();
    const data = details.get().data!;
    expect(data.batch.state).toBe('pending');
    expect(data.approvals).toHaveLength(1);
    expect(data.approvals[0]!.kid).toBe(approvers[0]!.kid);
    expect(data.approvals[0]!.approver).toMatch(/^usr_/);
    expect(Date.parse(data.approvals[0]!.at)).not.toBeNaN();
  });

  it('a batch id the tenant has not reads as NOT_FOUND, and the panel holds nothing', async () => {
    const details = createBatchesView(client, { tenantId: 'root' }).details(
      'batch_01k5w0000000000000000000zz',
    );
    await details.refresh();
    expect(details.get().error?.code).toBe('NOT_FOUND');
    expect(details.get().data).toBeNull();
  });
});

describe('Cancel', () => {
  it('cancels the batch: it leaves the pending list and its members are cancelled', async () => {
    const batch = await createBatch(3);
    const view = createBatchesView(client, { tenantId: 'root' });
    await view.list.ensure();
    expect(view.cancelAction(batch.id)).toMatchObject({
      action: 'compute:batches:approve',
      resource: { type: 'compute-batch', id: batch.id },
    });
    const answer = await view.cancel(batch.id);
    expect(answer.state).toBe('cancelled');
    expect(view.list.get().items.map((item) => item.id)).not.toContain(batch.id);
    await expect(client.commandBatches.get({ tenantId: 'root', batchId: batch.id })).resolves.toMatchObject({
      state: 'cancelled',
    });
    const details = view.details(batch.id);
    await details.refresh();
    expect(details.get().data!.members.map((group) => [group.state, group.count])).toEqual([
      ['cancelled', 3],
    ]);
  });
});

describe('the row’s words', () => {
  it('counts down to notAfter while pending, and reads window closed at zero', async () => {
    const batch = await createBatch(2);
    const end = Date.parse(batch.notAfter);
    expect(secondsLeft(batch, end - 90_500)).toBe(90);
    expect(countdownText(90)).toBe('1 min 30 s left');
    expect(countdownText(23 * 3600 + 59 * 60 + 58)).toBe('23 h 59 min 58 s left');
    expect(secondsLeft(batch, end)).toBe(0);
    expect(secondsLeft(batch, end + 5_000)).toBe(0);
    expect(countdownText(0)).toBe('window closed');
    // Created for the default 24 hours.
    expect(secondsLeft(batch, Date.now())).toBeGreaterThan(24 * 3600 - 120);
    expect(secondsLeft({ ...batch, state: 'cancelled' }, end - 1000)).toBeNull();
  });

  it('a person’s batch names its creator; the approve command is shown for a pending batch only', async () => {
    const batch = await createBatch(2);
    expect(describeBatch(batch)).toEqual({
      reason: 'power-cycle rack 12 after the firmware recall',
      proposedBy: 'Created by root@kit.test',
      agentWarning: false,
      kinds: 'metal.power ×2',
    });
    expect(approveCommand(batch)).toBe(
      `better-compute batch approve --batch ${batch.id} --key <approver key>`,
    );
    expect(approveCommand({ ...batch, state: 'approved' })).toBeNull();
    // A server's answer is never put into a shell command unchecked.
    expect(approveCommand({ ...batch, id: 'batch_x; rm -rf ~' })).toBeNull();
  });

  it('an agent’s batch carries the warning instead, and no server text can reorder what is read', () => {
    const agentBatch = {
      id: 'batch_01k5w0000000000000000000aa',
      state: 'pending',
      reason: 'wipe\u202e the staging racks',
      createdBy: 'usr_alice',
      createdByAgent: 'agt_helper',
      delegationId: 'key_01',
      proposedBy: 'anything the server says',
      kinds: [{ kind: 'metal.power', count: 1 }],
    } as Batch;
    expect(describeBatch(agentBatch)).toEqual({
      reason: 'wipe  the staging racks',
      proposedBy:
        "Proposed by agent agt_helper for usr_alice (delegation key_01): the reason is the agent's own text.",
      agentWarning: true,
      kinds: 'metal.power ×1',
    });
  });

  it('groups a scope by kind in tree order; an unbound leaf and an unknown kind say so', () => {
    const groups = groupScope([
      { index: 0, subject: 'node_a', kind: 'metal.deploy', payload: { profile: 'gpu', image: 'debian-12' } },
      { index: 1, subject: 'node_b', kind: 'metal.power', payload: null },
      { index: 2, subject: 'node_c', kind: 'metal.deploy', payload: { image: 'debian-12' } },
      { index: 3, subject: 'node_d\n', kind: 'made.up', payload: {} },
    ]);
    expect(groups).toEqual([
      {
        kind: 'metal.deploy',
        summary: 'install an image on the machine, wiping its disks',
        count: 2,
        entries: [
          { index: 0, subject: 'node_a', payload: 'image debian-12, profile gpu', unbound: false },
          { index: 2, subject: 'node_c', payload: 'image debian-12', unbound: false },
        ],
      },
      {
        kind: 'metal.power',
        summary: 'power off, reset or cycle the machine',
        count: 1,
        entries: [
          { index: 1, subject: 'node_b', payload: 'any payload of its kind (unbound)', unbound: true },
        ],
      },
      {
        kind: 'made.up',
        summary: null,
        count: 1,
        entries: [{ index: 3, subject: 'node_d ', payload: 'no payload', unbound: false }],
      },
    ]);
  });
});
