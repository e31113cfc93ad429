/**
 * The Machines page's words alone, with no server and no React: the buttons each `allowed` list
 * (core's allowedVerbs, for every provision state) offers, the questions asked before provide,
 * retire, abort and power off (abort's transition and failure state read from core's table), the
 * state with its target, and what an inspection found in words.
 */
import { METAL_BULK_VERBS } from '@better-compute/core/methods';
import { allowedVerbs, METAL_STATES, type MetalState } from '@better-compute/core';
import { describe, expect, it } from 'vitest';
import {
  bytesText,
  BULK_VERBS,
  bulkQuestion,
  cleaningText,
  inventoryText,
  machineButtons,
  machineQuestion,
  machineStateText,
  type MachineInventory,
} from '../src/index.js';

const ID = 'node_01j9z3k4m5n6p7q8r9s0t1v2w3';
const named = (provisionState: MetalState) => ({ id: ID, name: 'r12-u07', provisionState });

describe('machineButtons', () => {
  it('offers what allowed lists, in its order; power is on, off and status', () => {
    expect(machineButtons(['manage', 'retire']).map((button) => button.label)).toEqual(['Manage', 'Retire']);
    expect(machineButtons(['retire', 'power']).map((button) => [button.label, button.method])).toEqual([
      ['Retire', 'retire'],
      ['Power on', 'power'],
      ['Power off', 'power'],
      ['Power status', 'power'],
    ]);
    expect(machineButtons([])).toEqual([]);
  });

  it('leaves out a verb it has no button for, and never reads a name off the prototype', () => {
    expect(machineButtons(['deploy', 'toString', 'power-off', 'recover']).map((b) => b.action)).toEqual([
      'recover',
    ]);
  });

  it('asks first exactly for provide, retire, abort and power off', () => {
    const asking = machineButtons(['manage', 'inspect', 'provide', 'retire', 'abort', 'recover', 'power'])
      .filter((button) => button.confirm)
      .map((button) => button.action);
    expect(asking).toEqual(['provide', 'retire', 'abort', 'power-off']);
  });

  it('has a button for every verb core allows in any state, so no verb is dropped unseen', () => {
    for (const state of METAL_STATES) {
      const verbs = allowedVerbs(state);
      const methods = new Set(machineButtons(verbs).map((button) => button.method));
      expect([...methods].sort(), state).toEqual([...new Set(verbs)].sort());
    }
  });
});

describe('machineQuestion', () => {
  it('names the machine and what happens', () => {
    expect(machineQuestion(named('manageable'), 'provide')).toBe(
      `Provide r12-u07 (${ID})? The deploy ramdisk erases its disks’ partition tables and file-system signatures, and it becomes available to deploy.`,
    );
    expect(machineQuestion(named('enroll'), 'retire')).toBe(
      `Retire r12-u07 (${ID})? It is never provided again.`,
    );
    expect(machineQuestion(named('available'), 'power-off')).toBe(
      `Power off r12-u07 (${ID})? Whatever runs on it stops.`,
    );
  });

  it('abort names the running transition and the failure state core’s table ends it in', () => {
    expect(machineQuestion(named('cleaning'), 'abort')).toBe(
      `Abort the running cleaning of r12-u07 (${ID})? It ends in clean failed.`,
    );
    expect(machineQuestion(named('inspecting'), 'abort')).toBe(
      `Abort the running inspecting of r12-u07 (${ID})? It ends in inspect failed.`,
    );
    // A row read before its transition ended still asks, in general words.
    expect(machineQuestion(named('manageable'), 'abort')).toBe(
      `Abort the running transition of r12-u07 (${ID})? It ends in its failure state.`,
    );
  });

  it('asks nothing for what loses nothing', () => {
    for (const action of ['manage', 'inspect', 'recover', 'power-on', 'power-status'] as const)
      expect(machineQuestion(named('manageable'), action)).toBeNull();
  });

  it('reads a name with control characters as plain text', () => {
    expect(machineQuestion({ ...named('enroll'), name: 'r12\u001b[2Ju07' }, 'retire')).toBe(
      `Retire r12 [2Ju07 (${ID})? It is never provided again.`,
    );
  });
});

