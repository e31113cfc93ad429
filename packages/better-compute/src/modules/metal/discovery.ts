/**
 * PXE discovery (docs/metal.md, docs/decisions/metal-discovery.md): what a site's agent saw
 * PXE-booting from a MAC with no boot entry, kept 24 hours per site and MAC, and the one way a MAC
 * becomes a machine's, metal.confirmMac. A report is unauthenticated DHCP data relayed by the
 * agent, so it never binds anything: it only lets a person see a candidate and decide.
 */
import { checkMac, ComputeError } from '@better-compute/core';
import { type Kysely, sql } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { siteOfSiteAgent, tenantHasSite } from '../fleet/queries.js';
import { pushBootEntries } from './boot-entries.js';
import { machineView } from './service.js';
import { type MachineRow, metalDb } from './tables.js';

/** How long a discovery is kept and shown: the console guide's 24 hours. */
const DISCOVERY_KEEP_MS = 24 * 60 * 60 * 1000;
/**
 * The most MACs one site keeps at a time. Anyone on the provisioning network can send DHCP with
 * made-up MACs; past this, a new MAC is dropped until older ones age out, and known ones still count.
 */
const MAX_DISCOVERIES_PER_SITE = 1024;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What a site agent reports of one PXE request (protocol.ts's `pxe.discovered`, checked there). */
export interface PxeReport {
  mac: string;
  uuid?: string | undefined;
}

export type DiscoveryOutcome =
  | { outcome: 'recorded'; siteId: string }
  | { outcome: 'refused'; reason: string }
  | { outcome: 'dropped'; reason: string };

/**
 * Records a site agent's report for the agent's own site, in one transaction. The site comes from
 * the node's pool, never from the report, so an agent can only speak for its own site; a node that
 * is not a site agent is refused. Times are the gateway's, not the agent's clock.
 */
export async function recordPxeDiscovery(
  db: Kysely<ComputeTables>,
  nodeId: string,
  report: PxeReport,
  at: Date,
): Promise<DiscoveryOutcome> {
  const mac = (() => {
    try {
      return checkMac(report.mac);
    } catch {
      return null;
    }
  })();
  if (!mac) return { outcome: 'refused', reason: 'the MAC is not a network card’s' };
  const uuid = report.uuid?.toLowerCase();
  if (uuid !== undefined && !UUID.test(uuid)) return { outcome: 'refused', reason: 'the UUID is malformed' };
  return db.transaction().execute(async (trx) => {
    const site = await siteOfSiteAgent(trx, nodeId);
    if (!site) return { outcome: 'refused', reason: 'the node is not a site agent' };
    const table = metalDb(trx);
    await table
      .deleteFrom('compute.metal_pxe_discoveries')
      .where('site_id', '=', site.siteId)
      .where('last_seen_at', '<', new Date(at.getTime() - DISCOVERY_KEEP_MS))
      .execute();
    const known = await table
      .selectFrom('compute.metal_pxe_discoveries')
      .select('mac')
      .where('site_id', '=', site.siteId)
      .where('mac', '=', mac)
      .executeTakeFirst();
    if (!known) {
      const { count } = await table
        .selectFrom('compute.metal_pxe_discoveries')
        .select((eb) => eb.fn.countAll<string | number>().as('count'))
        .where('site_id', '=', site.siteId)
        .executeTakeFirstOrThrow();
      if (Number(count) >= MAX_DISCOVERIES_PER_SITE)
        return {
          outcome: 'dropped',
          reason: `site ${site.siteId} keeps ${MAX_DISCOVERIES_PER_SITE} MACs already`,
        };
    }
    await table
      .insertInto('compute.metal_pxe_discoveries')
      .values({
        site_id: site.siteId,
        tenant_id: site.tenantId,
        mac,
        uuid: uuid ?? null,
        agent_node_id: nodeId,
        first_seen_at: at,
        last_seen_at: at,
        times_seen: 1,
      })
      .onConflict((conflict) =>
        conflict.columns(['site_id', 'mac']).doUpdateSet({
          // A request without option 97 keeps the UUID an earlier one sent.
          uuid: sql`coalesce(excluded.uuid, compute.metal_pxe_discoveries.uuid)`,
          agent_node_id: nodeId,
          last_seen_at: at,
          times_seen: sql`compute.metal_pxe_discoveries.times_seen + 1`,
        }),
      )
      .execute();
    return { outcome: 'recorded', siteId: site.siteId };
  });
}

const iso = (value: Date | string) => new Date(value).toISOString();
const KIND_ORDER = { candidate: 0, unknown: 1, enrolled: 2 } as const;

function siteNotFound(siteId: string) {
  return new ComputeError('NOT_FOUND', `site ${siteId} does not exist`, {
    details: { id: siteId, field: 'siteId' },
    hint: 'List your sites with better-compute sites list.',
  });
}

/**
 * metal.discovered: the site's discoveries of the last 24 hours, each classified against the
 * tenant's machines of the site: `enrolled` when a machine has the MAC, `candidate` when the UUID
 * is a machine's that has no MAC yet, `unknown` otherwise; candidates first, newest first within.
 */
export async function listDiscovered(ctx: CallContext<{ siteId: string }>) {
  // Another tenant's site is not found, as every read of a site answers it.
  if (!(await tenantHasSite(ctx.db, ctx.tenantId, ctx.input.siteId))) throw siteNotFound(ctx.input.siteId);
  const since = new Date(ctx.now().getTime() - DISCOVERY_KEEP_MS);
  const db = metalDb(ctx.db);
  const [rows, machines] = await Promise.all([
    db
      .selectFrom('compute.metal_pxe_discoveries')
      .selectAll()
      .where('site_id', '=', ctx.input.siteId)
      .where('tenant_id', '=', ctx.tenantId)
      .where('last_seen_at', '>=', since)
      .execute(),
    db
      .selectFrom('compute.metal_machines')
      .select(['id', 'name', 'product_uuid', 'macs'])
      .where('site_id', '=', ctx.input.siteId)
      .where('tenant_id', '=', ctx.tenantId)
      .execute(),
  ]);
  const byMac = new Map<string, { id: string; name: string }>();
  const waitingByUuid = new Map<string, { id: string; name: string }>();
  for (const machine of machines) {
    for (const mac of machine.macs) byMac.set(mac, machine);
    if (machine.macs.length === 0) waitingByUuid.set(machine.product_uuid, machine);
  }
  const items = rows.map((row) => {
    const enrolled = byMac.get(row.mac);
    const candidate = !enrolled && row.uuid ? waitingByUuid.get(row.uuid) : undefined;
    const machine = enrolled ?? candidate ?? null;
    return {
      mac: row.mac,
      uuid: row.uuid,
      kind: enrolled ? ('enrolled' as const) : candidate ? ('candidate' as const) : ('unknown' as const),
      machineId: machine?.id ?? null,
      machineName: machine?.name ?? null,
      firstSeenAt: iso(row.first_seen_at),
      lastSeenAt: iso(row.last_seen_at),
      timesSeen: row.times_seen,
    };
  });
  items.sort(
    (a, b) =>
      KIND_ORDER[a.kind] - KIND_ORDER[b.kind] ||
      b.lastSeenAt.localeCompare(a.lastSeenAt) ||
      a.mac.localeCompare(b.mac),
  );
  return { siteId: ctx.input.siteId, items };
}

/**
 * metal.confirmMac: binds `mac` as the PXE MAC of a machine enrolled without MACs, in the call's
 * transaction. The machine row is locked, so two confirmations of one machine cannot both pass;
 * another machine of the site with the MAC is CONFLICT, a machine that has MACs INVALID_STATE. The
 * site's agents that run the provisioning network are sent its new boot entries (boot-entries.ts).
 */
export async function confirmMac(ctx: CallContext<{ machineId: string; mac: string }>) {
  const mac = checkMac(ctx.input.mac);
  const db = metalDb(ctx.db);
  const row: MachineRow | undefined = await db
    .selectFrom('compute.metal_machines')
    .selectAll()
    .where('id', '=', ctx.input.machineId)
    .where('tenant_id', '=', ctx.tenantId)
    .forUpdate()
    .executeTakeFirst();
  if (!row)
    throw new ComputeError('NOT_FOUND', `machine ${ctx.input.machineId} does not exist`, {
      details: { id: ctx.input.machineId },
      hint: 'List the machines you can see with better-compute metal list.',
    });
  if (row.macs.length > 0)
    throw new ComputeError(
      'INVALID_STATE',
      `machine ${row.id} has its MACs already (${row.macs.join(', ')}); confirm-mac binds a machine enrolled without any`,
      {
        details: { id: row.id, macs: row.macs, reason: 'has-macs' },
        hint: `See them with better-compute metal get ${row.id}.`,
      },
    );
  const holder = await db
    .selectFrom('compute.metal_machines')
    .select(['id', 'name'])
    .where('site_id', '=', row.site_id)
    .where('id', '<>', row.id)
    .where(sql<boolean>`${mac} = any(macs)`)
    .executeTakeFirst();
  if (holder)
    throw new ComputeError(
      'CONFLICT',
      `MAC ${mac} is machine ${holder.id}'s (${holder.name}) at site ${row.site_id}`,
      {
        details: { mac, id: holder.id },
        hint: `Check the MAC on the machine's label or BMC; better-compute metal get ${holder.id} shows who has it.`,
      },
    );
  const now = ctx.now();
  const updated = await db
    .updateTable('compute.metal_machines')
    .set({ macs: [mac], version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  // The site's agents answer the MAC from now on, in this transaction with the binding.
  await pushBootEntries(ctx.db, ctx.tenantId, row.site_id, now, (event) => ctx.emit(event));
  ctx.emit({
    type: 'node.pxe-mac.confirmed',
    subject: { type: 'machine', id: row.id },
    data: { siteId: row.site_id, mac, productUuid: row.product_uuid },
  });
  return machineView(updated);
}
