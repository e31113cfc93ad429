/**
 * The metal.boot-entries command: the complete set of MACs a site's machines have bound, as the
 * control plane sends it to the site's agents that run the provisioning network. The agent answers
 * exactly these MACs with a boot entry and drops any entry not listed, so a lost or repeated
 * command is mended by the next one. A bound MAC boots `local-disk` (iPXE hands the machine back
 * to its own disk) unless a workflow needs the machine on the network: then its entry is the site
 * agent's deploy ramdisk, with the purpose the ramdisk's agent carries out (`inspect`: report the
 * hardware; `clean`: erase the disks' metadata and report what it erased). The agent adds the ramdisk's files and a one-time report token itself, so nothing
 * here is a secret or a path.
 */
import { normalizeMac } from './mac.js';

export const BOOT_ENTRIES_KIND = 'metal.boot-entries';
/** The most MACs one command names: a site's machines, at 16 MACs each for 256 machines. */
export const MAX_BOOT_ENTRIES = 4096;

/** What the deploy ramdisk is booted for. */
export const RAMDISK_PURPOSES = ['inspect', 'clean'] as const;
export type RamdiskPurpose = (typeof RAMDISK_PURPOSES)[number];
/** The field of a ramdisk's report that holds its findings, by the purpose it was booted for. */
export const RAMDISK_FINDINGS: Readonly<Record<RamdiskPurpose, 'inventory' | 'cleaning'>> = {
  inspect: 'inventory',
  clean: 'cleaning',
};

export type BootEntryItem =
  { mac: string; boot: 'local-disk' } | { mac: string; boot: 'ramdisk'; purpose: RamdiskPurpose };

export interface BootEntriesPayload {
  entries: BootEntryItem[];
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
    const { mac, boot, purpose } = entry as Record<string, unknown>;
    const keys = Object.keys(entry).sort().join(',');
    const localDisk = keys === 'boot,mac' && boot === 'local-disk';
    const ramdisk =
      keys === 'boot,mac,purpose' &&
      boot === 'ramdisk' &&
      (RAMDISK_PURPOSES as readonly unknown[]).includes(purpose);
    if (!localDisk && !ramdisk) return false;
    if (typeof mac !== 'string' || normalizeMac(mac) !== mac || seen.has(mac)) return false;
    seen.add(mac);
  }
  return true;
}
