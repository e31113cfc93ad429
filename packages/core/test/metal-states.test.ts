/**
 * The provision-state table holds together: every state it names is a state, each transient state
 * belongs to one transition, every failure state can be recovered from and is reached by some
 * failure, abort lands only where the table says, retired and the transient states take no verb
 * but what the table lists, and the stored command payload never admits a password.
 */
import { describe, expect, it } from 'vitest';
import {
  allowedVerbs,
  isStoredBmcPayload,
  METAL_STATES,
  nextState,
  POWER_FROM,
  RECOVERS_TO,
  runningTransition,
  TRANSITIONS,
} from '../src/metal-states.js';

describe('the metal transition table', () => {
  it('names only states, and each transient state belongs to one transition', () => {
    const states = new Set<string>(METAL_STATES);
    for (const t of TRANSITIONS) {
      for (const s of [...t.from, t.to, ...(t.via ? [t.via] : []), ...(t.failed ? [t.failed] : [])])
        expect(states.has(s), `${t.verb}: ${s}`).toBe(true);
      if (t.via) expect(TRANSITIONS.filter((o) => o.via === t.via)).toHaveLength(1);
      // A transition with work to do has somewhere to fail to; one without has none.
      expect(t.failed === null).toBe(t.via === null);
    }
    for (const s of POWER_FROM) expect(states.has(s)).toBe(true);
  });

  it('every failure state is reached by a failure and left by recover', () => {
    const failures = new Set(TRANSITIONS.flatMap((t) => (t.failed ? [t.failed] : [])));
    expect([...failures].sort()).toEqual(Object.keys(RECOVERS_TO).sort());
    for (const [from, to] of Object.entries(RECOVERS_TO))
      expect(nextState('recover', from as never)).toBe(to);
  });

  it('answers where a verb goes, and null where the table does not allow it', () => {
    expect(nextState('manage', 'enroll')).toBe('verifying');
    expect(nextState('provide', 'manageable')).toBe('cleaning');
    expect(nextState('provide', 'enroll')).toBeNull();
    expect(nextState('retire', 'available')).toBe('retired');
    expect(nextState('retire', 'active')).toBeNull();
    expect(nextState('abort', 'cleaning')).toBe('clean failed');
    expect(nextState('abort', 'verifying')).toBeNull();
    expect(nextState('abort', 'available')).toBeNull();
    expect(runningTransition('cleaning')?.verb).toBe('provide');
    expect(runningTransition('available')).toBeNull();
  });

  it('a running transition and a retired machine allow no verb of the slice but the table’s', () => {
    expect(allowedVerbs('verifying')).toEqual([]);
    expect(allowedVerbs('cleaning')).toEqual(['abort']);
    expect(allowedVerbs('retired')).toEqual(['power']);
    expect(allowedVerbs('enroll')).toEqual(['manage', 'retire']);
    expect(allowedVerbs('clean failed')).toEqual(['retire', 'recover', 'power']);
  });

  it('a stored metal.bmc payload never holds a password or anything unnamed', () => {
    const bmc = { driver: 'ipmi', address: '10.0.0.7', port: null, username: 'admin', tlsFingerprint: null };
    const payload = { machineId: 'node_01m00000000000000000000000', action: 'status', bmc };
    expect(isStoredBmcPayload(payload)).toBe(true);
    expect(isStoredBmcPayload({ ...payload, bmc: { ...bmc, password: 'x' } })).toBe(false);
    expect(isStoredBmcPayload({ ...payload, extra: 1 })).toBe(false);
    expect(isStoredBmcPayload({ ...payload, action: 'cycle' })).toBe(false);
    expect(isStoredBmcPayload({ ...payload, bmc: { ...bmc, driver: 'ssh' } })).toBe(false);
    expect(isStoredBmcPayload({ ...payload, bmc: null })).toBe(false);
  });
});
