/**
 * metal.bulk on both databases, with the real handler and job runner and the gateway's own
 * advanceCommand standing for the site agent's reports (docs/decisions/metal-bulk.md). Two
 * deployments share one database: one with the destructive-batch quorum on (a 2-of-2 approver
 * set), one without. With it on, a bulk power-off is one batch of metal.bmc-power leaves that
 * commandBatches reads like a hand-built one, its ids deduplicated and its reason the one given;
 * once approved and run, each machine's powerState follows its member's answer. Without it, or for
 * a verb that destroys nothing, the verb starts on each machine at once. Unknown and other
 * tenants' ids, machines in the wrong state, an empty or too long list, and a caller (or an agent
 * acting for one) without the authority for every machine or for creating batches are refused
 * with every offending id named, and nothing is created.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuthorizationCheck, AuthorizationDecision, Identity } from '@better-compute/core';
import { encodePublicKey, fromHex, generateApproverKey, signApproval } from '@better-compute/core/quorum';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { advanceCommand, openCommands } from '../src/modules/commands/index.js';
import { createPkiBundle } from '../src/pki/create.js';
import type { ComputeTables } from '../src/db/tables.js';
import { call, eventually, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const SECRET = 'metal-bulk-suite-deployment-secret-0123';
const ACME = 't-acme-alice';
const GLOBEX = 't-globex-bob';
/** An agent acting for usr_alice of acme (the bridge below knows it). */
const AGENT = 'agent-acme-bot';
const PASSWORD = 'bmc-bulk-5e1f0a';
const inventory = { cpuCores: 2, memoryGiB: 4, gpus: [] };

/**
 * The test bridge, one agent acting for a person, and decisions a test can narrow: `refuse` says
 * which checks IAM denies (the person's role lacking them, which the agent's calls inherit).
 */
class BulkBridge extends TestBridge {
  refuse: (check: AuthorizationCheck) => boolean = () => false;
  override async authenticate(credential: string): Promise<Identity | null> {
    if (credential !== AGENT) return super.authenticate(credential);
    return {
      principalId: 'agt_bot',
      principalKind: 'agent',
      tenantId: 'acme',
      credentialKind: 'api-key',
      credentialId: 'key_botkey',
      mfa: false,
      expiresAt: null,
      actingFor: 'usr_alice',
      delegation: { id: 'dlg_bot', confirm: [], spendLimitGpuHours: null },
    };
  }
  override async authorize(
    identity: Identity,
    checks: AuthorizationCheck[],
  ): Promise<AuthorizationDecision[]> {
    const decided = await super.authorize(identity, checks);
    return decided.map((decision, i) =>
      this.refuse(checks[i]!) ? { allowed: false, reason: 'no binding grants it' } : decision,
    );
  }
}