describe('the row’s words', () => {
  it('the state carries its target while a transition runs', () => {
    expect(machineStateText({ provisionState: 'cleaning', targetState: 'available' })).toBe(
      'cleaning → available',
    );
    expect(machineStateText({ provisionState: 'manageable', targetState: null })).toBe('manageable');
  });

  it('sizes in binary units to one decimal place', () => {
    expect(bytesText(0)).toBe('0 B');
    expect(bytesText(1536)).toBe('1.5 KiB');
    expect(bytesText(500_107_862_016)).toBe('465.8 GiB');
    expect(bytesText(3_840_755_982_336)).toBe('3.5 TiB');
    expect(bytesText(2 ** 62)).toBe('4096 PiB');
  });

  it('what an inspection found: processors, memory in GiB from physicalMiB, disks and their total', () => {
    const disk = {
      name: 'nvme0n1',
      sizeBytes: 3_840_755_982_336,
      model: 'M',
      serial: 'S',
      rotational: false,
    };
    const inventory: MachineInventory = {
      systemUuid: null,
      cpu: { count: 64, model: 'AMD EPYC 7543 32-Core Processor' },
      memory: { physicalMiB: 524_288, totalKiB: 527_000_000 },
      disks: [disk, { ...disk, name: 'nvme1n1' }],
      nics: [],
    };
    expect(inventoryText(inventory)).toEqual({
      processors: '64 processors (AMD EPYC 7543 32-Core Processor)',
      memory: '512 GiB',
      disks: '2 disks, 7 TiB',
    });
    expect(
      inventoryText({
        ...inventory,
        cpu: { count: 1, model: '' },
        memory: { physicalMiB: 1536, totalKiB: 1_500_000 },
        disks: [{ ...disk, sizeBytes: 500_107_862_016 }],
      }),
    ).toEqual({ processors: '1 processor', memory: '1.5 GiB', disks: '1 disk, 465.8 GiB' });
    expect(inventoryText({ ...inventory, disks: [] })?.disks).toBe('no disks');
    expect(inventoryText(null)).toBeNull();
  });
});

describe('cleaningText', () => {
  it('says what the last cleaning erased, or why it failed, in the ramdisk’s words made safe', () => {
    const disk = {
      name: 'nvme0n1',
      sizeBytes: 3_840_755_982_336,
      partitions: 2,
      erasedBytes: 3 * 1024 * 1024,
    };
    expect(cleaningText({ systemUuid: null, disks: [disk], failed: null })).toBe(
      'metadata of 1 disk erased (3 MiB)',
    );
    expect(
      cleaningText({ systemUuid: null, disks: [disk, { ...disk, name: 'nvme1n1' }], failed: null }),
    ).toBe('metadata of 2 disks erased (6 MiB)');
    expect(cleaningText({ systemUuid: null, disks: [], failed: null })).toBe('no disk to erase');
    expect(
      cleaningText({ systemUuid: null, disks: [], failed: 'writing the start of sda\u0007 failed' }),
    ).toBe('cleaning failed: writing the start of sda  failed');
    expect(cleaningText(null)).toBeNull();
  });
});

describe('bulk verbs', () => {
  it('offers every verb metal.bulk takes, labelled, in the table’s order', () => {
    expect(BULK_VERBS.map((v) => v.verb)).toEqual([...METAL_BULK_VERBS]);
    expect(BULK_VERBS.map((v) => v.label)).toEqual([
      'Manage',
      'Inspect',
      'Provide',
      'Retire',
      'Recover',
      'Abort',
      'Power on',
      'Power off',
      'Reset',
      'Power status',
    ]);
  });

  it('asks first for the verbs that lose something, naming how many machines', () => {
    expect(bulkQuestion('retire', 1)).toBe('Retire 1 machine? They are never provided again.');
    expect(bulkQuestion('power-off', 3)).toBe('Power off 3 machines? Whatever runs on them stops.');
    expect(bulkQuestion('power-reset', 2)).toBe('Reset 2 machines? Whatever runs on them restarts.');
    expect(bulkQuestion('abort', 2)).toBe(
      'Abort the running transitions of 2 machines? Each ends in its failure state.',
    );
    expect(bulkQuestion('provide', 2)).toContain('Provide 2 machines? The deploy ramdisk erases');
    for (const verb of ['manage', 'inspect', 'recover', 'power-on', 'power-status'] as const)
      expect(bulkQuestion(verb, 2)).toBeNull();
  });
});
