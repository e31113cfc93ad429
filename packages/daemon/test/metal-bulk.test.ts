/**
 * `metal bulk` through the destructive-batch quorum with real parts (docs/decisions/metal-bulk.md):
 * a server (roles api, controllers, gateway) whose PKI bundle names a 2-of-3 approver set installed
 * by `pki approvers`, a real `bcd` joined with a site token (the site's agent, which pins the set),
 * three machines each behind its own Redfish BMC over HTTPS (the suite's emulator, certificate
 * pinned), and the real `better-compute` binary for every step people take (the token only in the
 * environment). A bulk power-off of the three, from a --nodes-file with a comment and a repeated
 * id, is one batch with the reason given; one approval holds it and no BMC is asked; a second,
 * signed offline from `batch show --scope-out` with `batch sign` and submitted with `batch approve
 * --signature`, releases it: the agent checks each member's approvals, each BMC is powered off
 * exactly once, and each machine's powerState becomes off from its member's answer.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import {
  bcd,
  bcdJoin,
  daemonConnected,
  type Deployment,
  deployment,
  type Proc,
  until,
} from './daemon-support.js';
import {
  certificateAuthority,
  type RedfishEmulator,
  serverCertificate,
  startRedfishEmulator,
  stateBackend,
} from './metal/redfish-emulator.js';
import { cliIn, rootCall, serveHere } from './served-support.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 180_000 });

const secret = 'the metal bulk test deployment secret';
const TRUST_DOMAIN = 'metal-bulk.test';
const BMC_USER = 'admin';
const BMC_PASSWORD = 'bulk-bmc-pw-4d2a9c';
const scratch = mkdtempSync(join(tmpdir(), 'bcd-metal-bulk-'));
const pkiPath = join(scratch, 'pki.json');

let env: Deployment;
let url = '';
let stopServer: (() => Promise<void>) | undefined;
let daemon: Proc | undefined;
let agentId = '';
const bmcs: { emulator: RedfishEmulator; backend: ReturnType<typeof stateBackend>; machineId: string }[] = [];
let batch: any;

const served = () => ({ url, rootKey: env.rootKey });
const { cli, cliJson } = cliIn(scratch, served);

/** A call to the served API as the root administrator (the served deployment seals BMC passwords). */
async function api<T = any>(method: string, body: Record<string, unknown>): Promise<T> {
  const answer = await rootCall(served(), method, body);
  if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
  return answer.data as T;
}

const members = async (batchId: string) =>
  (await cliJson<{ items: any[] }>(['batch', 'members', '--batch', batchId])).items;
const resets = () => bmcs.map((b) => [...b.backend.resets]);

