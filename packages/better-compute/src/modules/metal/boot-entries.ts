/**
 * What a site's agents answer on the provisioning network: every MAC a machine of the site has
 * bound, sent whole as a metal.boot-entries command (core's boot-entries.ts) to each site agent
 * whose daemon said `site.pxe` in its hello (it runs the network: bcd run --pxe-dir). Sent when
 * the set changes (an enrolment with MACs, metal.confirmMac, a machine entering or leaving a state
 * that boots the ramdisk) in that call's transaction, and to an agent at each hello, since the
 * agent keeps its entries in memory only.
 */
import {
  BOOT_ENTRIES_KIND,
  type BootEntriesPayload,
  type BootEntryItem,
  MAX_BOOT_ENTRIES,
} from '@better-compute/core';
import type { CatalogEventDraft } from '@better-compute/events';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { queueCommand } from '../commands/service.js';
import { nodeSession } from '../commands/sessions.js';
import { siteAgentsOf, siteOfSiteAgent } from '../fleet/queries.js';
import { RAMDISK_STATES } from './ramdisk.js';
import { metalDb } from './tables.js';

/** The capability a site agent's hello says when it runs the provisioning network. */
export const PXE_CAPABILITY = 'site.pxe';

/**
 * The site's bound MACs and what each boots: the deploy ramdisk while its machine is in a state
 * that needs it (inspecting, cleaning: ramdisk.ts's RAMDISK_STATES), its own disk otherwise. A MAC
 * two machines claim (one enrolled with it, another confirmed) keeps the first in id order.
 */
async function siteBootEntries(
  db: Kysely<ComputeTables>,
  tenantId: string,
  siteId: string,
): Promise<BootEntriesPayload> {
  const machines = await metalDb(db)
    .selectFrom('compute.metal_machines')
    .select(['macs', 'provision_state'])
    .where('tenant_id', '=', tenantId)
    .where('site_id', '=', siteId)
    .orderBy('id')
    .execute();
  const entries = new Map<string, BootEntryItem>();
  for (const machine of machines) {
    const purpose = RAMDISK_STATES[machine.provision_state];
    for (const mac of machine.macs)
      if (!entries.has(mac))
        entries.set(mac, purpose ? { mac, boot: 'ramdisk', purpose } : { mac, boot: 'local-disk' });
  }
  // Past the cap (4096 MACs, 256 machines of 16) the MACs last in order are left out rather than the command refused.
  return {
    entries: [...entries.values()].sort((a, b) => (a.mac < b.mac ? -1 : 1)).slice(0, MAX_BOOT_ENTRIES),
  };
}

async function runsProvisioningNetwork(db: Kysely<ComputeTables>, nodeId: string): Promise<boolean> {
  const session = await nodeSession(db, nodeId);
  return session?.capabilities.includes(PXE_CAPABILITY) ?? false;
}

/** Whether a site agent of the site runs the provisioning network now (said `site.pxe` in its hello). */
export async function siteRunsProvisioningNetwork(
  db: Kysely<ComputeTables>,
  tenantId: string,
  siteId: string,
): Promise<boolean> {
  for (const nodeId of await siteAgentsOf(db, tenantId, siteId))
    if (await runsProvisioningNetwork(db, nodeId)) return true;
  return false;
}

/** Queues the site's entries for each of its agents that runs the network; in the caller's transaction. */
export async function pushBootEntries(
  db: Kysely<ComputeTables>,
  tenantId: string,
  siteId: string,
  now: Date,
  emit: (event: CatalogEventDraft) => void,
): Promise<void> {
  const payload = await siteBootEntries(db, tenantId, siteId);
  for (const nodeId of await siteAgentsOf(db, tenantId, siteId))
    if (await runsProvisioningNetwork(db, nodeId))
      await queueCommand(
        db,
        { tenantId, nodeId, kind: BOOT_ENTRIES_KIND, payload: { ...payload }, now },
        emit,
      );
}

/**
 * At a site agent's hello that says `site.pxe`: its site's entries, queued for it alone (with the
 * command's event) in one transaction. Nothing for a node that is not a site agent.
 */
export async function pushBootEntriesTo(
  db: Kysely<ComputeTables>,
  nodeId: string,
  now: Date,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const site = await siteOfSiteAgent(trx, nodeId);
    if (!site) return false;
    const payload = await siteBootEntries(trx, site.tenantId, site.siteId);
    const events: CatalogEventDraft[] = [];
    await queueCommand(
      trx,
      { tenantId: site.tenantId, nodeId, kind: BOOT_ENTRIES_KIND, payload: { ...payload }, now },
      (event) => events.push(event),
    );
    await writeEvents(trx, events, {
      tenantId: site.tenantId,
      actor: null,
      requestId: `boot-entries:${nodeId}`,
    });
    return true;
  });
}
