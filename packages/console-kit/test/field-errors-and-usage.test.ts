/**
 * The pure halves of the new pages' console-kit: a server refusal placed on the form's field (every
 * shape the API answers one in), the usage sums a chart draws (equal to the rows', no rounding
 * before the sum), the export's file name, and the node operations' state rules and questions.
 */
import { ComputeClientError } from '@better-compute/client';
import { describe, expect, it } from 'vitest';
import {
  capacityPoints,
  commandQuestion,
  commandText,
  fieldErrorsOf,
  gpuHours,
  isCommandCancellable,
  isWorkflowActionAllowed,
  usageExportName,
  seriesGroups,
  usageSeries,
  volumeDevicePath,
  volumeSerial,
  volumesWithAttached,
  volumesWithDetached,
  workflowProgress,
  type NodeCommand,
  type UsageRow,
} from '../src/index.js';

const FIELDS = ['name', 'region'] as const;

const row = (windowStart: string, poolId: string, gpuSeconds: number, tenantId = 'root'): UsageRow => ({
  windowStart,
  windowEnd: new Date(Date.parse(windowStart) + 3_600_000).toISOString(),
  tenantId,
  poolId,
  gpuModel: 'H100',
  gpuSeconds,
});

describe('fieldErrorsOf', () => {
  it.each([
    [
      'an INVALID_ARGUMENT issue on a field of the form',
      new ComputeClientError('INVALID_ARGUMENT', 'name: must be lowercase', {
        details: { issues: [{ path: ['name'], code: 'invalid_format', message: 'must be lowercase' }] },
      }),
      { fields: { name: 'must be lowercase' }, rest: null },
    ],
    [
      'a refusal naming its field in details.field',
      new ComputeClientError('NOT_FOUND', 'tenant nope does not exist', { details: { field: 'region' } }),
      { fields: { region: 'tenant nope does not exist' }, rest: null },
    ],
    [
      'ALREADY_EXISTS, on the name',
      new ComputeClientError('ALREADY_EXISTS', 'a site named a exists'),
      { fields: { name: 'a site named a exists' }, rest: null },
    ],
  ])('places %s', (_what, error, expected) => {
    expect(fieldErrorsOf(error, FIELDS, 'name')).toEqual(expected);
  });

  it('keeps for the whole form what no field can carry, beside what it placed', () => {
    const error = new ComputeClientError('INVALID_ARGUMENT', 'labels: too many', {
      details: {
        issues: [
          { path: ['labels'], message: 'too many' },
          { path: ['name'], message: 'must be lowercase' },
        ],
      },
    });
    expect(fieldErrorsOf(error, FIELDS, 'name')).toEqual({
      fields: { name: 'must be lowercase' },
      rest: error,
    });
    const denied = new ComputeClientError('ACCESS_DENIED', 'no');
    expect(fieldErrorsOf(denied, FIELDS, 'name')).toEqual({ fields: {}, rest: denied });
    expect(fieldErrorsOf(null, FIELDS)).toEqual({ fields: {}, rest: null });
  });
});

describe('fieldErrorsOf on a field inside a list', () => {
  const fields = ['volumes.1.path', 'volumes.1'] as const;
  it('places an issue at its longest named path, and a details.field naming the entry on the entry', () => {
    const badPath = new ComputeClientError('INVALID_ARGUMENT', 'volumes.1.path: must not contain ..', {
      details: { issues: [{ path: ['volumes', 1, 'path'], message: 'must not contain ..' }] },
    });
    expect(fieldErrorsOf(badPath, fields)).toEqual({
      fields: { 'volumes.1.path': 'must not contain ..' },
      rest: null,
    });
    const gone = new ComputeClientError('NOT_FOUND', 'sandbox volume vol_x does not exist', {
      details: { field: 'volumes.1', id: 'vol_x' },
    });
    expect(fieldErrorsOf(gone, fields)).toEqual({
      fields: { 'volumes.1': 'sandbox volume vol_x does not exist' },
      rest: null,
    });
    // Another entry's refusal, or the list as a whole, is not this form's field.
    const other = new ComputeClientError('INVALID_ARGUMENT', 'bad', { details: { field: 'volumes.0' } });
    expect(fieldErrorsOf(other, fields)).toEqual({ fields: {}, rest: other });
    const whole = new ComputeClientError('INVALID_ARGUMENT', 'two nodes', { details: { field: 'volumes' } });
    expect(fieldErrorsOf(whole, fields)).toEqual({ fields: {}, rest: whole });
  });
});

