/**
 * The steps of each metal verb's workflow on the site agent, in one place: the BMC calls as
 * metal.bmc commands (each with its timeout) and the waits for what the deploy ramdisk reports
 * (ramdisk.ts checks them). service.ts starts them; workflows.ts lands the machine when they end.
 */
import type { MetalVerb } from '@better-compute/core';
import { commandStep, waitStep } from '../workflows/service.js';
import type { MachineRow } from './tables.js';

/** What a metal.bmc command carries, without the password (the gateway adds it as it signs). */
export function bmcPayload(row: MachineRow, action: 'on' | 'off' | 'reset' | 'status') {
  return { machineId: row.id, action, bmc: bmcOf(row) };
}

/** The machine's BMC as it is enrolled: driver, address, user and pinned certificate, no password. */
export function bmcOf(row: MachineRow) {
  return {
    driver: row.bmc_driver,
    address: row.bmc_address,
    port: row.bmc_port,
    username: row.bmc_user,
    tlsFingerprint: row.bmc_tls_fingerprint,
  };
}

/**
 * How long a BMC call may go unanswered before its step fails: the agent's own bound is the
 * driver's timeouts plus 20 s for a power change to show (the daemon's bmc-command.ts).
 */
export const BMC_STEP = { timeoutMs: 120_000 };

/** How long the deploy ramdisk may take to report once the machine was powered on. */
const RAMDISK_REPORT_TIMEOUT_MS = 15 * 60_000;
/**
 * How long a ramdisk workflow waits for the ramdisk's boot entry to be in place: a machine enrolled
 * by its product UUID waits here until a person confirms its PXE MAC (metal confirm-mac).
 */
const ENSURE_RAMDISK_TIMEOUT_MS = 24 * 3_600_000;

/**
 * The steps of a workflow the deploy ramdisk carries out, as Ironic's agent does: the machine's
 * MACs boot the ramdisk (metal.ensureRamdisk), the machine is powered off and on from the network,
 * the ramdisk reports (`report` names the check that waits for it), and the machine is powered
 * off. Each wait is woken by what it waits for.
 */
function ramdiskSteps(row: MachineRow, report: { check: 'inventory' | 'cleaned'; name: string }) {
  return [
    waitStep('metal.ensureRamdisk: the site agent boots the deploy ramdisk for its MAC', {
      check: 'ramdisk-entry',
      timeoutMs: ENSURE_RAMDISK_TIMEOUT_MS,
      recheckMs: 5_000,
    }),
    commandStep('power off', 'metal.bmc', bmcPayload(row, 'off'), BMC_STEP),
    commandStep(
      'power on from the network',
      'metal.bmc',
      { ...bmcPayload(row, 'on'), bootDevice: 'pxe' },
      BMC_STEP,
    ),
    waitStep(report.name, { check: report.check, timeoutMs: RAMDISK_REPORT_TIMEOUT_MS, recheckMs: 5_000 }),
    commandStep('power off', 'metal.bmc', bmcPayload(row, 'off'), BMC_STEP),
  ];
}

/** The verbs whose workflow boots the deploy ramdisk, so they need a site agent running the provisioning network. */
export const RAMDISK_VERBS: readonly MetalVerb[] = ['inspect', 'provide'];

/** The workflow kind and steps of a verb that runs one on the site's agent. */
export function workflowFor(verb: MetalVerb, row: MachineRow) {
  if (verb === 'inspect')
    // Ironic's in-band inspection: the ramdisk reports the hardware.
    return {
      kind: 'metal.inspect' as const,
      steps: ramdiskSteps(row, { check: 'inventory', name: 'wait for the ramdisk’s inventory' }),
    };
  if (verb === 'manage')
    return {
      kind: 'metal.verify' as const,
      steps: [
        commandStep('ask the BMC for the power state', 'metal.bmc', bmcPayload(row, 'status'), BMC_STEP),
      ],
    };
  if (verb === 'provide')
    // Ironic's automated cleaning with its metadata erase (docs/decisions/metal-cleaning.md): the
    // ramdisk zeroes the partition tables and file system signatures of every writable disk.
    return {
      kind: 'metal.clean' as const,
      steps: ramdiskSteps(row, { check: 'cleaned', name: 'wait for the ramdisk to erase the disks' }),
    };
  return null;
}