beforeAll(async () => {
  env = await deployment();
  for (const name of ['k1', 'k2', 'k3'])
    await cliJson(['batch', 'keygen', '--out', `${name}.pem`], { offline: true });
  await createPkiBundle({ path: pkiPath, secret, trustDomain: TRUST_DOMAIN });
  await cliJson(
    [
      'pki',
      'approvers',
      '--pki',
      pkiPath,
      '--threshold',
      '2',
      ...['k1', 'k2', 'k3'].flatMap((k) => ['--pub', `${k}.pem.pub`]),
    ],
    { offline: true },
  );

  const server = await serveHere({ database: env.database.url!, pki: pkiPath, secret, rateLimit: false });
  url = server.url;
  stopServer = server.stop;

  // The site's agent: bcd joined with a site token; it pins the approver set at its first welcome.
  const site = await api('sites.create', { name: 'bulk-rack' });
  const pool = await api('pools.create', { siteId: site.id, name: 'bulk-agents', class: 'vps' });
  const { token } = await api('siteTokens.create', { poolId: pool.id, preApproved: true });
  const dir = join(scratch, 'agent');
  mkdirSync(dir, { recursive: true });
  const stateDir = join(dir, 'state');
  const joined = await bcdJoin(url, token, dir, stateDir);
  agentId = JSON.parse(joined.out[0]!).nodeId;
  daemon = bcd(['run', '--state-dir', stateDir, '--scripts-dir', dir, '--ssh-dir', join(dir, 'ssh')]);
  await daemonConnected(stateDir);
  await until('the agent to pin the approver set', async () =>
    daemon!.err.some((line) => line.includes('pinned the approver set of epoch 1 (2 of 3)')),
  );
  await until(
    'the agent to be ready',
    async () => (await api('nodes.get', { nodeId: agentId })).state === 'ready',
  );

  // Three machines, each behind its own Redfish BMC (one certificate, pinned), powered on.
  const issued = await serverCertificate(await certificateAuthority());
  for (const n of [1, 2, 3]) {
    const backend = stateBackend();
    backend.power = 'On';
    const emulator = await startRedfishEmulator({
      username: BMC_USER,
      password: BMC_PASSWORD,
      backend,
      tls: issued,
    });
    const machine = await api('metal.enroll', {
      siteId: site.id,
      name: `bulk-${n}`,
      bmcDriver: 'redfish',
      bmcAddress: '127.0.0.1',
      bmcPort: Number(new URL(emulator.url).port),
      bmcUser: BMC_USER,
      bmcPassword: BMC_PASSWORD,
      bmcTlsFingerprint: issued.fingerprint,
      productUuid: `6a1f0c1a-5b2d-4c8e-9f10-2a3b4c5d6f0${n}`,
    });
    bmcs.push({ emulator, backend, machineId: machine.id });
    await api('metal.manage', { machineId: machine.id });
  }
  for (const { machineId } of bmcs)
    await until(`${machineId} to be manageable`, async () => {
      const m = await api('metal.get', { machineId });
      if (m.provisionState === 'enroll failed') throw new Error(`manage failed: ${m.lastError}`);
      return m.provisionState === 'manageable' && m.powerState === 'on';
    });
  for (const b of bmcs) b.backend.resets.length = 0;
}, 180_000);

