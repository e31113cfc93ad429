/**
 * The metal module on both databases, with the real handler and job runner and the gateway's own
 * functions where a site agent would report (advanceCommand): enroll seals the BMC password (in no
 * answer, event, audit row, command or workflow), manage and provide run their workflows on the
 * site's agent and land where core's transition table says on success and on failure, power
 * records the BMC's answer, retire and recover, abort only where the table allows; bad input,
 * states the table refuses and other tenants' sites and machines change nothing.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkCommandQuorum,
  encodePublicKey,
  fromHex,
  generateApproverKey,
  readApproverSet,
  signApproval,
} from '@better-compute/core/quorum';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { quorumAttachments } from '../src/modules/batches/index.js';
import { advanceCommand, openCommands, recordNodeSession } from '../src/modules/commands/index.js';
import { createBmcSealer, recordCleaning, recordInspection } from '../src/modules/metal/index.js';
import { WORKFLOW_JOB } from '../src/modules/workflows/index.js';
import { createCommandSecrets } from '../src/gateway/command-secrets.js';
import { createPkiBundle } from '../src/pki/create.js';
import type { ComputeTables } from '../src/db/tables.js';
import { call, eventually, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const SECRET = 'metal-suite-deployment-secret-0123456789';
const ACME = 't-acme-alice';
const GLOBEX = 't-globex-bob';
/** The BMC password: in no answer, event, audit row, command, workflow or row unsealed. */
const PASSWORD = 'bmc-Pa55-7f3e9a1c';
const inventory = { cpuCores: 2, memoryGiB: 4, gpus: [] };