describe('capacityPoints', () => {
  const pool = { poolId: 'pool_a', name: 'a100s', total: 8, reserved: 0, unavailable: 2 };
  it('gives every begun hour of the period its reserved GPU-seconds, reserved and free GPUs on average', () => {
    const series = usageSeries([
      row('2026-01-01T00:00:00.000Z', 'pool_a', 7200),
      row('2026-01-01T00:00:00.000Z', 'pool_b', 99),
      row('2026-01-01T02:00:00.000Z', 'pool_a', 900),
    ]);
    // Half past two: the third hour has had 1,800 seconds.
    const now = Date.parse('2026-01-01T02:30:00.000Z');
    const points = capacityPoints(series, pool, '2026-01-01T00:00:00.000Z', '2026-01-01T03:00:00.000Z', now);
    expect(points).toEqual([
      {
        windowStart: '2026-01-01T00:00:00.000Z',
        windowEnd: '2026-01-01T01:00:00.000Z',
        seconds: 3600,
        gpuSeconds: 7200,
        reservedGpus: 2,
        freeGpus: 4,
      },
      {
        windowStart: '2026-01-01T01:00:00.000Z',
        windowEnd: '2026-01-01T02:00:00.000Z',
        seconds: 3600,
        gpuSeconds: 0,
        reservedGpus: 0,
        freeGpus: 6,
      },
      {
        windowStart: '2026-01-01T02:00:00.000Z',
        windowEnd: '2026-01-01T03:00:00.000Z',
        seconds: 1800,
        gpuSeconds: 900,
        reservedGpus: 0.5,
        freeGpus: 5.5,
      },
    ]);
    // Free never goes below 0 (today's pool may be smaller than yesterday's).
    const busy = usageSeries([row('2026-01-01T00:00:00.000Z', 'pool_a', 36_000)]);
    expect(
      capacityPoints(busy, pool, '2026-01-01T00:00:00.000Z', '2026-01-01T01:00:00.000Z', now)[0],
    ).toMatchObject({ reservedGpus: 10, freeGpus: 0 });
  });
});

describe('sandbox volumes', () => {
  const mounted = [
    { volumeId: 'vol_a', name: 'notes', path: '/notes', readOnly: true },
    { volumeId: 'vol_b', name: 'data', path: '/data', readOnly: false },
  ];
  it('gives the guest device path from the id, cut to the 20 bytes of a virtio serial', () => {
    expect(volumeSerial('vol_01k5w9z3d8e4f5g6h7j8k9m0n1')).toBe('01k5w9z3d8e4f5g6h7j8');
    expect(volumeDevicePath('vol_01k5w9z3d8e4f5g6h7j8k9m0n1')).toBe(
      '/dev/disk/by-id/virtio-01k5w9z3d8e4f5g6h7j8',
    );
  });
  it('attaches last and detaches one, sending every other volume as it was', () => {
    expect(volumesWithAttached(mounted, { volumeId: 'vol_c', path: '/c', readOnly: false })).toEqual({
      volumes: [
        { volumeId: 'vol_a', path: '/notes', readOnly: true },
        { volumeId: 'vol_b', path: '/data', readOnly: false },
        { volumeId: 'vol_c', path: '/c', readOnly: false },
      ],
      index: 2,
    });
    expect(volumesWithDetached(mounted, 'vol_a')).toEqual([
      { volumeId: 'vol_b', path: '/data', readOnly: false },
    ]);
    expect(volumesWithDetached(mounted, 'vol_zz')).toHaveLength(2);
  });
});

