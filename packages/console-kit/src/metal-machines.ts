/**
 * What the Machines page says of a bare-metal machine and asks before acting on it, with no
 * framework. The buttons come from the machine's `allowed` (the server fills it from core's
 * `allowedVerbs`), never from a copy of the transition table; the questions asked before provide,
 * retire, abort and power off name the machine and what happens (the console guide: an action that
 * destroys or releases something asks first). Every string from the server a person reads passes
 * through `safeCell`.
 */
import { nextState, runningTransition, safeCell, type MetalState } from '@better-compute/core';
import { METAL_BULK_VERBS } from '@better-compute/core/methods';
import type { MetalMachine } from './pxe-discovery.js';

/** A button of a machine's row: a verb of the table, or one of the power actions. */
export type MachineAction =
  | 'manage'
  | 'inspect'
  | 'provide'
  | 'retire'
  | 'abort'
  | 'recover'
  | 'power-on'
  | 'power-off'
  | 'power-status';

/** The `metal` method each action calls (the power actions are `metal.power` with an action). */
export type MachineMethod = 'manage' | 'inspect' | 'provide' | 'retire' | 'abort' | 'recover' | 'power';

export interface MachineButton {
  action: MachineAction;
  label: string;
  method: MachineMethod;
  /** Whether the page asks `machineQuestion` first and calls only on yes. */
  confirm: boolean;
}

const BUTTONS: Record<MachineAction, MachineButton> = {
  manage: { action: 'manage', label: 'Manage', method: 'manage', confirm: false },
  inspect: { action: 'inspect', label: 'Inspect', method: 'inspect', confirm: false },
  provide: { action: 'provide', label: 'Provide', method: 'provide', confirm: true },
  retire: { action: 'retire', label: 'Retire', method: 'retire', confirm: true },
  abort: { action: 'abort', label: 'Abort', method: 'abort', confirm: true },
  recover: { action: 'recover', label: 'Recover', method: 'recover', confirm: false },
  'power-on': { action: 'power-on', label: 'Power on', method: 'power', confirm: false },
  'power-off': { action: 'power-off', label: 'Power off', method: 'power', confirm: true },
  'power-status': { action: 'power-status', label: 'Power status', method: 'power', confirm: false },
};

/** What `power` may be asked from the page (reset is left to the CLI and `metal bulk`). */
const POWER_ACTIONS = ['power-on', 'power-off', 'power-status'] as const;

/**
 * The buttons a machine's `allowed` list offers, in its order; `power` becomes Power on, Power off
 * and Power status. A verb the page has no button for (a later slice's) is left out.
 *
 * @example
 * machineButtons(['manage', 'retire']).map((b) => b.label); // ['Manage', 'Retire']
 * machineButtons(['retire', 'power']).map((b) => b.label);
 * // ['Retire', 'Power on', 'Power off', 'Power status']
 */
export function machineButtons(allowed: readonly string[]): MachineButton[] {
  return allowed.flatMap((verb) =>
    verb === 'power'
      ? POWER_ACTIONS.map((action) => BUTTONS[action])
      : Object.hasOwn(BUTTONS, verb) && !verb.startsWith('power-')
        ? [BUTTONS[verb as MachineAction]]
        : [],
  );
}

/** What a question names of the machine: `r12-u07 (node_…)`. */
type Named = Pick<MetalMachine, 'id' | 'name' | 'provisionState'>;

/**
 * The question asked before an action, naming the machine and what happens; null for an action that
 * does not ask (manage, inspect, recover, power on and power status change nothing that is lost).
 * Abort names the transition that runs and the failure state core's table ends it in.
 *
 * @example
 * machineQuestion({ id: 'node_01j9…', name: 'r12-u07', provisionState: 'enroll' }, 'retire');
 * // 'Retire r12-u07 (node_01j9…)? It is never provided again.'
 * machineQuestion({ id: 'node_01j9…', name: 'r12-u07', provisionState: 'cleaning' }, 'abort');
 * // 'Abort the running cleaning of r12-u07 (node_01j9…)? It ends in clean failed.'
 */
export function machineQuestion(machine: Named, action: MachineAction): string | null {
  const who = `${safeCell(machine.name)} (${safeCell(machine.id)})`;
  if (action === 'provide')
    return `Provide ${who}? The deploy ramdisk erases its disks’ partition tables and file-system signatures, and it becomes available to deploy.`;
  if (action === 'retire') return `Retire ${who}? It is never provided again.`;
  if (action === 'power-off') return `Power off ${who}? Whatever runs on it stops.`;
  if (action === 'abort') {
    const state = machine.provisionState as MetalState;
    const running = runningTransition(state)?.via;
    const ends = nextState('abort', state);
    return running && ends
      ? `Abort the running ${running} of ${who}? It ends in ${ends}.`
      : `Abort the running transition of ${who}? It ends in its failure state.`;
  }
  return null;
}

/**
 * The provision state as the row shows it: with the state a running transition ends in.
 *
 * @example
 * machineStateText({ provisionState: 'cleaning', targetState: 'available' }); // 'cleaning → available'
 * machineStateText({ provisionState: 'manageable', targetState: null }); // 'manageable'
 */
export function machineStateText(machine: Pick<MetalMachine, 'provisionState' | 'targetState'>): string {
  return machine.targetState === null
    ? machine.provisionState
    : `${machine.provisionState} → ${machine.targetState}`;
}

