/**
 * Which live object each entry of a FleetConfig document is (docs/decisions/fleet-config.md): an
 * entry keyed by an id is that object; an entry keyed by a key of the author's own is the live
 * object of its name that no id key claims (so a document applied once plans nothing the second
 * time), else a new object. References between entries (a pool's `site`, a template's `flavor`)
 * name an entry's key, or a live object by id. What cannot be resolved is a blocked change, never
 * a guess.
 */
import { isId } from '@better-compute/core';
import type { FleetConfig, FleetObjectKind } from '@better-compute/core/methods';
import {
  inScope,
  type LiveAccount,
  type LiveFleet,
  type LiveFlavor,
  type LivePool,
  type LiveSite,
  type LiveTemplate,
} from './live.js';

export type Section = 'sites' | 'pools' | 'flavors' | 'sandboxTemplates' | 'providerAccounts';

export const SECTION: Record<FleetObjectKind, Section> = {
  site: 'sites',
  pool: 'pools',
  flavor: 'flavors',
  sandboxTemplate: 'sandboxTemplates',
  providerAccount: 'providerAccounts',
};

/** How each kind is named in messages. */
export const NOUN: Record<FleetObjectKind, string> = {
  site: 'site',
  pool: 'pool',
  flavor: 'flavor',
  sandboxTemplate: 'sandbox template',
  providerAccount: 'provider account',
};

type LiveOf = {
  site: LiveSite;
  pool: LivePool;
  flavor: LiveFlavor;
  sandboxTemplate: LiveTemplate;
  providerAccount: LiveAccount;
};
type SpecOf = {
  site: FleetConfig['sites'][string];
  pool: FleetConfig['pools'][string];
  flavor: FleetConfig['flavors'][string];
  sandboxTemplate: FleetConfig['sandboxTemplates'][string];
  providerAccount: FleetConfig['providerAccounts'][string];
};

/** One object of the document, and the live object it is (null: the plan creates it). */
export interface Entry<K extends FleetObjectKind = FleetObjectKind> {
  kind: K;
  key: string;
  spec: SpecOf[K];
  live: LiveOf[K] | null;
  /** Why its change cannot be made; empty when it can. */
  blocked: string[];
}

/** What a reference names: an entry of the document, or a live object the document leaves out. */
export type Target = { entry: Entry; liveId: string | null } | { entry: null; liveId: string };

export interface Matched {
  sites: Entry<'site'>[];
  pools: Entry<'pool'>[];
  flavors: Entry<'flavor'>[];
  templates: Entry<'sandboxTemplate'>[];
  accounts: Entry<'providerAccount'>[];
  /** The live objects in scope that no entry is, by kind: what --prune deletes. */
  unmatched: {
    sites: LiveSite[];
    pools: LivePool[];
    flavors: LiveFlavor[];
    templates: LiveTemplate[];
    accounts: LiveAccount[];
  };
  /** Resolves a reference of `kind` (a pool's `site`: 'site'), or says why it cannot be. */
  resolve(kind: FleetObjectKind, ref: string): Target | { problem: string };
}

function byId<T extends { id: string }>(rows: readonly T[]): Map<string, T> {
  return new Map(rows.map((row) => [row.id, row]));
}

/** Rows by a key of theirs; the first row of a key wins, as a search in order would. */
function firstBy<T>(rows: Iterable<T>, key: (row: T) => string): Map<string, T> {
  const map = new Map<string, T>();
  for (const row of rows) if (!map.has(key(row))) map.set(key(row), row);
  return map;
}

/**
 * Matches every entry of `document` with the live fleet. Entries keyed by id claim their object
 * first; then entries keyed by a key of their own adopt the unclaimed live object of their name.
 */
