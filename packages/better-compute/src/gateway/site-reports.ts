/**
 * What a site agent reports as the gateway takes it: PXE discoveries (`pxe.discovered`) and the
 * deploy ramdisk's inspections and cleanings (`metal.report`). Bounded per node and minute,
 * recorded by the metal module for the agent's own site, and anything refused is logged and
 * answered, never thrown
 * (docs/decisions/metal-discovery.md, docs/decisions/metal-inspection.md).
 */
import { RAMDISK_FINDINGS } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { recordCleaning, recordInspection, recordPxeDiscovery } from '../modules/metal/index.js';
import type { DaemonMessage } from './protocol.js';

/** The most reports one node has recorded a minute: the site agent's own discovery cap (provisioning-network.ts). */
const REPORTS_PER_MINUTE = 120;

type DiscoveryMessage = Extract<DaemonMessage, { t: 'pxe.discovered' }>;
type RamdiskMessage = Extract<DaemonMessage, { t: 'metal.report' }>;

/** Takes reports; answers the message to send back (a refusal), or null when none is due. */
export function createSiteReportIntake(db: Kysely<ComputeTables>, log: (line: string) => void) {
  // A node's count for the current minute. A flood is dropped rather than written without end.
  const windows = new Map<string, { minute: number; count: number }>();
  const admitted = (nodeId: string, at: Date) => {
    const minute = Math.floor(at.getTime() / 60_000);
    let window = windows.get(nodeId);
    if (!window || window.minute !== minute) {
      if (windows.size > 10_000) windows.clear();
      window = { minute, count: 0 };
      windows.set(nodeId, window);
    }
    window.count += 1;
    if (window.count === REPORTS_PER_MINUTE + 1)
      log(
        `gateway: ${nodeId} sent over ${REPORTS_PER_MINUTE} site reports this minute; the rest are dropped`,
      );
    return window.count <= REPORTS_PER_MINUTE;
  };
  return async (nodeId: string, message: DiscoveryMessage | RamdiskMessage, at: Date) => {
    if (!admitted(nodeId, at)) return null;
    if (message.t === 'pxe.discovered') {
      const recorded = await recordPxeDiscovery(db, nodeId, message, at);
      if (recorded.outcome === 'recorded') return null;
      log(`gateway: a PXE discovery report from ${nodeId} was ${recorded.outcome}: ${recorded.reason}`);
      return { t: 'pxe.discovered.refused', mac: message.mac, message: recorded.reason };
    }
    const recorded = await recordRamdiskReport(db, nodeId, message, at);
    if (recorded.outcome === 'recorded') return null;
    log(`gateway: a ramdisk report (${message.purpose}) from ${nodeId} was refused: ${recorded.reason}`);
    return { t: 'metal.report.refused', mac: message.mac, message: recorded.reason };
  };
}

/** A ramdisk's report by its purpose, whose field (core's RAMDISK_FINDINGS) holds its findings and no other. */
function recordRamdiskReport(db: Kysely<ComputeTables>, nodeId: string, message: RamdiskMessage, at: Date) {
  const { mac, purpose, inventory, cleaning } = message;
  const field = RAMDISK_FINDINGS[purpose];
  if (field === 'inventory' && inventory && !cleaning)
    return recordInspection(db, nodeId, { mac, inventory }, at);
  if (field === 'cleaning' && cleaning && !inventory)
    return recordCleaning(db, nodeId, { mac, cleaning }, at);
  return Promise.resolve({
    outcome: 'refused' as const,
    reason: `a ${purpose} report carries ${field === 'inventory' ? 'an inventory' : 'a cleaning'} and nothing else`,
  });
}