describe.each(kinds)('bare-metal machines on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let db: Kysely<ComputeTables>;
  let siteId: string;
  let otherSite: string;
  let globexSite: string;
  let agent: { nodeId: string; credential: string };
  let machineId: string;
  /** How far the deployment's clock runs ahead of the machine's (a timeout's test moves it). */
  let skewMs = 0;

  async function api(method: string, body: Record<string, unknown>, token: string | null = ACME) {
    const { body: answer } = await call(compute, method, body, token ? { token } : {});
    if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
    return answer.data as any;
  }
  async function fails(method: string, body: unknown, token: string | null = ACME) {
    const { status, body: answer } = await call(compute, method, body, token ? { token } : {});
    if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
    expect(status).toBeLessThan(500);
    return answer.error as { code: string; message: string; details?: Record<string, any> };
  }
  const enrollInput = (change: Record<string, unknown> = {}) => ({
    siteId,
    name: 'r12-u07',
    bmcDriver: 'ipmi',
    bmcAddress: '10.0.0.7',
    bmcUser: 'admin',
    bmcPassword: PASSWORD,
    productUuid: '4C4C4544-0042-3510-8052-B4C04F4A4E31',
    macs: ['52-54-00-AA-BB-01'],
    ...change,
  });
  const snapshot = async () =>
    JSON.stringify((await sql`select * from compute.metal_machines order by id`.execute(db)).rows);
  /** Runs the workers until the agent's newest metal.bmc command is queued; answers it. */
  async function bmcCommand() {
    for (let i = 0; i < 20; i++) {
      await compute.runDueJobs();
      const { rows } = await sql<{ id: string; payload: any; state: string }>`
        select id, payload, state from compute.commands where node_id = ${agent.nodeId} and kind = 'metal.bmc'
        order by seq desc limit 1`.execute(db);
      if (rows[0] && rows[0].state === 'queued') return rows[0];
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const dump = await sql`select id, kind, state, steps from compute.workflows order by created_at`.execute(
      db,
    );
    const commands = await sql`select id, kind, state, workflow_id from compute.commands`.execute(db);
    const jobs = await sql`select * from compute.jobs`.execute(db);
    throw new Error(
      `no metal.bmc command was queued: ${JSON.stringify([dump.rows, commands.rows, jobs.rows])}`,
    );
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
    for (let i = 0; i < 5; i++) await compute.runDueJobs();
  }
  const machine = () => api('metal.get', { machineId });
  /** The newest metal.boot-entries command queued for the agent. */
  const latestEntries = async () =>
    (
      await sql<{ id: string; payload: any; state: string }>`
        select id, payload, state from compute.commands
        where node_id = ${agent.nodeId} and kind = 'metal.boot-entries' order by seq desc limit 1`.execute(db)
    ).rows[0];

  beforeAll(async () => {
    database = await createTestDatabase(kind, 4);
    db = database.db as Kysely<ComputeTables>;
    compute = await betterCompute(
      { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false, secret: SECRET },
      { log: () => {}, now: () => new Date(Date.now() + skewMs) },
    );
    await compute.migrate();
    siteId = (await api('sites.create', { name: 'dc-1' })).id;
    otherSite = (await api('sites.create', { name: 'dc-2' })).id;
    globexSite = (await api('sites.create', { name: 'globex-dc' }, GLOBEX)).id;
    const poolId = (await api('pools.create', { siteId, name: 'agents', class: 'gpu', driver: 'sim' })).id;
    const { token } = await api('siteTokens.create', { poolId, preApproved: true });
    const joined = await api('nodes.join', { joinToken: token, hostname: 'agent-1', inventory }, null);
    agent = { nodeId: joined.nodeId, credential: joined.nodeCredential };
    await api('nodes.heartbeat', { nodeCredential: agent.credential }, null);
    expect((await api('nodes.get', { nodeId: agent.nodeId })).state).toBe('ready');
  });
  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('enroll keeps the machine in enroll, the password sealed and never answered', async () => {
    const enrolled = await api('metal.enroll', { ...enrollInput(), idempotencyKey: 'metal-enroll-1' });
    machineId = enrolled.id;
    expect(machineId).toMatch(/^node_/);
    expect(enrolled).toMatchObject({
      siteId,
      name: 'r12-u07',
      provisionState: 'enroll',
      targetState: null,
      powerState: 'unknown',
      bmc: { driver: 'ipmi', address: '10.0.0.7', port: null, username: 'admin', passwordSet: true },
      productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e31',
      macs: ['52:54:00:aa:bb:01'],
      allowed: ['manage', 'retire'],
      version: 1,
    });
    // A retry with the key answers the same machine; nothing new is enrolled.
    expect((await api('metal.enroll', { ...enrollInput(), idempotencyKey: 'metal-enroll-1' })).id).toBe(
      machineId,
    );
    const { rows } = await sql<{ sealed: string }>`
      select bmc_password_sealed as sealed from compute.metal_machines`.execute(db);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.sealed.startsWith('v1.')).toBe(true);
    expect(createBmcSealer(SECRET).open(rows[0]!.sealed, 'acme', machineId)).toBe(PASSWORD);
    // Bound to its machine: the sealed value copied to another id does not open.
    expect(() =>
      createBmcSealer(SECRET).open(rows[0]!.sealed, 'acme', 'node_01m00000000000000000000000'),
    ).toThrow();
    expect((await api('metal.list', { siteId })).items.map((m: any) => m.id)).toEqual([machineId]);
    expect((await api('metal.list', { siteId: otherSite })).items).toEqual([]);
    const events = await eventually(
      () => api('events.list', { type: 'metal.' }),
      (page) => page.items.length > 0,
    );
    expect(events.items[0]).toMatchObject({
      type: 'metal.enrolled',
      subject: { type: 'machine', id: machineId },
    });
  });

  it('bad input, other tenants and states the table refuses change nothing', async () => {
    const before = await snapshot();
    const mac = await fails('metal.enroll', enrollInput({ name: 'bad-mac', macs: ['52:54:00:aa:bb'] }));
    expect(mac.code).toBe('INVALID_ARGUMENT');
    expect(mac.message).toContain('macs');
    const multicast = await fails('metal.enroll', enrollInput({ name: 'mc', macs: ['01:00:5e:00:00:01'] }));
    expect(multicast.code).toBe('INVALID_ARGUMENT');
    expect((await fails('metal.enroll', enrollInput({ name: 'nul', bmcPassword: 'a\u0000b' }))).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect(
      (await fails('metal.enroll', enrollInput({ name: 'addr', bmcAddress: '-oProxyCommand=x' }))).code,
    ).toBe('INVALID_ARGUMENT');
    expect(
      (await fails('metal.enroll', enrollInput({ name: 'big', bmcPassword: 'x'.repeat(257) }))).code,
    ).toBe('INVALID_ARGUMENT');
    expect(
      (await fails('metal.enroll', enrollInput({ name: 'huge', bmcUser: 'x'.repeat(2_000_000) }))).code,
    ).toBe('PAYLOAD_TOO_LARGE');
    expect((await fails('metal.enroll', enrollInput({ name: 'uuid', productUuid: 'not-a-uuid' }))).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await fails('metal.enroll', enrollInput({ name: 'extra', extra: 1 }))).code).toBe(
      'INVALID_ARGUMENT',
    );
    // A Redfish BMC is enrolled with its certificate's fingerprint, which the agent pins; IPMI has none.
    const unpinned = await fails('metal.enroll', enrollInput({ name: 'rf', bmcDriver: 'redfish' }));
    expect(unpinned.code).toBe('INVALID_ARGUMENT');
    expect(unpinned.message).toContain('bmcTlsFingerprint');
    const ipmiPinned = await fails(
      'metal.enroll',
      enrollInput({ name: 'ipmi-fp', bmcTlsFingerprint: 'ab'.repeat(32) }),
    );
    expect(ipmiPinned.message).toContain('bmcTlsFingerprint');
    expect(
      (
        await fails(
          'metal.enroll',
          enrollInput({ name: 'rf', bmcDriver: 'redfish', bmcTlsFingerprint: 'zz' }),
        )
      ).code,
    ).toBe('INVALID_ARGUMENT');
    // The same product UUID or name twice.
    expect((await fails('metal.enroll', enrollInput({ name: 'again' }))).code).toBe('ALREADY_EXISTS');
    expect(
      (await fails('metal.enroll', enrollInput({ productUuid: '00000000-0000-0000-0000-000000000001' })))
        .code,
    ).toBe('ALREADY_EXISTS');
    // Another tenant's site, and another tenant's machine.
    expect((await fails('metal.enroll', enrollInput({ name: 'theirs', siteId: globexSite }))).code).toBe(
      'NOT_FOUND',
    );
    expect((await fails('metal.get', { machineId }, GLOBEX)).code).toBe('NOT_FOUND');
    expect((await fails('metal.manage', { machineId }, GLOBEX)).code).toBe('NOT_FOUND');
    expect((await fails('metal.power', { machineId, action: 'off' }, GLOBEX)).code).toBe('NOT_FOUND');
    expect((await fails('metal.manage', { machineId }, null)).code).toBe('UNAUTHENTICATED');
    // A transition not allowed from enroll: INVALID_STATE naming both states.
    const provide = await fails('metal.provide', { machineId });
    expect(provide.code).toBe('INVALID_STATE');
    expect(provide.message).toBe(`machine ${machineId} is enroll; provide needs manageable`);
    const power = await fails('metal.power', { machineId, action: 'status' });
    expect(power.code).toBe('INVALID_STATE');
    expect((await fails('metal.abort', { machineId })).code).toBe('INVALID_STATE');
    expect((await fails('metal.recover', { machineId })).code).toBe('INVALID_STATE');
    expect((await fails('metal.get', { machineId: 'node_x\u0000' })).code).toBe('INVALID_ARGUMENT');
    expect(await snapshot()).toBe(before);
  });

  it('a Redfish BMC is enrolled with its certificate fingerprint, kept in one form', async () => {
    const redfish = await api(
      'metal.enroll',
      enrollInput({
        name: 'rf-1',
        bmcDriver: 'redfish',
        bmcAddress: 'bmc-rf-1.example.com',
        bmcTlsFingerprint: `sha256:${'ab'.repeat(32)}`,
        productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e40',
        macs: [],
      }),
    );
    expect(redfish.bmc).toEqual({
      driver: 'redfish',
      address: 'bmc-rf-1.example.com',
      port: null,
      username: 'admin',
      tlsFingerprint: Array(32).fill('AB').join(':'),
      passwordSet: true,
    });
    expect(await api('metal.retire', { machineId: redfish.id })).toMatchObject({ provisionState: 'retired' });
  });

  it('manage asks the BMC through the site agent; a refused password lands in enroll failed', async () => {
    const verifying = await api('metal.manage', { machineId, reason: 'bring-up' });
    expect(verifying).toMatchObject({ provisionState: 'verifying', targetState: 'manageable' });
    expect(verifying.workflowId).toMatch(/^wf_/);
    // Not abortable: verifying only asks the BMC a question.
    const abort = await fails('metal.abort', { machineId });
    expect(abort.code).toBe('INVALID_STATE');
    expect(abort.message).toContain('is verifying');
    const command = await bmcCommand();
    // The stored command names the BMC without its password; the gateway adds it as it signs.
    expect(command.payload).toEqual({
      machineId,
      action: 'status',
      bmc: { driver: 'ipmi', address: '10.0.0.7', port: null, username: 'admin', tlsFingerprint: null },
    });
    const secrets = createCommandSecrets(SECRET);
    const row = (await sql`select * from compute.commands where id = ${command.id}`.execute(db))
      .rows[0] as any;
    expect(secrets.needs(row)).toBe(true);
    expect(await secrets.resolve(db, row)).toEqual({
      payload: { ...command.payload, bmc: { ...command.payload.bmc, password: PASSWORD } },
    });
    // The same command written to a node that is not the site's agent is not given the password.
    expect(await secrets.resolve(db, { ...row, node_id: 'node_01m00000000000000000000000' })).toEqual({
      error: 'its node is not the site agent of the machine’s site',
    });
    await report(command.id, { bmc: 'auth' }, 'the BMC refused the credentials');
    expect(await machine()).toMatchObject({
      provisionState: 'enroll failed',
      targetState: null,
      lastError: expect.stringMatching(/^command cmd_\w+ failed: the BMC refused the credentials$/),
    });
    // recover returns it to enroll; manage again, and this time the BMC answers.
    expect((await api('metal.recover', { machineId })).provisionState).toBe('enroll');
    await api('metal.manage', { machineId });
    await report((await bmcCommand()).id, { powerState: 'off' });
    expect(await machine()).toMatchObject({
      provisionState: 'manageable',
      powerState: 'off',
      lastError: null,
    });
  });

  it('inspect boots the ramdisk through the agent that runs the network; its report lands the inventory', async () => {
    const MAC = '52:54:00:aa:bb:01';
    const found = {
      systemUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e31',
      cpu: { count: 64, model: 'AMD EPYC 7543 32-Core Processor' },
      memory: { physicalMiB: 524288, totalKiB: 527000000 },
      disks: [
        {
          name: 'nvme0n1',
          sizeBytes: 3840755982336,
          model: 'SAMSUNG MZQL23T8',
          serial: 'S64H',
          rotational: false,
        },
      ],
      nics: [{ name: 'eno1', mac: MAC }],
    };
    // No agent of the site runs the provisioning network: refused, and nothing changed.
    const before = await snapshot();
    const refused = await fails('metal.inspect', { machineId });
    expect(refused.code).toBe('INVALID_STATE');
    expect(refused.message).toContain('runs the provisioning network');
    expect(await snapshot()).toBe(before);
    await recordNodeSession(db, {
      nodeId: agent.nodeId,
      tenantId: 'acme',
      gatewayId: 'gw_test',
      at: new Date(),
      hello: { version: '0.1.0', capabilities: ['site.agent', 'site.pxe'] },
    });
    expect((await fails('metal.inspect', { machineId }, GLOBEX)).code).toBe('NOT_FOUND');
    const inspecting = await api('metal.inspect', { machineId, reason: 'inventory' });
    expect(inspecting).toMatchObject({
      provisionState: 'inspecting',
      targetState: 'manageable',
      allowed: ['abort'],
    });
    // The agent is told to boot the ramdisk on the machine's MAC; the workflow waits until it did.
    const ramdisk = (await latestEntries())!;
    expect(ramdisk.payload).toEqual({ entries: [{ mac: MAC, boot: 'ramdisk', purpose: 'inspect' }] });
    await compute.runDueJobs();
    expect(
      (
        await sql<{ n: number }>`select count(*)::int as n from compute.commands
        where node_id = ${agent.nodeId} and kind = 'metal.bmc' and state = 'queued'`.execute(db)
      ).rows[0]!.n,
    ).toBe(0);
    await report(ramdisk.id, { entries: 1, ramdisks: 1, removed: 0 });
    // Then off, and on from the network.
    const off = await bmcCommand();
    expect(off.payload.action).toBe('off');
    await report(off.id, { powerState: 'off' });
    const on = await bmcCommand();
    expect(on.payload).toMatchObject({ action: 'on', bootDevice: 'pxe' });
    await report(on.id, { powerState: 'on' });
    // Reports that are not this machine's record nothing.
    const at = new Date();
    const foreign = { ...found, systemUuid: '11111111-2222-3333-4444-555555555555' };
    expect(await recordInspection(db, agent.nodeId, { mac: MAC, inventory: foreign }, at)).toEqual({
      outcome: 'refused',
      reason: `the machine on MAC ${MAC} reports system UUID ${foreign.systemUuid}, and machine ${machineId} was enrolled with ${found.systemUuid}`,
    });
    expect(
      await recordInspection(db, agent.nodeId, { mac: '52:54:00:aa:bb:99', inventory: found }, at),
    ).toEqual({
      outcome: 'refused',
      reason: 'no machine of the agent’s site has the MAC 52:54:00:aa:bb:99',
    });
    expect(
      (await recordInspection(db, 'node_01m00000000000000000000000', { mac: MAC, inventory: found }, at))
        .outcome,
    ).toBe('refused');
    expect((await machine()).inventory).toBeNull();
    expect(
      await recordInspection(db, agent.nodeId, { mac: MAC.toUpperCase(), inventory: found }, at),
    ).toEqual({
      outcome: 'recorded',
      machineId,
    });
    // The report wakes the workflow: off again, and the machine is manageable with what was found.
    const last = await bmcCommand();
    expect(last.payload.action).toBe('off');
    await report(last.id, { powerState: 'off' });
    expect(await machine()).toMatchObject({
      provisionState: 'manageable',
      inventory: found,
      inspectedAt: at.toISOString(),
      lastError: null,
    });
    expect((await latestEntries())!.payload).toEqual({ entries: [{ mac: MAC, boot: 'local-disk' }] });
    expect((await recordInspection(db, agent.nodeId, { mac: MAC, inventory: found }, at)).outcome).toBe(
      'refused',
    );
    const events = await api('events.list', { type: 'metal.inspected' });
    expect(events.items.map((e: any) => e.data)).toEqual([
      { workflowId: inspecting.workflowId, mac: MAC, cpus: 64, memoryMiB: 524288, disks: 1, nics: 1 },
    ]);
    // Aborted while it waits, it lands in inspect failed and boots from its disk again.
    await api('metal.inspect', { machineId });
    expect((await api('metal.abort', { machineId, reason: 'wrong rack' })).provisionState).toBe(
      'inspect failed',
    );
    expect((await latestEntries())!.payload).toEqual({ entries: [{ mac: MAC, boot: 'local-disk' }] });
    expect((await api('metal.recover', { machineId })).provisionState).toBe('manageable');
  });

  it('a machine enrolled by its UUID only waits in metal.ensureRamdisk until its MAC is confirmed', async () => {
    const MAC = '52:54:00:aa:bb:09';
    const waiting = (
      await api(
        'metal.enroll',
        enrollInput({ name: 'r12-u09', productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e39', macs: [] }),
      )
    ).id;
    await api('metal.manage', { machineId: waiting });
    await report((await bmcCommand()).id, { powerState: 'off' });
    const inspecting = await api('metal.inspect', { machineId: waiting });
    for (let i = 0; i < 3; i++) await compute.runDueJobs();
    const workflow = await api('workflows.get', { workflowId: inspecting.workflowId });
    expect(workflow).toMatchObject({ state: 'running', currentStep: 0 });
    expect(workflow.steps[0].name).toContain('metal.ensureRamdisk');
    const { rows: none } = await sql`select id from compute.commands
      where workflow_id = ${inspecting.workflowId}`.execute(db);
    expect(none).toEqual([]);
    // Confirmed, its MAC boots the ramdisk; once the agent applied it, the machine is powered off.
    await api('metal.confirmMac', { machineId: waiting, mac: MAC });
    const { rows } = await sql<{ id: string; payload: any }>`
      select id, payload from compute.commands
      where node_id = ${agent.nodeId} and kind = 'metal.boot-entries' order by seq desc limit 1`.execute(db);
    expect(rows[0]!.payload.entries).toContainEqual({ mac: MAC, boot: 'ramdisk', purpose: 'inspect' });
    await report(rows[0]!.id, { entries: 2, ramdisks: 1, removed: 0 });
    const off = await bmcCommand();
    expect(off.payload).toMatchObject({ machineId: waiting, action: 'off' });
    expect((await api('metal.abort', { machineId: waiting })).provisionState).toBe('inspect failed');
    await api('metal.retire', { machineId: waiting });
  });

  it('a BMC call nobody answers fails its step after its timeout, and the agent is told to drop it', async () => {
    await api('metal.power', { machineId, action: 'status' });
    const status = await bmcCommand();
    await advanceCommand(db, agent.nodeId, status.id, { state: 'sent', at: new Date() });
    skewMs = 121_000;
    try {
      // The workflows' jobs alone: the fleet's controller, 121 s on, would find the agent silent.
      for (let i = 0; i < 3; i++) await compute.runDueJobs([WORKFLOW_JOB]);
      expect(await machine()).toMatchObject({
        provisionState: 'manageable',
        lastError: `command ${status.id} (metal.bmc) did not answer within 120 s`,
      });
      const { rows } = await sql<{ cancel_requested: boolean }>`
        select cancel_requested from compute.commands where id = ${status.id}`.execute(db);
      expect(rows[0]!.cancel_requested).toBe(true);
    } finally {
      skewMs = 0;
    }
  });

  it('provide boots the ramdisk to clean: available with what it erased, clean failed when a disk fails, abortable', async () => {
    const MAC = '52:54:00:aa:bb:01';
    const uuid = '4c4c4544-0042-3510-8052-b4c04f4a4e31';
    const erased = {
      systemUuid: uuid,
      disks: [{ name: 'nvme0n1', sizeBytes: 3840755982336, partitions: 2, erasedBytes: 3 * 1024 * 1024 }],
      failed: null,
    };
    /** Provide, up to the ramdisk booted: the entry applied, the machine off, then on from the network. */
    async function cleaningStarted() {
      expect((await api('metal.provide', { machineId })).provisionState).toBe('cleaning');
      const ramdisk = (await latestEntries())!;
      expect(ramdisk.payload.entries).toContainEqual({ mac: MAC, boot: 'ramdisk', purpose: 'clean' });
      await report(ramdisk.id, { entries: 1, ramdisks: 1, removed: 0 });
      const off = await bmcCommand();
      expect(off.payload.action).toBe('off');
      return off;
    }
    // Aborted while it powers the machine off: clean failed, the command cancelled, the disk boots again.
    const off = await cleaningStarted();
    const aborted = await api('metal.abort', { machineId, reason: 'wrong rack' });
    expect(aborted.provisionState).toBe('clean failed');
    expect(
      (await sql<{ state: string }>`select state from compute.commands where id = ${off.id}`.execute(db))
        .rows[0]!.state,
    ).toBe('cancelled');
    expect((await latestEntries())!.payload.entries).toContainEqual({ mac: MAC, boot: 'local-disk' });
    expect((await api('metal.recover', { machineId })).provisionState).toBe('manageable');
    // A report of the wrong purpose, or while the machine is not cleaning, records nothing.
    const at = new Date();
    expect((await recordCleaning(db, agent.nodeId, { mac: MAC, cleaning: erased }, at)).outcome).toBe(
      'refused',
    );
    // The ramdisk says a disk failed the write: clean failed, with its words.
    await report((await cleaningStarted()).id, { powerState: 'off' });
    await report((await bmcCommand()).id, { powerState: 'on' });
    const failing = { ...erased, failed: 'writing the start of nvme0n1 failed' };
    expect(await recordCleaning(db, agent.nodeId, { mac: MAC, cleaning: failing }, new Date())).toEqual({
      outcome: 'recorded',
      machineId,
    });
    for (let i = 0; i < 3; i++) await compute.runDueJobs();
    expect(await machine()).toMatchObject({
      provisionState: 'clean failed',
      lastError: 'the deploy ramdisk could not clean the disks: writing the start of nvme0n1 failed',
      cleaning: failing,
    });
    await api('metal.recover', { machineId });
    // Cleaned: off again, available, with what was erased and its event.
    await report((await cleaningStarted()).id, { powerState: 'off' });
    await report((await bmcCommand()).id, { powerState: 'on' });
    const foreign = { ...erased, systemUuid: '11111111-2222-3333-4444-555555555555' };
    expect(
      (await recordCleaning(db, agent.nodeId, { mac: MAC, cleaning: foreign }, new Date())).outcome,
    ).toBe('refused');
    const cleanedAt = new Date();
    expect((await recordCleaning(db, agent.nodeId, { mac: MAC, cleaning: erased }, cleanedAt)).outcome).toBe(
      'recorded',
    );
    const last = await bmcCommand();
    expect(last.payload.action).toBe('off');
    await report(last.id, { powerState: 'off' });
    expect(await machine()).toMatchObject({
      provisionState: 'available',
      allowed: ['retire', 'power'],
      cleaning: erased,
      cleanedAt: cleanedAt.toISOString(),
      lastError: null,
    });
    expect((await latestEntries())!.payload.entries).toContainEqual({ mac: MAC, boot: 'local-disk' });
    const events = await api('events.list', { type: 'metal.cleaned' });
    expect(events.items.map((e: any) => e.data)).toEqual([
      expect.objectContaining({ mac: MAC, disks: 1, erasedBytes: 3 * 1024 * 1024, failed: failing.failed }),
      expect.objectContaining({ mac: MAC, disks: 1, erasedBytes: 3 * 1024 * 1024 }),
    ]);
    expect(events.items[1].data.failed).toBeUndefined();
  });

  it('power records what the BMC answered; a second call while one runs is CONFLICT', async () => {
    const started = await api('metal.power', { machineId, action: 'on' });
    expect(started.provisionState).toBe('available');
    expect((await fails('metal.power', { machineId, action: 'status' })).code).toBe('CONFLICT');
    // A verb waits for it too: retiring now would race the BMC call.
    expect((await fails('metal.retire', { machineId })).code).toBe('CONFLICT');
    const on = await bmcCommand();
    expect(on.payload.action).toBe('on');
    await report(on.id, { powerState: 'on' });
    expect((await machine()).powerState).toBe('on');
    await api('metal.power', { machineId, action: 'off' });
    await report((await bmcCommand()).id, null, 'the BMC did not answer in time');
    expect(await machine()).toMatchObject({
      powerState: 'on',
      lastError: expect.stringContaining('failed: the BMC did not answer in time'),
    });
    const events = await eventually(
      () => api('events.list', { type: 'metal.powered' }),
      (page) => page.items.length >= 3,
    );
    // The status call that timed out (the test before) kept the power state it had.
    expect(events.items.map((e: any) => [e.data.action, e.data.powerState])).toEqual([
      ['status', 'off'],
      ['on', 'on'],
      ['off', 'on'],
    ]);
  });

  it('retire ends the lifecycle; a retired machine is provided never again', async () => {
    const retired = await api('metal.retire', { machineId, reason: 'end of life' });
    expect(retired.provisionState).toBe('retired');
    expect((await fails('metal.provide', { machineId })).message).toBe(
      `machine ${machineId} is retired; provide needs manageable`,
    );
    const changes = await eventually(
      () => api('events.list', { type: 'metal.state-changed', limit: 100 }),
      (page) => page.items.some((e: any) => e.subject.id === machineId && e.data.to === 'retired'),
    );
    expect(
      changes.items
        .filter((e: any) => e.subject.id === machineId)
        .map((e: any) => `${e.data.from}>${e.data.to}`),
    ).toEqual([
      'enroll>verifying',
      'verifying>enroll failed',
      'enroll failed>enroll',
      'enroll>verifying',
      'verifying>manageable',
      'manageable>inspecting',
      'inspecting>manageable',
      'manageable>inspecting',
      'inspecting>inspect failed',
      'inspect failed>manageable',
      'manageable>cleaning',
      'cleaning>clean failed',
      'clean failed>manageable',
      'manageable>cleaning',
      'cleaning>clean failed',
      'clean failed>manageable',
      'manageable>cleaning',
      'cleaning>available',
      'available>retired',
    ]);
  });

  it('the password is in no event, audit row, command, workflow or job', async () => {
    const dump = JSON.stringify([
      (await sql`select * from compute.audit_events`.execute(db)).rows,
      (await sql`select * from compute.events`.execute(db)).rows,
      (await sql`select * from compute.commands`.execute(db)).rows,
      (await sql`select * from compute.workflows`.execute(db)).rows,
      (await sql`select * from compute.jobs`.execute(db)).rows,
      (await sql`select * from compute.metal_machines`.execute(db)).rows,
    ]);
    expect(dump).toContain(machineId);
    expect(dump).not.toContain(PASSWORD);
    const audit = await sql<{ method: string; action: string }>`
      select method, action from compute.audit_events where method like 'metal.%'`.execute(db);
    expect(audit.rows).toContainEqual({ method: 'metal.enroll', action: 'compute:nodes:provision' });
    expect(audit.rows).toContainEqual({ method: 'metal.retire', action: 'compute:nodes:provision' });
  });
});

describe('without a site agent', () => {
  it('manage says the site has no agent and changes nothing', async () => {
    const database = await createTestDatabase('pglite');
    const compute = await betterCompute(
      { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false, secret: SECRET },
      { log: () => {} },
    );
    try {
      await compute.migrate();
      const site = (await call(compute, 'sites.create', { name: 'lonely' }, { token: ACME })).body
        .data as any;
      const enrolled = (
        await call(
          compute,
          'metal.enroll',
          {
            siteId: site.id,
            name: 'm1',
            bmcDriver: 'ipmi',
            bmcAddress: '10.0.0.8',
            bmcUser: 'admin',
            bmcPassword: PASSWORD,
            productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e32',
          },
          { token: ACME },
        )
      ).body.data as any;
      const refused = (await call(compute, 'metal.manage', { machineId: enrolled.id }, { token: ACME })).body
        .error!;
      expect(refused.code).toBe('INVALID_STATE');
      expect(refused.message).toBe(`site ${site.id} has no ready site agent to reach the BMC`);
      expect(
        ((await call(compute, 'metal.get', { machineId: enrolled.id }, { token: ACME })).body.data as any)
          .provisionState,
      ).toBe('enroll');
    } finally {
      await compute.close();
      await database.close();
    }
  });
});

describe.each(kinds)('while the destructive-batch quorum is on (%s)', (kind) => {
  it('power off and reset are refused with nothing sent; status still runs; off runs through an approved batch', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bc-metal-quorum-'));
    const path = join(dir, 'pki.json');
    const bundle = await createPkiBundle({ path, secret: SECRET, trustDomain: 'compute.example.com' });
    const approverFiles = [generateApproverKey(), generateApproverKey()];
    const keys = approverFiles.map((files) => ({
      kid: files.kid,
      publicKey: encodePublicKey(createPublicKey(createPrivateKey(files.privatePem))),
    }));
    const document = JSON.parse(readFileSync(path, 'utf8'));
    document.approvers = [
      {
        set: {
          trustDomain: bundle.trustDomain,
          epoch: 1,
          threshold: 2,
          approvers: keys.sort((a, b) => (a.kid < b.kid ? -1 : 1)),
        },
        signatures: [],
      },
    ];
    writeFileSync(path, JSON.stringify(document, null, 2), { mode: 0o600 });
    const database = await createTestDatabase(kind);
    const compute = await betterCompute(
      { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false, secret: SECRET, pki: path },
      { log: () => {} },
    );
    const api = async (method: string, body: Record<string, unknown>) => {
      const { body: answer } = await call(compute, method, body, { token: ACME });
      return answer;
    };
    try {
      await compute.migrate();
      const siteId = ((await api('sites.create', { name: 'q' })).data as any).id;
      const poolId = (
        (await api('pools.create', { siteId, name: 'qa', class: 'gpu', driver: 'sim' })).data as any
      ).id;
      const { token } = (await api('siteTokens.create', { poolId, preApproved: true })).data as any;
      const joined = (await call(compute, 'nodes.join', { joinToken: token, hostname: 'qa', inventory }, {}))
        .body.data as any;
      await call(compute, 'nodes.heartbeat', { nodeCredential: joined.nodeCredential }, {});
      const machineId = (
        (
          await api('metal.enroll', {
            siteId,
            name: 'q1',
            bmcDriver: 'ipmi',
            bmcAddress: '10.0.0.9',
            bmcUser: 'admin',
            bmcPassword: PASSWORD,
            productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e39',
          })
        ).data as any
      ).id;
      // Stand in for the agent: manage and provide land where the table says once their commands succeed.
      const db = database.db as Kysely<ComputeTables>;
      const settle = async () => {
        for (let i = 0; i < 40; i++) {
          await compute.runDueJobs();
          const { rows } = await sql<{ id: string }>`
            select id from compute.commands where kind = 'metal.bmc' and state = 'queued'`.execute(db);
          for (const row of rows) {
            await advanceCommand(db, joined.nodeId, row.id, { state: 'sent', at: new Date() });
            await advanceCommand(db, joined.nodeId, row.id, {
              state: 'succeeded',
              at: new Date(),
              exitCode: null,
              stdout: '',
              stderr: '',
              result: { powerState: 'off' },
              error: null,
            });
          }
          const m = (await api('metal.get', { machineId })).data as any;
          if (
            m.targetState === null &&
            (await sql`select 1 from compute.workflows where state = 'running'`.execute(db)).rows.length === 0
          )
            return m;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        throw new Error('the machine did not settle');
      };
      await api('metal.manage', { machineId });
      expect((await settle()).provisionState).toBe('manageable');
      const commands = async () =>
        Number((await sql<{ n: string }>`select count(*) as n from compute.commands`.execute(db)).rows[0]!.n);
      const before = await commands();
      for (const action of ['off', 'reset']) {
        const refused = (await api('metal.power', { machineId, action })).error!;
        expect(refused.code).toBe('INVALID_STATE');
        expect(refused.message).toBe(
          `power ${action} of machine ${machineId} needs an approved batch while the destructive-batch quorum is on`,
        );
      }
      expect(await commands()).toBe(before);
      expect(((await api('metal.power', { machineId, action: 'status' })).data as any).workflowId).toMatch(
        /^wf_/,
      );
      expect((await settle()).powerState).toBe('off');

      // The refusal names the leaf to propose: this machine, the action, the site agent, the BMC.
      const refusal = (await api('metal.power', { machineId, action: 'off' })).error!;
      const leaf = (refusal as any).details.leaf;
      expect(leaf).toEqual({
        subject: machineId,
        kind: 'metal.bmc-power',
        payload: {
          action: 'off',
          runner: joined.nodeId,
          bmc: expect.stringMatching(/^ipmi:\/\/10\.0\.0\.9/),
        },
      });
      const batches = async () =>
        Number(
          (await sql<{ n: string }>`select count(*) as n from compute.command_batches`.execute(db)).rows[0]!
            .n,
        );
      // A leaf for another runner or another BMC is refused, and nothing is created.
      const held = await commands();
      const otherRunner = await api('commandBatches.create', {
        reason: 'rack 3 power off',
        hours: 2,
        leaves: [{ ...leaf, payload: { ...leaf.payload, runner: machineId } }],
      });
      expect(otherRunner.error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `leaf 0: ${machineId} is not a site agent of site ${siteId}, where machine ${machineId} is`,
      });
      const otherBmc = await api('commandBatches.create', {
        reason: 'rack 3 power off',
        hours: 2,
        leaves: [{ ...leaf, payload: { ...leaf.payload, bmc: 'ipmi://10.0.0.10' } }],
      });
      expect(otherBmc.error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `leaf 0: machine ${machineId}'s BMC is ${leaf.payload.bmc}, not the ipmi://10.0.0.10 the leaf names`,
      });
      expect(await batches()).toBe(0);
      expect(await commands()).toBe(held);

      // The batch holds a metal.bmc on the site agent; nothing is delivered until a threshold signs.
      const batch = (
        await api('commandBatches.create', { reason: 'rack 3 power off', hours: 2, leaves: [leaf] })
      ).data as any;
      expect(batch).toMatchObject({ state: 'pending', size: 1, approvalsNeeded: 2 });
      const member = (await sql<any>`select * from compute.commands where batch_id = ${batch.id}`.execute(db))
        .rows;
      expect(member).toHaveLength(1);
      expect(member[0]).toMatchObject({
        node_id: joined.nodeId,
        kind: 'metal.bmc',
        held: true,
        state: 'queued',
      });
      const memberPayload =
        typeof member[0].payload === 'string' ? JSON.parse(member[0].payload) : member[0].payload;
      expect(memberPayload).toMatchObject({
        machineId,
        action: 'off',
        bmc: { driver: 'ipmi', address: '10.0.0.9' },
      });
      expect(JSON.stringify(memberPayload)).not.toContain(PASSWORD);
      const delivered = async () =>
        (await openCommands(db, [joined.nodeId])).filter((row) => row.batch_id === batch.id);
      expect(await delivered()).toEqual([]);

      const statement = {
        batchId: batch.id,
        trustDomain: batch.trustDomain,
        root: fromHex(batch.root, 32)!,
        size: batch.size,
        notAfter: Date.parse(batch.notAfter),
      };
      const approve = (files: (typeof approverFiles)[number]) =>
        api('commandBatches.approve', {
          batchId: batch.id,
          kid: files.kid,
          signature: signApproval(createPrivateKey(files.privatePem), statement).signature,
        });
      expect(((await approve(approverFiles[0]!)).data as any).state).toBe('pending');
      expect(await delivered()).toEqual([]);
      expect(((await approve(approverFiles[1]!)).data as any).state).toBe('approved');
      const released = await delivered();
      expect(released.map((row) => [row.id, row.kind, row.held])).toEqual([
        [member[0].id, 'metal.bmc', false],
      ]);

      // What the gateway sends with it passes the site agent's check (core's, as bcd runs it) for
      // this agent, and fails for the same command to another machine.
      const attached = (await quorumAttachments(db, released)).get(member[0].id);
      const set = readApproverSet(document.approvers[0].set);
      const envelope = {
        id: member[0].id,
        nodeId: joined.nodeId,
        kind: 'metal.bmc',
        payload: { ...memberPayload, bmc: { ...memberPayload.bmc, password: PASSWORD } },
        issuedAt: new Date().toISOString(),
        expiresAt: new Date(Date.now() + 600_000).toISOString(),
      };
      expect(checkCommandQuorum(set, envelope, attached, Date.now()).refusal).toBeNull();
      expect(
        checkCommandQuorum(
          set,
          { ...envelope, payload: { ...envelope.payload, machineId: joined.nodeId } },
          attached,
          Date.now(),
        ).refusal,
      ).toMatch(/^the command is not in batch batch_\w+'s scope/);

      // Inspect and provide power the machine off first: while its power is not known to be off they
      // are refused before anything starts, naming the power-off leaf to propose.
      const agentTenant = (
        await sql<{
          tenant_id: string;
        }>`select tenant_id from compute.nodes where id = ${joined.nodeId}`.execute(db)
      ).rows[0]!.tenant_id;
      await recordNodeSession(db, {
        nodeId: joined.nodeId,
        tenantId: agentTenant,
        gatewayId: 'gw_test',
        at: new Date(),
        hello: { version: '0.1.0', capabilities: ['site.agent', 'site.pxe'] },
      });
      await sql`update compute.metal_machines set power_state = 'on' where id = ${machineId}`.execute(db);
      const beforeInspect = await commands();
      for (const verb of ['inspect', 'provide']) {
        const refused = (await api(`metal.${verb}`, { machineId })).error! as any;
        expect(refused.code).toBe('INVALID_STATE');
        expect(refused.message).toBe(
          `${verb} of machine ${machineId} powers it off first, and its power is on: while the destructive-batch quorum is on, power it off through an approved batch first`,
        );
        expect(refused.details.leaf).toEqual(leaf);
      }
      expect(await commands()).toBe(beforeInspect);
      expect(((await api('metal.get', { machineId })).data as any).provisionState).toBe('manageable');
      // Off already, the agent powers it off without a batch: inspect starts.
      await sql`update compute.metal_machines set power_state = 'off' where id = ${machineId}`.execute(db);
      expect(((await api('metal.inspect', { machineId })).data as any).provisionState).toBe('inspecting');
    } finally {
      await compute.close();
      await database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