afterAll(async () => {
  daemon?.child.kill('SIGTERM');
  if (daemon)
    await Promise.race([daemon.exited, new Promise((resolve) => setTimeout(resolve, 10_000))]).then(() =>
      daemon!.child.kill('SIGKILL'),
    );
  for (const b of bmcs) await b.emulator.close();
  await stopServer?.();
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('metal bulk power-off through a 2-of-3 quorum', () => {
  it('metal power off alone is refused while the quorum is on', async () => {
    const refused = await cli(['metal', 'power', 'off', bmcs[0]!.machineId]);
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain(
      `INVALID_STATE: power off of machine ${bmcs[0]!.machineId} needs an approved batch while the destructive-batch quorum is on`,
    );
  });

  it('is one batch with the reason given; one approval holds it and no BMC is asked', async () => {
    const ids = bmcs.map((b) => b.machineId);
    writeFileSync(
      join(scratch, 'rack.txt'),
      `# the bulk rack, for its PDU swap\n${ids[0]}\n${ids[1]}\n\n${ids[2]}\n${ids[0]}\n`,
    );
    const created = await cli([
      'metal',
      'bulk',
      '--verb',
      'power-off',
      '--nodes-file',
      'rack.txt',
      '--reason',
      'power off the bulk rack for the PDU swap',
      '--hours',
      '2',
      '--format',
      'compact',
    ]);
    expect(created.status, created.stderr).toBe(0);
    const answer = JSON.parse(created.stdout);
    expect(answer).toMatchObject({ verb: 'power-off', mode: 'batch', machineIds: ids, machines: [] });
    batch = answer.batch;
    expect(batch).toMatchObject({
      state: 'pending',
      size: 3,
      approvalsNeeded: 2,
      trustDomain: TRUST_DOMAIN,
      reason: 'power off the bulk rack for the PDU swap',
    });
    expect(created.stderr).toContain(
      `Created batch ${batch.id}: 3 command(s) on 3 machine(s); 2 approval(s) needed before ${batch.notAfter}.`,
    );
    expect(created.stderr).toContain(`better-compute batch approve --batch ${batch.id} --key <approver key>`);
    // batch list sees it as it sees a hand-built one.
    const listed = await cliJson<{ items: any[] }>(['batch', 'list', '--state', 'pending']);
    expect(listed.items.map((b) => [b.id, b.reason, b.size])).toEqual([
      [batch.id, 'power off the bulk rack for the PDU swap', 3],
    ]);

    const first = await cliJson(['batch', 'approve', '--batch', batch.id, '--key', 'k1.pem', '--yes']);
    expect(first).toMatchObject({ state: 'pending' });
    // A status call on the agent after the approval: the gateway has had its pass over the agent's
    // open commands since, and a member it held would have gone out.
    const status = await api('metal.power', { machineId: bmcs[0]!.machineId, action: 'status' });
    await until('the status workflow', async () => {
      const wf = await api('workflows.get', { workflowId: status.workflowId });
      return wf.state === 'succeeded';
    });
    const held = await members(batch.id);
    expect(held.map((m) => [m.nodeId, m.kind, m.payload.machineId, m.awaitingApproval, m.state])).toEqual(
      ids.map((id) => [agentId, 'metal.bmc', id, true, 'queued']),
    );
    expect(resets()).toEqual([[], [], []]);
    expect(bmcs.map((b) => b.backend.power)).toEqual(['On', 'On', 'On']);
  });

  it('a second approval, signed offline from the scope file, releases it: each BMC is powered off once and each machine reads off', async () => {
    const shown = await cliJson(['batch', 'show', '--batch', batch.id, '--scope-out', 'scope.json']);
    expect(shown).toMatchObject({ batchId: batch.id, root: batch.root, size: 3 });
    const signed = await cli(
      ['batch', 'sign', '--key', 'k2.pem', '--scope', 'scope.json', '--out', 'approval.json'],
      {
        offline: true,
      },
    );
    expect(signed.status, signed.stderr).toBe(0);
    const approved = await cliJson(['batch', 'approve', '--batch', batch.id, '--signature', 'approval.json']);
    expect(approved).toMatchObject({ state: 'approved' });
    expect(approved.approvals).toHaveLength(2);

    const ended = await until(
      'the members to end',
      async () => {
        const items = await members(batch.id);
        return items.every((m) => ['succeeded', 'failed', 'cancelled'].includes(m.state)) && items;
      },
      45_000,
    );
    expect(ended.map((m) => [m.payload.machineId, m.state, m.error])).toEqual(
      bmcs.map((b) => [b.machineId, 'succeeded', null]),
    );
    expect(
      daemon!.err.filter((line) => line.includes("(metal.bmc) carries its batch's approvals")),
    ).toHaveLength(3);
    // The machine's power state follows each member's answer, as after a direct power call.
    for (const { machineId } of bmcs)
      await until(
        `${machineId} to read off`,
        async () => (await api('metal.get', { machineId })).powerState === 'off',
      );
    expect(bmcs.map((b) => b.backend.power)).toEqual(['Off', 'Off', 'Off']);
    expect(resets()).toEqual([['ForceOff'], ['ForceOff'], ['ForceOff']]);
    const events = await api('events.list', { type: 'metal.powered', limit: 50 });
    expect(
      events.items
        .filter((e: any) => e.data.batchId === batch.id)
        .map((e: any) => e.subject.id)
        .sort(),
    ).toEqual(bmcs.map((b) => b.machineId).sort());
    // Once each, still, after the gateway has had more passes.
    const status = await api('metal.power', { machineId: bmcs[1]!.machineId, action: 'status' });
    await until('a later status workflow', async () => {
      const wf = await api('workflows.get', { workflowId: status.workflowId });
      return wf.state === 'succeeded';
    });
    expect(resets()).toEqual([['ForceOff'], ['ForceOff'], ['ForceOff']]);
    const logs = [...daemon!.out, ...daemon!.err].join('\n');
    expect(logs).not.toContain(BMC_PASSWORD);
  });
});
