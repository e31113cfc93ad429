/**
 * The guide's Capacity flow with real processes only: `better-compute dev --memory --port 0 --sim 4`
 * serves from a temporary directory with four simulated machines in pool `sim-gpu` (owned by root,
 * offered to acme); acme's administrator runs pools list, capacity, capacity --preview, reserve
 * --nvlink, reservations list/get, extend, release and events list through the real binary; 20
 * concurrent reserve runs with one --key give one reservation; SIGTERM stops the server (exit 0).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DevServer, type RunResult, type RunningServer, runCompute, startDev } from './support.js';

const work = mkdtempSync(join(tmpdir(), 'bc-capacity-'));
let server: RunningServer | undefined;
let url = '';
let token = '';
let poolId = '';
let dev: DevServer['dev'];

function compute(args: string[]): Promise<RunResult> {
  return runCompute(args, { cwd: work, url, token, timeoutMs: 30_000 });
}

beforeAll(async () => {
  ({ server, url, dev } = await startDev(work, ['--sim', '4']));
  const startup = server.output();
  poolId = /simulated fleet: 4 machine\(s\) in pool (pool_\w+) \(sim-gpu, offered to acme\)/.exec(
    startup,
  )![1]!;
  token = dev.acmeAdmin.apiKey;
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('the Capacity flow through the real binary against dev --sim 4', () => {
  let reservationId = '';

  it('dev names its accounts and prints none of their passwords or keys', () => {
    const startup = server!.output();
    for (const account of [dev.rootAdmin, dev.acmeAdmin, dev.acmeMember]) {
      expect(startup).toContain(account.email);
      expect(account.password.length).toBeGreaterThan(0);
      expect(startup).not.toContain(account.password);
      expect(startup).not.toContain(account.apiKey);
    }
  });

  it('pools list shows the simulated pools offered to acme', async () => {
    const result = await compute(['pools', 'list']);
    expect(result).toMatchObject({ status: 0, stderr: '' });
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+class\s+site\s+driver\s+state\s+owner\s+access$/);
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(
        new RegExp(`^${poolId}  sim-gpu  gpu\\s+site_\\w+  sim\\s+active  root\\s+offered$`),
      ),
      // dev --sim also starts a VPS pool of simulated machines, for instances.
      expect.stringMatching(/^pool_\w+  sim-vps  vps\s+site_\w+  sim\s+active  root\s+offered$/),
    ]);
  });

  it('capacity has a row for the pool and one per GPU model', async () => {
    const result = await compute(['capacity']);
    expect(result.status).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^pool\s+name\s+model\s+total\s+reserved\s+free\s+unavailable\s+queued$/);
    const all = lines[1]!.split(/\s+/);
    expect(all.slice(0, 3)).toEqual([poolId, 'sim-gpu', '*']);
    expect(Number(all[3])).toBeGreaterThan(0);
    expect(all[4]).toBe('0');
    expect(lines.length).toBeGreaterThan(2);
  });

  it('capacity --preview says whether it fits and where', async () => {
    const result = await compute([
      'capacity',
      '--preview',
      '--pool',
      poolId,
      '--gpus',
      '4',
      '--for',
      '1d',
      '--selector',
      'vramGiB >= 40',
      '--nvlink',
    ]);
    expect(result.status).toBe(0);
    const preview = JSON.parse(result.stdout);
    expect(preview).toMatchObject({ fits: true, queuedAhead: 0, reason: null });
    expect(preview.placement.length).toBeGreaterThan(0);
  });

  it('reserve --nvlink prints the key it used on stderr and the reservation on stdout', async () => {
    const result = await compute(['reserve', '--pool', poolId, '--gpus', '4', '--for', '8h', '--nvlink']);
    expect(result.status).toBe(0);
    expect(result.stderr).toMatch(/^idempotency key: cli-[0-9a-f-]{36}\n/);
    const reservation = JSON.parse(result.stdout);
    expect(reservation).toMatchObject({ state: 'active', gpus: 4, nvlink: true, tenantId: 'acme' });
    const domains = new Set(reservation.binding.map((b: { nvlinkDomain: string }) => b.nvlinkDomain));
    expect(domains.size).toBe(1);
    reservationId = reservation.id;
  });

  it('reservations list --state active --format table and reservations get --query binding', async () => {
    const list = await compute(['reservations', 'list', '--state', 'active', '--format', 'table']);
    expect(list.status).toBe(0);
    const lines = list.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^id\s+state\s+pool\s+gpus\s+nvlink\s+for\s+queue\s+health\s+endsAt\s+nodes\s+endReason\s+owner$/,
    );
    // The last column is the owner: acme's member, who reserved it.
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^${reservationId}  active  ${poolId}  4\\s+yes\\s+8h\\s+ok\\s+\\S+Z\\s+\\d+\\s+usr_[0-9a-z]{26}$`,
        ),
      ),
    ]);
    const binding = await compute(['reservations', 'get', reservationId, '--query', 'binding']);
    expect(binding.status).toBe(0);
    const nodes = JSON.parse(binding.stdout) as { nodeId: string; gpuIndices: number[] }[];
    expect(nodes.reduce((n, b) => n + b.gpuIndices.length, 0)).toBe(4);
    expect(nodes.every((b) => b.nodeId.startsWith('node_'))).toBe(true);
  });

  it('extend --by 4h, then release', async () => {
    const extended = await compute(['extend', reservationId, '--by', '4h', '--query', 'durationSeconds']);
    expect(extended).toMatchObject({ status: 0, stdout: `${12 * 3600}\n` });
    const released = await compute(['release', reservationId, '--format', 'compact']);
    expect(released.status).toBe(0);
    expect(JSON.parse(released.stdout)).toMatchObject({ state: 'ended', endReason: 'released' });
  });

  it('events list --type reservation. shows every transition', async () => {
    const result = await compute(['events', 'list', '--type', 'reservation.']);
    expect(result.status).toBe(0);
    const types = result.stdout
      .trimEnd()
      .split('\n')
      .slice(1)
      .map((line) => line.split(/\s+/)[1]);
    expect(types).toEqual(
      expect.arrayContaining(['reservation.created', 'reservation.activated', 'reservation.released']),
    );
    const dotted = await compute(['events', 'list', '--cursor', '184467.12']);
    expect(dotted.status).toBe(2);
    expect(dotted.stderr).toMatch(/^INVALID_ARGUMENT: --cursor must be an outbox position like 184467:12/);
  });

  it('20 concurrent reserve runs with one --key give one reservation', async () => {
    const key = `e2e-${Date.now()}-one-key`;
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        compute([
          'reserve',
          '--pool',
          poolId,
          '--gpus',
          '1',
          '--for',
          '1h',
          '--key',
          key,
          '--wait',
          '0',
          '--query',
          'id',
        ]),
      ),
    );
    for (const result of results) expect(result.stderr).toMatch(new RegExp(`^idempotency key: ${key}\n`));
    const ids = new Set(results.map((r) => r.stdout.trim()));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(0));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^rsv_/);
    const released = await compute(['release', [...ids][0]!, '--query', 'state']);
    expect(released.stdout).toBe('ended\n');
  }, 120_000);

  it('SIGTERM stops the server with exit 0', async () => {
    expect(await server!.stop()).toBe(0);
    server = undefined;
  });
});