describe.each(kinds)('metal bulk on %s', (kind) => {
  let database: TestDatabase;
  let db: Kysely<ComputeTables>;
  /** The deployment with the quorum on, and one on the same database with it off. */
  let quorum: ComputeInstance;
  let plain: ComputeInstance;
  const bridge = new BulkBridge();
  let dir: string;
  let approvers: ReturnType<typeof generateApproverKey>[];
  let agent: { nodeId: string; credential: string };
  let siteId: string;
  /** Three manageable machines, one still in enroll, and globex's. */
  let managed: string[];
  let enrolled: string;
  let theirs: string;

  async function answer(compute: ComputeInstance, method: string, body: unknown, token = ACME) {
    return (await call(compute, method, body, { token })).body;
  }
  async function ok(compute: ComputeInstance, method: string, body: unknown, token = ACME) {
    const { data, error } = await answer(compute, method, body, token);
    if (error) throw new Error(`${method}: ${error.code} ${error.message}`);
    return data as any;
  }
  async function refused(compute: ComputeInstance, method: string, body: unknown, token = ACME) {
    const { status, body: got } = await call(compute, method, body, { token });
    if (!got.error) throw new Error(`${method} succeeded: ${JSON.stringify(got.data)}`);
    expect(status).toBeLessThan(500);
    return got.error as { code: string; message: string; details?: Record<string, any> };
  }
  /** What a refusal must leave as it was: machines, commands, workflows, batches, jobs. */
  const snapshot = async () =>
    JSON.stringify([
      (await sql`select * from compute.metal_machines order by id`.execute(db)).rows,
      (await sql`select id, state from compute.commands order by id`.execute(db)).rows,
      (await sql`select id, state from compute.workflows order by id`.execute(db)).rows,
      (await sql`select id from compute.command_batches order by id`.execute(db)).rows,
      (await sql`select batch_id, idx from compute.command_batch_leaves order by batch_id, idx`.execute(db))
        .rows,
    ]);
  /** Answers every queued metal.bmc outside a batch as the agent would, until nothing is left to run. */
  async function agentAnswers(result: Record<string, unknown>) {
    for (let i = 0; i < 40; i++) {
      await quorum.runDueJobs();
      const { rows } = await sql<{ id: string }>`
        select id from compute.commands where kind = 'metal.bmc' and state = 'queued' and batch_id is null`.execute(
        db,
      );
      for (const row of rows) await report(row.id, result);
      const running = await sql`select 1 from compute.workflows where state = 'running'`.execute(db);
      if (rows.length === 0 && running.rows.length === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error('the machines did not settle');
  }
  async function report(
    commandId: string,
    result: Record<string, unknown> | null,
    error: string | null = null,
  ) {
    await advanceCommand(db, agent.nodeId, commandId, { state: 'sent', at: new Date() });
    await advanceCommand(db, agent.nodeId, commandId, {
      state: error ? 'failed' : 'succeeded',
      at: new Date(),
      exitCode: null,
      stdout: '',
      stderr: '',
      result,
      error,
    });
  }
  const machine = (machineId: string) => ok(quorum, 'metal.get', { machineId });
  const enroll = (name: string, uuidTail: string, token = ACME, site = siteId) =>
    ok(
      quorum,
      'metal.enroll',
      {
        siteId: site,
        name,
        bmcDriver: 'ipmi',
        bmcAddress: `10.0.1.${Number.parseInt(uuidTail, 16) % 250}`,
        bmcUser: 'admin',
        bmcPassword: PASSWORD,
        productUuid: `4c4c4544-0042-3510-8052-b4c04f4a${uuidTail}`,
      },
      token,
    );

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bc-metal-bulk-'));
    const path = join(dir, 'pki.json');
    const bundle = await createPkiBundle({ path, secret: SECRET, trustDomain: 'bulk.example.com' });
    approvers = [generateApproverKey(), generateApproverKey()];
    const document = JSON.parse(readFileSync(path, 'utf8'));
    document.approvers = [
      {
        set: {
          trustDomain: bundle.trustDomain,
          epoch: 1,
          threshold: 2,
          approvers: approvers
            .map((files) => ({
              kid: files.kid,
              publicKey: encodePublicKey(createPublicKey(createPrivateKey(files.privatePem))),
            }))
            .sort((a, b) => (a.kid < b.kid ? -1 : 1)),
        },
        signatures: [],
      },
    ];
    writeFileSync(path, JSON.stringify(document, null, 2), { mode: 0o600 });
    database = await createTestDatabase(kind, 4);
    db = database.db as Kysely<ComputeTables>;
    const config = { database, iam: bridge, trustedOrigins: [], rateLimit: false as const, secret: SECRET };
    quorum = await betterCompute({ ...config, pki: path }, { log: () => {} });
    plain = await betterCompute(config, { log: () => {} });
    await quorum.migrate();

    siteId = (await ok(quorum, 'sites.create', { name: 'rack-12' })).id;
    const poolId = (await ok(quorum, 'pools.create', { siteId, name: 'agents', class: 'gpu', driver: 'sim' }))
      .id;
    const { token } = await ok(quorum, 'siteTokens.create', { poolId, preApproved: true });
    const joined = (
      await call(quorum, 'nodes.join', { joinToken: token, hostname: 'agent-1', inventory }, {})
    ).body.data as any;
    agent = { nodeId: joined.nodeId, credential: joined.nodeCredential };
    await call(quorum, 'nodes.heartbeat', { nodeCredential: agent.credential }, {});

    managed = [];
    for (const [i, tail] of ['0001', '0002', '0003'].entries()) {
      const { id } = await enroll(`r12-u0${i + 1}`, tail);
      await ok(quorum, 'metal.manage', { machineId: id });
      managed.push(id);
    }
    await agentAnswers({ powerState: 'on' });
    for (const id of managed)
      expect(await machine(id)).toMatchObject({ provisionState: 'manageable', powerState: 'on' });
    enrolled = (await enroll('r12-u09', '0009')).id;
    const globexSite = (await ok(quorum, 'sites.create', { name: 'globex-dc' }, GLOBEX)).id;
    theirs = (await enroll('g-1', '00ff', GLOBEX, globexSite)).id;
  });
  afterAll(async () => {
    await quorum?.close();
    await plain?.close();
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses unknown and other tenants’ ids, wrong states, and bad lists, naming each, creating nothing', async () => {
    const before = await snapshot();
    const missing = 'node_01k00000000000000000000000';
    const unknown = await refused(quorum, 'metal.bulk', {
      verb: 'power-off',
      machineIds: [managed[0], theirs, missing],
      reason: 'rack 12 PDU swap',
    });
    expect(unknown.code).toBe('NOT_FOUND');
    // Another tenant's machine reads as absent, as every read of one answers it.
    expect(unknown.message).toBe(`2 machines do not exist: ${theirs}, ${missing}`);
    expect(unknown.details).toMatchObject({ field: 'machineIds', ids: [theirs, missing] });

    const wrongState = await refused(quorum, 'metal.bulk', {
      verb: 'power-off',
      machineIds: [managed[0], enrolled],
      reason: 'rack 12 PDU swap',
    });
    expect(wrongState.code).toBe('INVALID_STATE');
    expect(wrongState.message).toBe(
      `1 of 2 machines cannot power-off: machine ${enrolled} is enroll; power needs enroll failed, manageable, inspect failed, clean failed, available, deploy failed, active, rescue, rescue failed, retired`,
    );
    expect(wrongState.details!.refused).toEqual([
      {
        id: enrolled,
        code: 'INVALID_STATE',
        message: expect.stringContaining(`machine ${enrolled} is enroll`),
      },
    ]);
    // The verbs of the table are checked by the table too, in both deployments.
    const recover = await refused(plain, 'metal.bulk', {
      verb: 'recover',
      machineIds: [enrolled, managed[1]],
      reason: 'after a look',
    });
    expect(recover.code).toBe('INVALID_STATE');
    expect(recover.details!.refused.map((r: any) => r.id)).toEqual([enrolled, managed[1]]);
    const manage = await refused(plain, 'metal.bulk', {
      verb: 'manage',
      machineIds: managed,
      reason: 'again',
    });
    expect(manage.code).toBe('INVALID_STATE');
    expect(manage.details!.refused.map((r: any) => r.id)).toEqual(managed);

    for (const machineIds of [[], Array.from({ length: 501 }, () => managed[0])])
      expect((await refused(quorum, 'metal.bulk', { verb: 'power-off', machineIds, reason: 'x' })).code).toBe(
        'INVALID_ARGUMENT',
      );
    const noReason = await refused(quorum, 'metal.bulk', { verb: 'power-off', machineIds: managed });
    expect(noReason.code).toBe('INVALID_ARGUMENT');
    expect(noReason.message).toContain('reason');
    expect(
      (await refused(quorum, 'metal.bulk', { verb: 'reboot', machineIds: managed, reason: 'x' })).code,
    ).toBe('INVALID_ARGUMENT');
    // Globex asking for acme's machines finds none of them.
    const fromGlobex = await refused(
      quorum,
      'metal.bulk',
      { verb: 'power-on', machineIds: managed, reason: 'x' },
      GLOBEX,
    );
    expect(fromGlobex.code).toBe('NOT_FOUND');
    expect(fromGlobex.details!.ids).toEqual(managed);
    expect(await snapshot()).toBe(before);
  });

  it('decides every machine and, for a batch, compute:batches:create: an agent gets no more than its person', async () => {
    const before = await snapshot();
    bridge.refuse = (check) => check.action === 'compute:batches:create';
    const noBatches = await refused(
      quorum,
      'metal.bulk',
      { verb: 'power-off', machineIds: managed, reason: 'the agent thinks rack 12 should be off' },
      AGENT,
    );
    expect(noBatches.code).toBe('ACCESS_DENIED');
    expect(noBatches.message).toBe('compute:batches:create is not allowed on tenant acme');
    // The same person's call that makes no batch (power-on, or power-off without the quorum) is decided on the machines only.
    bridge.refuse = (check) => check.resource.id === managed[2];
    const oneMachine = await refused(
      plain,
      'metal.bulk',
      { verb: 'power-on', machineIds: managed, reason: 'bring rack 12 up' },
      AGENT,
    );
    expect(oneMachine.code).toBe('ACCESS_DENIED');
    expect(oneMachine.message).toBe(
      `compute:nodes:provision is not allowed on compute-metal-machine ${managed[2]}`,
    );
    bridge.refuse = () => false;
    expect(await snapshot()).toBe(before);
  });

  it('with the quorum on, a bulk power-off is one batch, deduplicated, seen by commandBatches as any other', async () => {
    const bulk = await ok(quorum, 'metal.bulk', {
      verb: 'power-off',
      machineIds: [managed[0], managed[1], managed[0], managed[2], managed[1]],
      reason: 'rack 12 PDU swap',
      hours: 4,
      idempotencyKey: 'bulk-rack-12',
    });
    expect(bulk).toMatchObject({
      verb: 'power-off',
      mode: 'batch',
      machineIds: managed,
      machines: [],
      batch: {
        state: 'pending',
        size: 3,
        approvalsNeeded: 2,
        reason: 'rack 12 PDU swap',
        proposedBy: 'usr_alice',
      },
    });
    // A retry with the key answers the same batch; nothing new is created.
    const again = await ok(quorum, 'metal.bulk', {
      verb: 'power-off',
      machineIds: [managed[0], managed[1], managed[0], managed[2], managed[1]],
      reason: 'rack 12 PDU swap',
      hours: 4,
      idempotencyKey: 'bulk-rack-12',
    });
    expect(again.batch.id).toBe(bulk.batch.id);
    expect(
      (await ok(quorum, 'commandBatches.list', { state: 'pending' })).items.map((b: any) => b.id),
    ).toEqual([bulk.batch.id]);
    const got = await ok(quorum, 'commandBatches.get', { batchId: bulk.batch.id });
    expect(got).toMatchObject({ root: bulk.batch.root, size: 3, reason: 'rack 12 PDU swap' });
    // The leaves are the ones metal power off names in its refusal: machine, action, agent, BMC.
    const scope = await ok(quorum, 'commandBatches.scope', { batchId: bulk.batch.id });
    const refusal = await refused(quorum, 'metal.power', { machineId: managed[1], action: 'off' });
    expect(scope.items.map(({ subject, kind, payload }: any) => ({ subject, kind, payload }))[1]).toEqual(
      refusal.details!.leaf,
    );
    expect(
      scope.items.map((leaf: any) => [leaf.subject, leaf.kind, leaf.payload.action, leaf.payload.runner]),
    ).toEqual(managed.map((id) => [id, 'metal.bmc-power', 'off', agent.nodeId]));
    const members = (await ok(quorum, 'commandBatches.members', { batchId: bulk.batch.id })).items;
    expect(members.map((m: any) => [m.nodeId, m.kind, m.payload.machineId, m.awaitingApproval])).toEqual(
      managed.map((id) => [agent.nodeId, 'metal.bmc', id, true]),
    );
    expect(JSON.stringify(members)).not.toContain(PASSWORD);
    expect((await openCommands(db, [agent.nodeId])).filter((row) => row.batch_id)).toEqual([]);

    // Approved by both approvers; the agent runs each member; each machine's powerState follows.
    const statement = {
      batchId: bulk.batch.id,
      trustDomain: bulk.batch.trustDomain,
      root: fromHex(bulk.batch.root, 32)!,
      size: 3,
      notAfter: Date.parse(bulk.batch.notAfter),
    };
    for (const files of approvers)
      await ok(quorum, 'commandBatches.approve', {
        batchId: bulk.batch.id,
        kid: files.kid,
        signature: signApproval(createPrivateKey(files.privatePem), statement).signature,
      });
    const released = (await openCommands(db, [agent.nodeId])).filter((row) => row.batch_id === bulk.batch.id);
    expect(released).toHaveLength(3);
    await report(released[0]!.id, { powerState: 'off' });
    await report(released[1]!.id, { powerState: 'off' });
    await report(released[2]!.id, null, 'the BMC did not answer in 30 s');
    for (let i = 0; i < 5; i++) await quorum.runDueJobs();
    expect((await machine(managed[0]!)).powerState).toBe('off');
    expect((await machine(managed[1]!)).powerState).toBe('off');
    // A member that failed keeps the power state it had, and says why, as a direct call does.
    expect(await machine(managed[2]!)).toMatchObject({
      powerState: 'on',
      lastError: `command ${released[2]!.id} failed: the BMC did not answer in 30 s`,
    });
    const powered = await eventually(
      () => ok(quorum, 'events.list', { type: 'metal.powered', limit: 50 }),
      (page) => page.items.filter((e: any) => e.data.batchId === bulk.batch.id).length === 3,
    );
    expect(
      powered.items
        .filter((e: any) => e.data.batchId === bulk.batch.id)
        .map((e: any) => [e.subject.id, e.data.powerState, e.data.workflowId])
        .sort(),
    ).toEqual(
      [
        [managed[0], 'off', null],
        [managed[1], 'off', null],
        [managed[2], 'on', null],
      ].sort(),
    );
  });

  it('verbs that destroy nothing, and power-off without the quorum, start on each machine at once', async () => {
    const on = await ok(quorum, 'metal.bulk', {
      verb: 'power-on',
      machineIds: [managed[0], managed[1], managed[0]],
      reason: 'bring rack 12 back',
    });
    expect(on).toMatchObject({ mode: 'direct', batch: null, machineIds: [managed[0], managed[1]] });
    expect(on.machines.map((m: any) => m.workflowId)).toEqual([
      expect.stringMatching(/^wf_/),
      expect.stringMatching(/^wf_/),
    ]);
    await agentAnswers({ powerState: 'on' });
    for (const id of [managed[0]!, managed[1]!]) expect((await machine(id)).powerState).toBe('on');

    const batches = async () =>
      Number(
        (await sql<{ n: string }>`select count(*) as n from compute.command_batches`.execute(db)).rows[0]!.n,
      );
    const held = await batches();
    const off = await ok(plain, 'metal.bulk', {
      verb: 'power-off',
      machineIds: managed,
      reason: 'no quorum here',
    });
    expect(off).toMatchObject({ mode: 'direct', batch: null, machineIds: managed });
    expect(await batches()).toBe(held);
    // A second call while their workflows run is CONFLICT, naming each machine.
    const busy = await refused(plain, 'metal.bulk', {
      verb: 'power-status',
      machineIds: managed,
      reason: 'look',
    });
    expect(busy.code).toBe('CONFLICT');
    expect(busy.details!.refused.map((r: any) => r.id)).toEqual(managed);
    await agentAnswers({ powerState: 'off' });
    for (const id of managed) expect((await machine(id)).powerState).toBe('off');

    const retired = await ok(quorum, 'metal.bulk', {
      verb: 'retire',
      machineIds: [enrolled],
      reason: 'never racked',
    });
    expect(retired.machines.map((m: any) => m.provisionState)).toEqual(['retired']);
  });
});
