/**
 * The pure half of the Fleet drift view: a drift change in words (the applied document's value and
 * the live one, `none` for a side without one, markup-free names), a fleet event in words, and when
 * the next drift check is due. The view against a real server is apps/console/test/fleet-drift.browser.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  describeDriftChange,
  describeFleetEvent,
  FLEET_DRIFT_CHECK_EVERY_MS,
  fleetCommands,
  nextCheckDue,
  type FleetEvent,
  type FleetStatus,
} from '../src/index.js';

const event = (type: string, data: Record<string, unknown>): FleetEvent => ({
  id: 'evt_1',
  position: '1',
  type,
  tenantId: 'root',
  subject: { type: 'fleet', id: 'fapl_1' },
  data,
  actor: null,
  requestId: null,
  occurredAt: '2026-09-25T18:00:00.000Z',
});

describe('the fleet drift view in words', () => {
  it('names a changed field with its applied and live values, and an object added or gone', () => {
    expect(
      describeDriftChange({
        op: '~',
        kind: 'pool',
        key: 'pool_1',
        id: 'pool_1',
        name: 'gpu-a',
        fields: [
          { field: 'quotas.acme.gpus', from: 16, to: 3 },
          { field: 'labels', from: null, to: { rack: 'a' } },
        ],
        blocked: null,
      }),
    ).toEqual({
      op: '~',
      kind: 'pool',
      object: 'pool gpu-a',
      id: 'pool_1',
      what: 'changed since the apply',
      fields: [
        { field: 'quotas.acme.gpus', documentValue: '16', liveValue: '3' },
        { field: 'labels', documentValue: 'none', liveValue: '{"rack":"a"}' },
      ],
    });
    const added = describeDriftChange({
      op: '+',
      kind: 'sandboxTemplate',
      key: 'stpl_1',
      id: 'stpl_1',
      name: 'agents',
      fields: [],
      blocked: null,
    });
    expect(added).toMatchObject({ object: 'sandbox template agents', what: 'added since the apply' });
  });

  it('says what each fleet event means', () => {
    expect(describeFleetEvent(event('fleet.applied', { planHash: 'ab'.repeat(32), calls: 4 }))).toBe(
      'Applied (planHash abababababab…, 4 call(s))',
    );
    expect(describeFleetEvent(event('fleet.drifted', { changes: 2 }))).toBe(
      'Drifted from the last apply: 2 difference(s)',
    );
    expect(describeFleetEvent(event('fleet.converged', {}))).toBe(
      'Converged: the live fleet is what the last apply left',
    );
  });

  it('knows when the next check is due, and that none comes before an apply', () => {
    const status = (applied: boolean, checkedAt: string | null): FleetStatus => ({
      tenantId: 'root',
      applied: applied ? { id: 'fapl_1', appliedAt: checkedAt ?? '', actor: null, planHash: 'h' } : null,
      drift: { state: applied ? 'converged' : 'unknown', checkedAt, since: null, changes: [] },
    });
    expect(nextCheckDue(status(true, '2026-09-25T18:00:00.000Z'))).toBe(
      Date.parse('2026-09-25T18:00:00.000Z') + FLEET_DRIFT_CHECK_EVERY_MS,
    );
    expect(nextCheckDue(status(false, null))).toBeNull();
    expect(fleetCommands().apply).toBe('better-compute fleet apply fleet.json --plan-hash H');
  });
});
