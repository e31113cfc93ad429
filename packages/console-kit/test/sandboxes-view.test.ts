/**
 * The Sandboxes view against a real server with simulated VPS machines: the templates and the
 * person's sandboxes read, a sandbox created from a template (running within the create's wait),
 * its row with the template's name and exec command, +30 min, a snapshot on a deployment without a
 * snapshot store (INVALID_CONFIG, remembered), Everyone's sandboxes, and delete; and the pure parts
 * (rows of a restore that still answers to its source's identity, the countdown).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPkiBundle, startSimulatedFleet } from 'better-compute';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createSandboxesView,
  sandboxCountdown,
  sandboxRow,
  sandboxSecondsLeft,
  SANDBOX_EXTEND_SECONDS,
  type Sandbox,
} from '../src/index.js';
import { KIT_SECRET, startKitServer, type KitServer } from './kit-server.js';

let kit: KitServer;
let fleet: Awaited<ReturnType<typeof startSimulatedFleet>>;
let templateId: string;
const work = mkdtempSync(join(tmpdir(), 'kit-sandboxes-'));

beforeAll(async () => {
  // Sandboxes are certified by the deployment's sandbox SSH CA: a PKI bundle sealed with its secret.
  const pki = join(work, 'pki.json');
  await createPkiBundle({ path: pki, secret: KIT_SECRET });
  // No snapshot store: snapshot answers INVALID_CONFIG, which the view remembers.
  kit = await startKitServer({ pki, sandboxes: { snapshots: false } }, ['api', 'controllers']);
  fleet = await startSimulatedFleet(kit.compute, {
    nodes: 1,
    token: kit.token,
    poolName: 'kit-vps',
    poolClass: 'vps',
    withoutGpus: true,
  });
  const flavor = await kit.client.flavors.create({
    poolId: fleet.poolId,
    name: 'small',
    vcpus: 1,
    memoryMiB: 512,
    diskGiB: 2,
  });
  const image = await kit.client.images.register({
    name: 'debian-12',
    source: 'https://images.example.com/debian-12.qcow2',
    diskFormat: 'qcow2',
    sha256: 'd'.repeat(64),
    sizeBytes: 2 ** 30,
    os: 'debian',
  });
  templateId = (
    await kit.client.sandboxTemplates.create({
      name: 'agent',
      poolId: fleet.poolId,
      flavorId: flavor.id,
      imageId: image.id,
      warmMin: 0,
      warmMax: 0,
    })
  ).id;
}, 120_000);

afterAll(async () => {
  await fleet?.stop();
  await kit?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('createSandboxesView', () => {
  it('creates from a template, shows the row by the template’s name, extends, remembers snapshots are off, and deletes', async () => {
    const keys: string[] = [];
    const view = createSandboxesView(kit.client, {
      tenantId: 'root',
      idempotencyKey: () => {
        keys.push(`console-test-${keys.length}`);
        return keys.at(-1)!;
      },
    });
    await view.load();
    expect(view.templates.get().items.map((t) => t.name)).toEqual(['agent']);
    expect(view.sandboxes.get().items).toEqual([]);

    const made = await view.create(templateId);
    expect(keys).toEqual(['console-test-0']);
    expect(made.state).toBe('running');
    const row = view.rows().find((r) => r.id === made.id)!;
    expect(row).toMatchObject({
      templateName: 'agent',
      warm: false,
      live: true,
      identityRebound: true,
      execCommand: `better-compute sandbox exec ${made.id}`,
    });

    const before = Date.parse(made.expiresAt!);
    const extended = await view.extend(made.id);
    expect(Date.parse(extended.expiresAt!) - before).toBe(SANDBOX_EXTEND_SECONDS * 1000);
    expect(view.sandboxes.get().items.find((s) => s.id === made.id)!.expiresAt).toBe(extended.expiresAt);

    expect(view.snapshotsOff.get()).toBe(false);
    await expect(view.snapshot(made.id)).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    expect(view.snapshotsOff.get()).toBe(true);

    await view.setScope('all');
    expect(view.scope.get()).toBe('all');
    expect(view.sandboxes.get().items.map((s) => s.id)).toContain(made.id);

    const deleted = await view.remove(made.id);
    expect(['deleting', 'deleted']).toContain(deleted.state);
    expect(view.rows().find((r) => r.id === made.id)!.live).toBe(false);
  }, 60_000);

  it('a template that is not the tenant’s is NOT_FOUND, and nothing is added', async () => {
    const view = createSandboxesView(kit.client, { tenantId: 'root' });
    await view.load();
    const count = view.sandboxes.get().items.length;
    await expect(view.create('sbxt_01k5w9z3d8e4f5g6h7j8k9m0n1')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(view.sandboxes.get().items.length).toBe(count);
  });
});

describe('the rows and the countdown', () => {
  const base = {
    id: 'sbx_1',
    state: 'running',
    reason: null,
    templateId: 'sbt_1',
    warm: true,
    fromSnapshotId: 'snap_1',
    identityRebound: false,
    expiresAt: '2026-12-07T10:00:30.000Z',
  } as unknown as Sandbox;

  it('carries whether a restore still answers to its source’s identity, and names an unknown template by id', () => {
    expect(sandboxRow(base, new Map())).toMatchObject({
      templateName: 'sbt_1',
      identityRebound: false,
      fromSnapshotId: 'snap_1',
      live: true,
    });
    expect(
      sandboxRow({ ...base, state: 'failed', reason: 'node\u0000 gone' } as Sandbox, new Map()),
    ).toMatchObject({
      live: false,
      execCommand: null,
    });
  });

  it('counts down to expired', () => {
    expect(sandboxSecondsLeft(base.expiresAt, Date.parse('2026-12-07T10:00:00Z'))).toBe(30);
    expect(sandboxSecondsLeft(base.expiresAt, Date.parse('2026-12-07T11:00:00Z'))).toBe(0);
    expect(sandboxSecondsLeft(null, 0)).toBeNull();
    expect(sandboxCountdown(3725)).toBe('1 h 2 min 05 s left');
    expect(sandboxCountdown(0)).toBe('expired');
  });
});
