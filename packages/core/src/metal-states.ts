/**
 * The provision states of a bare-metal machine and the one table of transitions between them, in
 * the spirit of OpenStack Ironic's state machine (ironic/common/states.py): stable states that only
 * an API verb leaves (enroll, manageable, available, active, rescue, retired, and the failure
 * states), and transient states a workflow holds while it runs (verifying, cleaning, ...), each
 * with where it ends on success and on failure. Every rule of "may this verb run now" is read from
 * TRANSITIONS; nothing else decides it. Pure: the server, the CLI and the console import it.
 *
 * Verbs whose `slice` is false are seams: their states exist and their rows are here so the rule
 * is already one table, but no method runs them yet (they need the deploy ramdisk or PXE).
 */

export const METAL_STATES = [
  'enroll',
  'verifying',
  'enroll failed',
  'manageable',
  'inspecting',
  'inspect failed',
  'cleaning',
  'clean failed',
  'available',
  'deploying',
  'deploy failed',
  'active',
  'undeploying',
  'rescuing',
  'rescue',
  'rescue failed',
  'unrescuing',
  'retired',
] as const;
export type MetalState = (typeof METAL_STATES)[number];

export type MetalVerb =
  'manage' | 'inspect' | 'provide' | 'deploy' | 'undeploy' | 'rescue' | 'unrescue' | 'retire' | 'recover';

export interface MetalTransition {
  verb: MetalVerb;
  /** The states the verb may start from. */
  from: readonly MetalState[];
  /** The state the machine holds while the verb's workflow runs; null when the verb ends at once. */
  via: MetalState | null;
  /** Where it ends when the workflow succeeds (or at once, without one). */
  to: MetalState;
  /** Where a failed (or aborted) workflow leaves it. */
  failed: MetalState | null;
  /**
   * Whether `abort` may interrupt it while it runs: only where stopping half way leaves nothing
   * worse than the failure state (Ironic's *wait states). Verifying only asks the BMC a question;
   * a deploy or an unrescue in flight is left to end.
   */
  abortable: boolean;
  /** Whether this slice has the method; false for the seams of later work. */
  slice: boolean;
}

/** The failure states and the stable state `recover` returns each to (after a person looked). */
export const RECOVERS_TO: Readonly<Partial<Record<MetalState, MetalState>>> = {
  'enroll failed': 'enroll',
  'inspect failed': 'manageable',
  'clean failed': 'manageable',
  'deploy failed': 'manageable',
  'rescue failed': 'manageable',
};

export const TRANSITIONS: readonly MetalTransition[] = [
  // Ask the BMC for the power state with the stored credentials: they work, or the machine stays out.
  {
    verb: 'manage',
    from: ['enroll'],
    via: 'verifying',
    to: 'manageable',
    failed: 'enroll failed',
    abortable: false,
    slice: true,
  },
  {
    verb: 'inspect',
    from: ['manageable'],
    via: 'inspecting',
    to: 'manageable',
    failed: 'inspect failed',
    abortable: true,
    slice: true,
  },
  // Cleaning runs the clean steps; the machine is available only once they passed.
  {
    verb: 'provide',
    from: ['manageable'],
    via: 'cleaning',
    to: 'available',
    failed: 'clean failed',
    abortable: true,
    slice: true,
  },
  {
    verb: 'deploy',
    from: ['available'],
    via: 'deploying',
    to: 'active',
    failed: 'deploy failed',
    abortable: true,
    slice: false,
  },
  {
    verb: 'undeploy',
    from: ['active', 'deploy failed'],
    via: 'undeploying',
    to: 'available',
    failed: 'clean failed',
    abortable: false,
    slice: false,
  },
  {
    verb: 'rescue',
    from: ['active'],
    via: 'rescuing',
    to: 'rescue',
    failed: 'rescue failed',
    abortable: true,
    slice: false,
  },
  {
    verb: 'unrescue',
    from: ['rescue'],
    via: 'unrescuing',
    to: 'active',
    failed: 'rescue failed',
    abortable: false,
    slice: false,
  },
  // Retiring a deployed machine waits for undeploy (and its drain); a machine with nothing on it retires at once.
  {
    verb: 'retire',
    from: ['enroll', 'enroll failed', 'manageable', 'inspect failed', 'clean failed', 'available'],
    via: null,
    to: 'retired',
    failed: null,
    abortable: false,
    slice: true,
  },
  {
    verb: 'recover',
    from: Object.keys(RECOVERS_TO) as MetalState[],
    via: null,
    to: 'manageable',
    failed: null,
    abortable: false,
    slice: true,
  },
];

