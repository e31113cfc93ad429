/**
 * The metal.boot-entries command: the complete set of MACs a site's machines have bound, as the
 * control plane sends it to the site's agents that run the provisioning network. The agent answers
 * exactly these MACs with a boot entry and drops any entry not listed, so a lost or repeated
 * command is mended by the next one. Every bound MAC boots `local-disk` (iPXE hands the machine
 * back to its own disk) until a workflow that needs the network (inspection, deploy) exists to
 * give it another entry.
 */
import { normalizeMac } from './mac.js';

export const BOOT_ENTRIES_KIND = 'metal.boot-entries';
/** The most MACs one command names: a site's machines, at 16 MACs each for 256 machines. */
export const MAX_BOOT_ENTRIES = 4096;

export interface BootEntriesPayload {
  entries: { mac: string; boot: 'local-disk' }[];
}

/** Whether a payload is a metal.boot-entries command's: normal MACs, each once, nothing else. */
export function isBootEntriesPayload(payload: unknown): payload is BootEntriesPayload {
  if (typeof payload !== 'object' || payload === null || Object.keys(payload).join(',') !== 'entries')
    return false;
  const entries = (payload as { entries: unknown }).entries;
  if (!Array.isArray(entries) || entries.length > MAX_BOOT_ENTRIES) return false;
  const seen = new Set<string>();
  for (const entry of entries as unknown[]) {
    if (typeof entry !== 'object' || entry === null) return false;
    const { mac, boot } = entry as Record<string, unknown>;
    if (Object.keys(entry).sort().join(',') !== 'boot,mac' || boot !== 'local-disk') return false;
    if (typeof mac !== 'string' || normalizeMac(mac) !== mac || seen.has(mac)) return false;
    seen.add(mac);
  }
  return true;
}
