/**
 * The PXE discovery page's view model (the console guide's "PXE discovery"): a machine whose BMC
 * cannot name its NICs is enrolled with only its product UUID and waits until a person confirms
 * its PXE MAC. The view lists the session tenant's sites, what the chosen site's agents saw
 * PXE-booting in the last 24 hours (`metal.discovered`), ordered by what needs a decision first,
 * and binds a MAC with `metal.confirmMac`.
 *
 * Nothing here binds a MAC by itself: discovery data is unauthenticated DHCP relayed by an agent,
 * so every binding is a person's call (the page asks first, naming the MAC and the machine).
 * Every string from the server a person reads passes through `safeCell`.
 */
import type { CallOutput, ComputeClient } from '@better-compute/client';
import { isId, normalizeMac, safeCell } from '@better-compute/core';
import type { LiveConsole, TrackedStore } from './live.js';
import { DetailStore, ListStore } from './stores.js';
import { ValueStore } from './subscribable.js';

/**
 * Core's MAC reader, the one the server checks `metal.confirmMac` with, so the form and the API
 * never disagree on what a MAC is: upper or lower case, `:` or `-`; a multicast or all-zero address
 * is not a NIC's. Answers the normal form (`52:54:00:12:34:56`) or null.
 *
 * @example
 * normalizeMac('52-54-00-AB-CD-EF'); // '52:54:00:ab:cd:ef'
 * normalizeMac('ff:ff:ff:ff:ff:ff'); // null (broadcast, not a NIC's)
 */
export { normalizeMac };

export type PxeDiscovery = CallOutput<'metal.discovered'>['items'][number];
export type PxeDiscoveryKind = PxeDiscovery['kind'];
export type PxeSite = CallOutput<'sites.get'>;
export type MetalMachine = CallOutput<'metal.confirmMac'>;

/** What the table shows: the site it was read for (null when the tenant has no site) and its rows. */
export interface PxeDiscoveryList {
  siteId: string | null;
  /** In `pxeCandidates` order. */
  items: PxeDiscovery[];
}

/** What needs a decision comes first: a candidate can be confirmed, an unknown machine looked into. */
const KIND_ORDER: Record<PxeDiscoveryKind, number> = { candidate: 0, unknown: 1, enrolled: 2 };

/**
 * The rows in the order a person decides them: candidates, then unknown machines, then enrolled
 * ones, newest (`lastSeenAt`) first within each, then by MAC so the order is stable. The server
 * answers in this order already; the view sorts again so the page does not depend on it.
 *
 * @example
 * pxeCandidates(answer.items).map((row) => row.kind); // ['candidate', 'unknown', 'unknown', 'enrolled']
 */
export function pxeCandidates(items: readonly PxeDiscovery[]): PxeDiscovery[] {
  return [...items].sort(
    (a, b) =>
      KIND_ORDER[a.kind] - KIND_ORDER[b.kind] ||
      Date.parse(b.lastSeenAt) - Date.parse(a.lastSeenAt) ||
      a.mac.localeCompare(b.mac),
  );
}

/**
 * Whether `value` is a machine id as `metal.confirmMac` takes it: a metal machine's id is a node id
 * (`node_…`, docs/decisions/console-pxe-discovery.md), checked with core's id rule.
 *
 * @example
 * isMachineId('node_01j9z3k4m5n6p7q8r9s0t1v2w3'); // true
 * isMachineId('r12-u07'); // false: a name, not an id
 */
export function isMachineId(value: string): boolean {
  return isId('node', value.trim());
}

/**
 * The "Bind a MAC by hand" form's two fields read as the call takes them: each in its normal form,
 * or null while it is not well formed; `ready` is when the button may enable.
 *
 * @example
 * bindByHandInput(' node_01j9z3k4m5n6p7q8r9s0t1v2w3 ', '52-54-00-12-34-56');
 * // { machineId: 'node_01j9…', mac: '52:54:00:12:34:56', ready: true }
 */
export function bindByHandInput(
  machineId: string,
  mac: string,
): { machineId: string | null; mac: string | null; ready: boolean } {
  const id = isMachineId(machineId) ? machineId.trim() : null;
  const normal = normalizeMac(mac);
  return { machineId: id, mac: normal, ready: id !== null && normal !== null };
}

/**
 * The question asked before a binding, in the console guide's words, naming the MAC and the machine.
 *
 * @example
 * pxeConfirmQuestion('52:54:00:12:34:56', 'node_01j9…');
 * // 'Bind 52:54:00:12:34:56 as the PXE MAC of node_01j9…? The machine will then boot from it.'
 */
export function pxeConfirmQuestion(mac: string, machineId: string): string {
  return `Bind ${safeCell(normalizeMac(mac) ?? mac)} as the PXE MAC of ${safeCell(machineId)}? The machine will then boot from it.`;
}

