/**
 * What the rest of the server uses of the metal module: the gateway opens a machine's BMC password
 * into the signed metal.bmc command for the site's agent (gateway/command-secrets.ts), and records
 * what site agents report: PXE discoveries and the deploy ramdisk's inspections and cleanings.
 */
export { createBmcSealer } from './sealing.js';
export { machineForBmc } from './bmc-target.js';
export { bmcPowerMember } from './service.js';
export { recordPxeDiscovery } from './discovery.js';
export { BOOT_ENTRIES_ENDED_JOB, recordCleaning, recordInspection } from './ramdisk.js';
export { pushBootEntriesTo, PXE_CAPABILITY } from './boot-entries.js';