describe('usageSeries', () => {
  const row = (windowStart: string, poolId: string, gpuSeconds: number, tenantId = 'root'): UsageRow => ({
    windowStart,
    windowEnd: new Date(Date.parse(windowStart) + 3_600_000).toISOString(),
    tenantId,
    poolId,
    gpuModel: 'H100',
    gpuSeconds,
  });

  it('sums GPU-seconds by pool and by window exactly as the rows say', () => {
    const series = usageSeries([
      row('2026-01-01T01:00:00.000Z', 'pool_b', 7),
      row('2026-01-01T00:00:00.000Z', 'pool_a', 3600),
      row('2026-01-01T00:00:00.000Z', 'pool_a', 1, 'acme'),
      row('2026-01-01T01:00:00.000Z', 'pool_a', 1800),
    ]);
    expect(series.pools).toEqual([
      { poolId: 'pool_a', gpuSeconds: 5401 },
      { poolId: 'pool_b', gpuSeconds: 7 },
    ]);
    expect(series.windows.map((w) => [w.windowStart, w.byPool])).toEqual([
      ['2026-01-01T00:00:00.000Z', { pool_a: 3601 }],
      ['2026-01-01T01:00:00.000Z', { pool_b: 7, pool_a: 1800 }],
    ]);
    expect(series.tenants).toEqual([
      { tenantId: 'root', gpuSeconds: 5407 },
      { tenantId: 'acme', gpuSeconds: 1 },
    ]);
    expect(seriesGroups(series, 'tenant').windows.map((w) => [w.windowStart, w.byGroup])).toEqual([
      ['2026-01-01T00:00:00.000Z', { root: 3600, acme: 1 }],
      ['2026-01-01T01:00:00.000Z', { root: 1807 }],
    ]);
    expect(seriesGroups(series, 'pool').groups).toEqual([
      { key: 'pool_a', gpuSeconds: 5401 },
      { key: 'pool_b', gpuSeconds: 7 },
    ]);
    expect(series.totalGpuSeconds).toBe(5408);
    expect(series).toMatchObject({ rows: 4, cutShort: false });
    expect(gpuHours(5401)).toBe(1.5);
  });

  it('names the export file after its period', () => {
    expect(usageExportName({ from: '2026-01-01T00:00:00.000Z', to: '2026-01-02T00:00:00Z' })).toBe(
      'usage-2026-01-01T00-00Z-2026-01-02T00-00Z.csv',
    );
  });
});

describe('node operations', () => {
  it('allows each workflow action only from the states the server allows it from', () => {
    const allowed = (state: 'running' | 'paused' | 'failed' | 'succeeded' | 'aborted') =>
      (['pause', 'resume', 'retry', 'abort'] as const).filter((action) =>
        isWorkflowActionAllowed({ state }, action),
      );
    expect(allowed('running')).toEqual(['pause', 'abort']);
    expect(allowed('paused')).toEqual(['resume', 'abort']);
    expect(allowed('failed')).toEqual(['retry', 'abort']);
    expect(allowed('succeeded')).toEqual([]);
    expect(allowed('aborted')).toEqual([]);
  });

  it('offers Cancel on an unfinished command nobody asked to stop, and says what it does', () => {
    expect(isCommandCancellable({ state: 'queued', cancelRequested: false })).toBe(true);
    expect(isCommandCancellable({ state: 'running', cancelRequested: true })).toBe(false);
    expect(isCommandCancellable({ state: 'succeeded', cancelRequested: false })).toBe(false);
    const command = {
      id: 'cmd_01',
      kind: 'exec.script',
      payload: { script: 'disk-check\u202e' },
      state: 'queued',
    } as unknown as NodeCommand;
    expect(commandText(command)).not.toContain('\u202e');
    expect(commandQuestion(command)).toMatch(
      /^Cancel the command cmd_01 \(exec\.script disk-check.*\)\? It has not been delivered: it never runs\.$/,
    );
    expect(
      workflowProgress({
        state: 'running',
        currentStep: 1,
        steps: [{ name: 'drain' }, { name: 'script' }, { name: 'uncordon' }] as never,
      }),
    ).toBe('step 2 of 3: script');
  });
});
