/**
 * A site agent's PXE discovery reports (`pxe.discovered`), as the gateway takes them: bounded per
 * node and minute, recorded by the metal module for the agent's own site, and anything refused is
 * logged and answered, never thrown (docs/decisions/metal-discovery.md).
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { recordPxeDiscovery } from '../modules/metal/index.js';
import type { DaemonMessage } from './protocol.js';

/** The most reports one node has recorded a minute: the site agent's own cap (provisioning-network.ts). */
const DISCOVERIES_PER_MINUTE = 120;

type DiscoveryMessage = Extract<DaemonMessage, { t: 'pxe.discovered' }>;

/** Takes reports; answers the message to send back (a refusal), or null when none is due. */
export function createDiscoveryIntake(db: Kysely<ComputeTables>, log: (line: string) => void) {
  // A node's count for the current minute. A flood is dropped rather than written without end.
  const windows = new Map<string, { minute: number; count: number }>();
  return async (nodeId: string, message: DiscoveryMessage, at: Date) => {
    const minute = Math.floor(at.getTime() / 60_000);
    let window = windows.get(nodeId);
    if (!window || window.minute !== minute) {
      if (windows.size > 10_000) windows.clear();
      window = { minute, count: 0 };
      windows.set(nodeId, window);
    }
    window.count += 1;
    if (window.count > DISCOVERIES_PER_MINUTE) {
      if (window.count === DISCOVERIES_PER_MINUTE + 1)
        log(
          `gateway: ${nodeId} sent over ${DISCOVERIES_PER_MINUTE} PXE discoveries this minute; the rest are dropped`,
        );
      return null;
    }
    const recorded = await recordPxeDiscovery(db, nodeId, message, at);
    if (recorded.outcome === 'recorded') return null;
    log(`gateway: a PXE discovery report from ${nodeId} was ${recorded.outcome}: ${recorded.reason}`);
    return { t: 'pxe.discovered.refused', mac: message.mac, message: recorded.reason };
  };
}