/** One decimal place, without a trailing `.0`. */
const oneDecimal = (value: number) => String(Math.round(value * 10) / 10);

/**
 * A size in bytes in binary units (MiB, GiB, TiB, PiB), to one decimal place.
 *
 * @example
 * bytesText(3_840_755_982_336); // '3.5 TiB'
 * bytesText(500_107_862_016); // '465.8 GiB'
 */
export function bytesText(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${oneDecimal(value)} ${units[unit]}`;
}

export type MachineInventory = NonNullable<MetalMachine['inventory']>;

/** The last inspection's findings as the row shows them. */
export interface InventoryText {
  /** `64 processors (AMD EPYC 7543 32-Core Processor)`. */
  processors: string;
  /** The installed memory (`memory.physicalMiB`) in GiB: `512 GiB`. */
  memory: string;
  /** How many disks and their total size: `2 disks, 7 TiB`, or `no disks`. */
  disks: string;
}

/**
 * What the last inspection found, in words; null when the machine was never inspected (the page
 * says "not inspected").
 *
 * @example
 * inventoryText({ cpu: { count: 64, model: 'AMD EPYC 7543' }, memory: { physicalMiB: 524288, totalKiB: 527000000 },
 *   disks: [{ name: 'nvme0n1', sizeBytes: 3840755982336, … }], nics: [], systemUuid: null });
 * // { processors: '64 processors (AMD EPYC 7543)', memory: '512 GiB', disks: '1 disk, 3.5 TiB' }
 */
export function inventoryText(inventory: MachineInventory | null): InventoryText | null {
  if (inventory === null) return null;
  const { cpu, memory, disks } = inventory;
  const model = safeCell(cpu.model).trim();
  const total = disks.reduce((sum, disk) => sum + disk.sizeBytes, 0);
  return {
    processors: `${cpu.count} processor${cpu.count === 1 ? '' : 's'}${model ? ` (${model})` : ''}`,
    memory: `${oneDecimal(memory.physicalMiB / 1024)} GiB`,
    disks:
      disks.length === 0
        ? 'no disks'
        : `${disks.length} disk${disks.length === 1 ? '' : 's'}, ${bytesText(total)}`,
  };
}

export type MachineCleaning = NonNullable<MetalMachine['cleaning']>;

/**
 * What the last cleaning (provide) did, in words; null when the machine was never cleaned. A
 * cleaning the ramdisk could not finish says why, as the ramdisk said it.
 *
 * @example
 * cleaningText({ systemUuid: null, failed: null,
 *   disks: [{ name: 'nvme0n1', sizeBytes: 3840755982336, partitions: 2, erasedBytes: 3145728 }] });
 * // 'metadata of 1 disk erased (3 MiB)'
 * cleaningText({ systemUuid: null, disks: [], failed: 'writing the start of sda failed' });
 * // 'cleaning failed: writing the start of sda failed'
 */
export function cleaningText(cleaning: MachineCleaning | null): string | null {
  if (cleaning === null) return null;
  if (cleaning.failed !== null) return `cleaning failed: ${safeCell(cleaning.failed)}`;
  const count = cleaning.disks.length;
  const erased = cleaning.disks.reduce((sum, disk) => sum + disk.erasedBytes, 0);
  return count === 0
    ? 'no disk to erase'
    : `metadata of ${count} disk${count === 1 ? '' : 's'} erased (${bytesText(erased)})`;
}

export type BulkVerb = (typeof METAL_BULK_VERBS)[number];

const BULK_LABELS: Record<BulkVerb, string> = {
  manage: 'Manage',
  inspect: 'Inspect',
  provide: 'Provide',
  retire: 'Retire',
  recover: 'Recover',
  abort: 'Abort',
  'power-on': 'Power on',
  'power-off': 'Power off',
  'power-reset': 'Reset',
  'power-status': 'Power status',
};

/**
 * The verbs `metal.bulk` runs on many machines (core's METAL_BULK_VERBS), with their labels, in
 * the table's order.
 *
 * @example BULK_VERBS[0]; // { verb: 'manage', label: 'Manage' }
 */
export const BULK_VERBS: readonly { verb: BulkVerb; label: string }[] = METAL_BULK_VERBS.map((verb) => ({
  verb,
  label: BULK_LABELS[verb],
}));

/**
 * The question asked before a bulk verb on `count` machines, as machineQuestion asks it of one;
 * null for a verb that loses nothing (manage, inspect, recover, power on, power status).
 *
 * @example
 * bulkQuestion('retire', 3); // 'Retire 3 machines? They are never provided again.'
 * bulkQuestion('manage', 3); // null
 */
export function bulkQuestion(verb: BulkVerb, count: number): string | null {
  const them = `${count} machine${count === 1 ? '' : 's'}`;
  if (verb === 'provide')
    return `Provide ${them}? The deploy ramdisk erases their disks’ partition tables and file-system signatures, and they become available to deploy.`;
  if (verb === 'retire') return `Retire ${them}? They are never provided again.`;
  if (verb === 'abort') return `Abort the running transitions of ${them}? Each ends in its failure state.`;
  if (verb === 'power-off') return `Power off ${them}? Whatever runs on them stops.`;
  if (verb === 'power-reset') return `Reset ${them}? Whatever runs on them restarts.`;
  return null;
}