/** Where `power` may run: not while a workflow owns the machine, nor before its BMC was verified. */
export const POWER_FROM: readonly MetalState[] = [
  'enroll failed',
  'manageable',
  'inspect failed',
  'clean failed',
  'available',
  'deploy failed',
  'active',
  'rescue',
  'rescue failed',
  'retired',
];

export function transitionOf(verb: MetalVerb): MetalTransition {
  return TRANSITIONS.find((t) => t.verb === verb)!;
}

/** The transition a transient state belongs to (its workflow's), or null for a stable state. */
export function runningTransition(state: MetalState): MetalTransition | null {
  return TRANSITIONS.find((t) => t.via === state) ?? null;
}

/** Where `verb` takes a machine in `state`, or null when the table does not allow it. */
export function nextState(verb: MetalVerb | 'abort', state: MetalState): MetalState | null {
  if (verb === 'abort') {
    const running = runningTransition(state);
    return running?.abortable ? running.failed : null;
  }
  const rule = transitionOf(verb);
  if (!rule.from.includes(state)) return null;
  if (verb === 'recover') return RECOVERS_TO[state] ?? null;
  return rule.via ?? rule.to;
}

/** The verbs a machine in `state` allows now, for messages and the console's buttons. */
export function allowedVerbs(state: MetalState): Array<MetalVerb | 'abort' | 'power'> {
  const verbs: Array<MetalVerb | 'abort' | 'power'> = TRANSITIONS.filter(
    (t) => t.slice && t.from.includes(state),
  ).map((t) => t.verb);
  if (runningTransition(state)?.abortable) verbs.push('abort');
  if (POWER_FROM.includes(state)) verbs.push('power');
  return verbs;
}

/**
 * Whether a payload is a metal.bmc command's as it is stored and queued: the machine, the action
 * (with, for power on, the boot device to set first) and the BMC named without its password (the gateway adds `bmc.password` only as it signs). The
 * commands module queues nothing else under the kind, so no row ever holds a password.
 */
export function isStoredBmcPayload(payload: Record<string, unknown>): boolean {
  const keys = (value: object) => Object.keys(value).sort().join(',');
  const bmc = payload.bmc as Record<string, unknown> | null | undefined;
  // Power on may name the device to boot from first (the deploy ramdisk boots from the network).
  const bootDevice = payload.bootDevice;
  const withBoot =
    keys(payload) === 'action,bmc,bootDevice,machineId' &&
    payload.action === 'on' &&
    (bootDevice === 'pxe' || bootDevice === 'disk');
  return (
    (keys(payload) === 'action,bmc,machineId' || withBoot) &&
    typeof payload.machineId === 'string' &&
    ['on', 'off', 'reset', 'status'].includes(payload.action as string) &&
    typeof bmc === 'object' &&
    bmc !== null &&
    keys(bmc) === 'address,driver,port,tlsFingerprint,username' &&
    (bmc.driver === 'ipmi' || bmc.driver === 'redfish') &&
    typeof bmc.address === 'string' &&
    typeof bmc.username === 'string' &&
    (bmc.port === null || typeof bmc.port === 'number') &&
    (bmc.tlsFingerprint === null || typeof bmc.tlsFingerprint === 'string')
  );
}