export function matchDocument(document: FleetConfig, live: LiveFleet, prune: boolean): Matched {
  const sitesById = byId(live.sites);
  const poolsById = byId(live.pools);
  const activePools = new Map(live.pools.filter((p) => inScope(p)).map((p) => [p.id, p]));
  const flavorsById = byId(live.flavors.filter((f) => activePools.has(f.poolId)));
  const templatesById = byId(live.templates.filter((t) => activePools.has(t.poolId)));
  // Looked up once per entry: a document of thousands of objects is matched in linear time.
  const siteByName = firstBy(live.sites, (s) => s.name);
  const poolByName = firstBy(live.pools, (p) => p.name);
  const flavorByName = firstBy(live.flavors, (f) => `${f.poolId}/${f.name}`);
  const templateByName = firstBy(templatesById.values(), (t) => t.name);
  const accountsById = byId(live.accounts);
  const accountByName = firstBy(live.accounts, (a) => a.name);
  const entries = {
    sites: [] as Entry<'site'>[],
    pools: [] as Entry<'pool'>[],
    flavors: [] as Entry<'flavor'>[],
    templates: [] as Entry<'sandboxTemplate'>[],
    accounts: [] as Entry<'providerAccount'>[],
  };
  const entryOf = new Map<string, Entry>();
  const claimed = new Set<string>();

  function add<K extends FleetObjectKind>(list: Entry<K>[], kind: K, key: string, spec: SpecOf[K]) {
    const entry: Entry<K> = { kind, key, spec, live: null, blocked: [] };
    list.push(entry);
    entryOf.set(`${SECTION[kind]}/${key}`, entry as unknown as Entry);
    return entry;
  }

  /** Id keys claim their object (or are blocked); the rest wait for their name's turn. */
  function claimIds<K extends FleetObjectKind>(
    kind: K,
    list: Entry<K>[],
    specs: Record<string, SpecOf[K]>,
    find: (id: string) => LiveOf[K] | undefined,
    outOfScope: (id: string) => string | undefined,
  ): Entry<K>[] {
    const byName: Entry<K>[] = [];
    for (const [key, spec] of Object.entries(specs).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const entry = add(list, kind, key, spec);
      if (!isId(kind, key)) {
        byName.push(entry);
        continue;
      }
      const found = find(key);
      if (found) {
        entry.live = found;
        claimed.add(key);
        continue;
      }
      entry.blocked.push(
        outOfScope(key) ??
          `no ${NOUN[kind]} has id ${key}: ids are the fleet’s own, so key a new ${NOUN[kind]} by a name of your own (it was deleted since the export, or the id is mistyped)`,
      );
    }
    return byName;
  }

  /** A name key adopts the live object of its name no id key claimed. */
  function adopt<K extends FleetObjectKind>(entry: Entry<K>, candidate: LiveOf[K] | undefined): void {
    if (!candidate || claimed.has(candidate.id)) return;
    entry.live = candidate;
    claimed.add(candidate.id);
  }

  // Sites.
  for (const entry of claimIds(
    'site',
    entries.sites,
    document.sites,
    (id) => sitesById.get(id),
    () => undefined,
  )) {
    adopt(entry, siteByName.get(entry.spec.name));
  }
  // Pools: an archived pool is never changed, and keeps its name.
  const archivedNote = (id: string) =>
    poolsById.has(id)
      ? `pool ${id} is archived: an archived pool is never changed or unarchived, so leave it out of the document`
      : undefined;
  for (const entry of claimIds(
    'pool',
    entries.pools,
    document.pools,
    (id) => activePools.get(id),
    archivedNote,
  )) {
    const named = poolByName.get(entry.spec.name);
    if (named && named.state === 'archived' && !claimed.has(named.id))
      entry.blocked.push(
        `the name ${entry.spec.name} belongs to archived pool ${named.id} (pools keep their names): choose another name`,
      );
    else adopt(entry, named);
  }

  function resolve(kind: FleetObjectKind, ref: string): Target | { problem: string } {
    const entry = entryOf.get(`${SECTION[kind]}/${ref}`);
    if (entry) {
      // A live object stays where it is whatever its own change: only a new one may be missing.
      if (entry.live) return { entry, liveId: entry.live.id };
      if (entry.blocked.length > 0) return { problem: `its new ${NOUN[kind]} ${ref} is blocked` };
      return { entry, liveId: null };
    }
    const found =
      kind === 'site'
        ? sitesById.get(ref)
        : kind === 'pool'
          ? activePools.get(ref)
          : kind === 'flavor'
            ? flavorsById.get(ref)
            : kind === 'sandboxTemplate'
              ? templatesById.get(ref)
              : accountsById.get(ref);
    if (found && isId(kind, ref)) {
      if (prune)
        return {
          problem: `it names ${NOUN[kind]} ${ref}, which the document leaves out, so --prune deletes it: add ${ref} to ${SECTION[kind]}`,
        };
      return { entry: null, liveId: ref };
    }
    if (isId(kind, ref))
      return {
        problem: `it names ${NOUN[kind]} ${ref}, which does not exist${kind === 'pool' && poolsById.has(ref) ? ' but archived' : ''}`,
      };
    return {
      problem: `it names ${ref}, which is no key of ${SECTION[kind]} and no ${NOUN[kind]} id (a dangling name)`,
    };
  }

  // Flavors: named within their pool.
  for (const entry of claimIds(
    'flavor',
    entries.flavors,
    document.flavors,
    (id) => flavorsById.get(id),
    () => undefined,
  )) {
    const pool = resolve('pool', entry.spec.pool);
    const poolId = 'problem' in pool ? null : pool.liveId;
    if (poolId) adopt(entry, flavorByName.get(`${poolId}/${entry.spec.name}`));
  }
  // Sandbox templates: named within the tenant.
  for (const entry of claimIds(
    'sandboxTemplate',
    entries.templates,
    document.sandboxTemplates,
    (id) => templatesById.get(id),
    () => undefined,
  )) {
    adopt(entry, templateByName.get(entry.spec.name));
  }

  // Provider accounts: named within the tenant.
  for (const entry of claimIds(
    'providerAccount',
    entries.accounts,
    document.providerAccounts,
    (id) => accountsById.get(id),
    () => undefined,
  )) {
    adopt(entry, accountByName.get(entry.spec.name));
  }

  return {
    ...entries,
    unmatched: {
      sites: live.sites.filter((s) => !claimed.has(s.id)),
      pools: [...activePools.values()].filter((p) => !claimed.has(p.id)),
      flavors: [...flavorsById.values()].filter((f) => !claimed.has(f.id)),
      templates: [...templatesById.values()].filter((t) => !claimed.has(t.id)),
      accounts: live.accounts.filter((a) => !claimed.has(a.id)),
    },
    resolve,
  };
}