/** One row as a person reads it, every string through safeCell. */
export function describeDiscovery(row: PxeDiscovery): {
  /** `r12-u07 (node_…)`, or `no machine of this site` for an unknown one. */
  machine: string;
  /** The SMBIOS UUID the machine sent, or `none sent`. */
  uuid: string;
  /** What the row means and what may be done. */
  meaning: string;
} {
  const machine =
    row.machineId === null
      ? 'no machine of this site'
      : `${safeCell(row.machineName ?? '')} (${safeCell(row.machineId)})`;
  const meaning =
    row.kind === 'candidate'
      ? 'Sent the UUID of a machine enrolled without MACs: confirm if this is its PXE MAC.'
      : row.kind === 'enrolled'
        ? 'A machine of this site has this MAC already.'
        : 'No machine of this site matches: enroll it first if it is yours.';
  return { machine, uuid: row.uuid === null ? 'none sent' : safeCell(row.uuid), meaning };
}

export interface PxeDiscoveryViewOptions {
  /** The session's tenant: only its sites, and only its sites' discoveries, are shown. */
  tenantId: string;
  /** Sites per `sites.list` page; default 100. */
  sitePageSize?: number | undefined;
}

export interface PxeDiscoveryView {
  readonly tenantId: string;
  /** The tenant's sites, for the picker. */
  readonly sites: ListStore<PxeSite>;
  /** The chosen site's id; null until the sites are read, or when the tenant has none. */
  readonly site: ValueStore<string | null>;
  /** What the chosen site's agents saw PXE-booting, in `pxeCandidates` order. */
  readonly discovered: DetailStore<PxeDiscoveryList>;
  /** A machine's events (enrolled, its MAC confirmed elsewhere) change the rows' kinds: read again. */
  readonly tracked: TrackedStore;
  /** Registers `tracked` with a live console for the `machine` subject; returns the undo. */
  connect(live: Pick<LiveConsole, 'track'>): () => void;
  /** Reads the sites, chooses the first unless the chosen one is still there, and reads its discoveries. */
  load(): Promise<void>;
  /** Shows another site's discoveries. */
  selectSite(siteId: string): Promise<void>;
  /** Reads the chosen site's discoveries again (the Refresh button). */
  refresh(): Promise<void>;
  /**
   * Binds `mac` as the PXE MAC of `machineId` (`metal.confirmMac`) and reads the list again. Call it
   * only after the person said yes to `pxeConfirmQuestion`; the API decides and may refuse
   * (CONFLICT: another machine of the site has the MAC; INVALID_STATE: the machine has MACs).
   */
  confirmMac(machineId: string, mac: string): Promise<MetalMachine>;
}

/**
 * The PXE discovery view over a client, with no framework: subscribe to its stores (or use
 * console-kit/react's `useList`, `useDetail` and `useStore` on them).
 *
 * @example
 * const discovery = createPxeDiscoveryView(client, { tenantId: session.tenantId });
 * discovery.discovered.subscribe(() => render(discovery.discovered.get()));
 * await discovery.load();
 * const row = discovery.discovered.get().data?.items.find((item) => item.kind === 'candidate');
 * if (row && confirm(pxeConfirmQuestion(row.mac, row.machineId!)))
 *   await discovery.confirmMac(row.machineId!, row.mac);
 */
export function createPxeDiscoveryView(
  client: ComputeClient,
  options: PxeDiscoveryViewOptions,
): PxeDiscoveryView {
  const { tenantId } = options;
  const sitePageSize = options.sitePageSize ?? 100;
  const site = new ValueStore<string | null>(null);
  const sites = new ListStore<PxeSite>({
    load: (cursor) =>
      client.call('sites.list', { tenantId, limit: sitePageSize, ...(cursor ? { cursor } : {}) }),
    readOne: (siteId) => client.call('sites.get', { tenantId, siteId }),
    insertAt: 'end',
  });
  const discovered = new DetailStore<PxeDiscoveryList>(async () => {
    const siteId = site.get();
    if (siteId === null) return { siteId: null, items: [] };
    const answer = await client.call('metal.discovered', { tenantId, siteId });
    return { siteId: answer.siteId, items: pxeCandidates(answer.items) };
  });

  async function load(): Promise<void> {
    await sites.refresh();
    const { items } = sites.get();
    const chosen = site.get();
    if (chosen === null || !items.some((item) => item.id === chosen)) site.set(items[0]?.id ?? null);
    await discovered.refresh();
  }

  const tracked: TrackedStore = {
    get loaded() {
      return discovered.loaded;
    },
    refresh: () => discovered.refresh(),
    refreshItem: () => discovered.refresh(),
  };

  return {
    tenantId,
    sites,
    site,
    discovered,
    tracked,
    connect: (live) => live.track('machine', tracked),
    load,
    async selectSite(siteId) {
      site.set(siteId);
      await discovered.refresh();
    },
    refresh: () => discovered.refresh(),
    async confirmMac(machineId, mac) {
      let machine: MetalMachine;
      try {
        // The normal form when it is one; otherwise as typed, so the server's refusal names it.
        machine = await client.call('metal.confirmMac', {
          tenantId,
          machineId: machineId.trim(),
          mac: normalizeMac(mac) ?? mac,
        });
      } catch (error) {
        // Refused, perhaps because it changed meanwhile: show the rows as they are now.
        void discovered.refresh();
        throw error;
      }
      // The candidate is enrolled now: the caller sees the list that says so.
      await discovered.refresh();
      return machine;
    },
  };
}
