/**
 * A plan: what it takes to make the live fleet what a FleetConfig document says, in the spirit of
 * Terraform's plan. Each object is created (+), updated (~) or, only with --prune, deleted (-); a
 * change that cannot be made in place (a site's region, a pool's class, site or driver, a flavor's
 * pool or name, a template's pool, name or runtime, a dangling name, a name another object holds)
 * is BLOCKED and makes no call. The calls are the methods' own (sites.update, quotas.set, …) in the
 * order apply runs them, each update and delete with the `ifVersion` it was planned against; the
 * planHash is SHA-256 over the calls and the versions of every live object the plan read
 * (docs/decisions/fleet-config.md). Pure: the live fleet and the tenants IAM knows come in.
 */
import { canonicalJson, ROOT_TENANT } from '@better-compute/core';
import type {
  FleetCall,
  FleetChange,
  FleetConfig,
  FleetObjectKind,
  FleetPlan,
} from '@better-compute/core/methods';
import { createHash } from 'node:crypto';
import { flavorSpecOf, type LiveFleet, poolSpecOf, siteSpecOf, templateSpecOf } from './live.js';
import { type Entry, type Matched, matchDocument, NOUN, SECTION, type Target } from './match.js';

export interface PlanOptions {
  prune: boolean;
  /** The tenants the document names (offers, quotas) that IAM knows. */
  knownTenants: ReadonlySet<string>;
}

type Field = FleetChange['fields'][number];
type Stage =
  | 'dropTemplates'
  | 'dropAccounts'
  | 'sites'
  | 'accounts'
  | 'pools'
  | 'flavors'
  | 'templates'
  | 'dropFlavors'
  | 'dropPools'
  | 'dropSites';
const STAGES: readonly Stage[] = [
  'dropTemplates',
  'dropAccounts',
  'sites',
  'accounts',
  'pools',
  'flavors',
  'templates',
  'dropFlavors',
  'dropPools',
  'dropSites',
];

/** The tenants a document names besides its own: offered a pool, or given a quota on one. */
export function namedTenants(document: FleetConfig): string[] {
  const named = new Set<string>();
  for (const pool of Object.values(document.pools)) {
    for (const tenant of pool.offers) named.add(tenant);
    for (const tenant of Object.keys(pool.quotas)) named.add(tenant);
  }
  return [...named].sort();
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

/** The fields whose values differ, in the given order. */
function differences(
  fields: readonly string[],
  from: Record<string, unknown>,
  to: Record<string, unknown>,
): Field[] {
  return fields
    .filter((field) => !same(from[field], to[field]))
    .map((field) => ({ field, from: from[field], to: to[field] }));
}

export function planFleet(document: FleetConfig, live: LiveFleet, options: PlanOptions): FleetPlan {
  const { prune, knownTenants } = options;
  const matched = matchDocument(document, live, prune);
  const changes: FleetChange[] = [];
  const calls: Record<Stage, FleetCall[]> = Object.fromEntries(STAGES.map((s) => [s, []])) as never;
  const depends: Record<string, number> = {};
  const tenantId = live.tenantId;
  // The first call on a live object carries its version; later ones find it moved by the first.
  const versioned = new Set<string>();
  const ifVersion = (id: string, version: number) => {
    if (versioned.has(id)) return {};
    versioned.add(id);
    return { ifVersion: version };
  };
  const call = (
    stage: Stage,
    method: string,
    input: Record<string, unknown>,
    extra: Partial<FleetCall> = {},
  ) =>
    calls[stage].push({
      method,
      input: { tenantId, ...input },
      refs: extra.refs ?? {},
      creates: extra.creates ?? null,
    });

  /** A reference's id for a call's input, or the ref an earlier call's result fills. */
  function idOrRef(target: Target, field: string, kind: FleetObjectKind) {
    if (target.liveId) return { input: { [field]: target.liveId }, refs: {} };
    return { input: {}, refs: { [field]: `${SECTION[kind]}/${target.entry!.key}` } };
  }
  function note(entry: Entry, op: FleetChange['op'], fields: Field[]) {
    const change: FleetChange = {
      op,
      kind: entry.kind,
      key: entry.key,
      id: entry.live?.id ?? null,
      name: entry.spec.name,
      fields,
      blocked: entry.blocked.length ? entry.blocked.join('; ') : null,
    };
    changes.push(change);
    return change.blocked === null;
  }
  function resolved(entry: Entry, kind: FleetObjectKind, ref: string): Target | null {
    const target = matched.resolve(kind, ref);
    if ('problem' in target) {
      entry.blocked.push(target.problem);
      return null;
    }
    if (target.entry === null) {
      const found = findLive(live, kind, target.liveId);
      if (found) depends[target.liveId] = found.version;
    }
    return target;
  }

  checkNames(matched, live);

  for (const entry of matched.sites) {
    const want = entry.spec;
    if (!entry.live) {
      if (note(entry, '+', []))
        call(
          'sites',
          'sites.create',
          {
            name: want.name,
            ...(want.region === null ? {} : { region: want.region }),
            description: want.description,
            labels: want.labels,
          },
          { creates: `sites/${entry.key}` },
        );
      continue;
    }
    const site = entry.live;
    depends[site.id] = site.version;
    const fields = differences(['name', 'region', 'description', 'labels'], siteSpecOf(site), want);
    if (fields.some((f) => f.field === 'region'))
      entry.blocked.push(
        `a site’s region never changes in place (${site.region ?? 'none'} → ${want.region ?? 'none'}): make a new site`,
      );
    if (fields.length === 0 && entry.blocked.length === 0) continue;
    if (note(entry, '~', fields)) {
      const set = Object.fromEntries(fields.map((f) => [f.field, f.to]));
      call('sites', 'sites.update', { siteId: site.id, ...ifVersion(site.id, site.version), ...set });
    }
  }

  for (const entry of matched.pools) {
    const want = entry.spec;
    const site = resolved(entry, 'site', want.site);
    for (const tenant of [...want.offers, ...Object.keys(want.quotas)])
      if (!knownTenants.has(tenant) && tenant !== tenantId)
        entry.blocked.push(`tenant ${tenant} does not exist in IAM`);
    if (want.offers.includes(tenantId))
      entry.blocked.push(`a pool is always available to its owner, ${tenantId}: leave it out of offers`);
    entry.blocked = [...new Set(entry.blocked)];
    if (!entry.live) {
      if (!note(entry, '+', []) || !site) continue;
      const at = idOrRef(site, 'siteId', 'site');
      const pool = { input: {}, refs: { poolId: `pools/${entry.key}` } };
      call(
        'pools',
        'pools.create',
        {
          ...at.input,
          name: want.name,
          class: want.class,
          driver: want.driver,
          description: want.description,
          labels: want.labels,
        },
        { refs: at.refs, creates: `pools/${entry.key}` },
      );
      for (const tenant of want.offers) call('pools', 'pools.offer', { offerTenantId: tenant }, pool);
      for (const [tenant, limits] of Object.entries(want.quotas))
        for (const resource of ['gpus', 'reservations'] as const)
          if (limits[resource] !== undefined)
            call('pools', 'quotas.set', { subjectTenantId: tenant, resource, limit: limits[resource] }, pool);
      continue;
    }
    const pool = entry.live;
    depends[pool.id] = pool.version;
    for (const quota of pool.quotas)
      depends[`${pool.id}/${quota.tenantId}/${quota.resource}`] = quota.version;
    const have = poolSpecOf(pool);
    const fields = differences(['name', 'site', 'class', 'driver', 'description', 'labels', 'offers'], have, {
      ...want,
      site: site?.liveId ?? (site ? `(new) ${want.site}` : want.site),
      offers: [...want.offers].sort(),
    });
    const quotaChanges: {
      tenant: string;
      resource: 'gpus' | 'reservations';
      from: number | null;
      to: number | null;
    }[] = [];
    for (const tenant of [...new Set([...Object.keys(have.quotas), ...Object.keys(want.quotas)])].sort())
      for (const resource of ['gpus', 'reservations'] as const) {
        const from = have.quotas[tenant]?.[resource] ?? null;
        const to = want.quotas[tenant]?.[resource] ?? null;
        if (from !== to) {
          quotaChanges.push({ tenant, resource, from, to });
          fields.push({ field: `quotas.${tenant}.${resource}`, from, to });
        }
      }
    for (const fixed of ['site', 'class', 'driver'])
      if (fields.some((f) => f.field === fixed) && (fixed !== 'site' || site))
        entry.blocked.push(`a pool’s ${fixed} never changes in place: make a new pool and archive this one`);
    if (fields.length === 0 && entry.blocked.length === 0) continue;
    if (!note(entry, '~', fields)) continue;
    const set = Object.fromEntries(
      fields.filter((f) => ['name', 'description', 'labels'].includes(f.field)).map((f) => [f.field, f.to]),
    );
    if (Object.keys(set).length)
      call('pools', 'pools.update', { poolId: pool.id, ...ifVersion(pool.id, pool.version), ...set });
    const offered = new Set(pool.offers);
    for (const tenant of want.offers.filter((t) => !offered.has(t)).sort())
      call('pools', 'pools.offer', {
        poolId: pool.id,
        offerTenantId: tenant,
        ...ifVersion(pool.id, pool.version),
      });
    for (const tenant of pool.offers.filter((t) => !want.offers.includes(t)))
      call('pools', 'pools.unoffer', {
        poolId: pool.id,
        offerTenantId: tenant,
        ...ifVersion(pool.id, pool.version),
      });
    for (const q of quotaChanges) {
      const row = pool.quotas.find((r) => r.tenantId === q.tenant && r.resource === q.resource);
      call('pools', 'quotas.set', {
        poolId: pool.id,
        subjectTenantId: q.tenant,
        resource: q.resource,
        limit: q.to,
        ...(row ? { ifVersion: row.version } : {}),
      });
    }
  }

  // Provider accounts: the document is the account's whole config, replaced whole by an update.
  for (const entry of matched.accounts) {
    const want = entry.spec;
    if (!entry.live) {
      if (note(entry, '+', []))
        call(
          'accounts',
          'providerAccounts.create',
          { config: want },
          { creates: `providerAccounts/${entry.key}` },
        );
      continue;
    }
    const account = entry.live;
    depends[account.id] = account.version;
    const fields = differences(
      ['name', 'description', 'driver', 'settings', 'credentials'],
      account.config as unknown as Record<string, unknown>,
      want as unknown as Record<string, unknown>,
    );
    if (fields.some((f) => f.field === 'driver'))
      entry.blocked.push('a provider account’s driver never changes in place: make a new account');
    if (fields.length === 0 && entry.blocked.length === 0) continue;
    if (note(entry, '~', fields))
      call('accounts', 'providerAccounts.update', {
        accountId: account.id,
        ...ifVersion(account.id, account.version),
        config: want,
      });
  }

  const flavorFields = ['vcpus', 'memoryMiB', 'diskGiB', 'gpus', 'gpuModel', 'description', 'image'];
  for (const entry of matched.flavors) {
    const want = entry.spec;
    const pool = resolved(entry, 'pool', want.pool);
    if (pool?.entry && pool.entry.kind === 'pool' && (pool.entry.spec as { class: string }).class !== 'vps')
      entry.blocked.push(`its pool ${want.pool} is not a vps pool: flavors belong to vps pools`);
    if (!entry.live) {
      if (!note(entry, '+', []) || !pool) continue;
      const at = idOrRef(pool, 'poolId', 'pool');
      call(
        'flavors',
        'flavors.create',
        {
          ...at.input,
          name: want.name,
          vcpus: want.vcpus,
          memoryMiB: want.memoryMiB,
          diskGiB: want.diskGiB,
          gpus: want.gpus,
          ...(want.gpuModel === null ? {} : { gpuModel: want.gpuModel }),
          description: want.description,
          ...(want.image === null ? {} : { image: want.image }),
        },
        { refs: at.refs, creates: `flavors/${entry.key}` },
      );
      continue;
    }
    const flavor = entry.live;
    depends[flavor.id] = flavor.version;
    const have = flavorSpecOf(flavor);
    const fields = differences(['pool', 'name', ...flavorFields], have, {
      ...want,
      pool: pool?.liveId ?? (pool ? `(new) ${want.pool}` : want.pool),
    });
    if (pool && fields.some((f) => f.field === 'pool'))
      entry.blocked.push('a flavor’s pool never changes in place: make a new flavor there');
    if (fields.some((f) => f.field === 'name'))
      entry.blocked.push('a flavor’s name never changes in place: make a new flavor and delete this one');
    if (fields.length === 0 && entry.blocked.length === 0) continue;
    if (!note(entry, '~', fields)) continue;
    const set = Object.fromEntries(fields.map((f) => [f.field, f.to]));
    // gpus and gpuModel are checked together by the service: send both when either moves.
    if ('gpus' in set || 'gpuModel' in set) Object.assign(set, { gpus: want.gpus, gpuModel: want.gpuModel });
    call('flavors', 'flavors.update', {
      flavorId: flavor.id,
      ...ifVersion(flavor.id, flavor.version),
      ...set,
    });
  }

  const templateFields = [
    'userData',
    'defaultTtlSeconds',
    'maxTtlSeconds',
    'warmMin',
    'warmMax',
    'env',
    'network',
    'volumes',
  ];
  for (const entry of matched.templates) {
    const want = { ...entry.spec, warmMax: entry.spec.warmMax ?? entry.spec.warmMin };
    const pool = resolved(entry, 'pool', want.pool);
    const flavor = resolved(entry, 'flavor', want.flavor);
    if (!entry.live) {
      if (!note(entry, '+', []) || !pool || !flavor) continue;
      const at = idOrRef(pool, 'poolId', 'pool');
      const shape = idOrRef(flavor, 'flavorId', 'flavor');
      call(
        'templates',
        'sandboxTemplates.create',
        {
          ...at.input,
          ...shape.input,
          name: want.name,
          runtime: want.runtime,
          imageId: want.image,
          userData: want.userData,
          defaultTtlSeconds: want.defaultTtlSeconds,
          maxTtlSeconds: want.maxTtlSeconds,
          warmMin: want.warmMin,
          warmMax: want.warmMax,
          env: want.env,
          network: want.network,
          volumes: want.volumes,
        },
        { refs: { ...at.refs, ...shape.refs }, creates: `sandboxTemplates/${entry.key}` },
      );
      continue;
    }
    const template = entry.live;
    depends[template.id] = template.version;
    const have = templateSpecOf(template);
    const fields = differences(['pool', 'name', 'runtime', 'flavor', 'image', ...templateFields], have, {
      ...want,
      pool: pool?.liveId ?? (pool ? `(new) ${want.pool}` : want.pool),
      flavor: flavor?.liveId ?? (flavor ? `(new) ${want.flavor}` : want.flavor),
    });
    for (const fixed of ['pool', 'name', 'runtime'])
      if (fields.some((f) => f.field === fixed) && (fixed !== 'pool' || pool))
        entry.blocked.push(
          `a sandbox template’s ${fixed} never changes in place: make a new template and delete this one`,
        );
    if (fields.length === 0 && entry.blocked.length === 0) continue;
    if (!note(entry, '~', fields) || !flavor) continue;
    const set: Record<string, unknown> = Object.fromEntries(
      fields.filter((f) => templateFields.includes(f.field)).map((f) => [f.field, f.to]),
    );
    // A template's service derives one warm bound from the other when one is missing: send both.
    if ('warmMin' in set || 'warmMax' in set)
      Object.assign(set, { warmMin: want.warmMin, warmMax: want.warmMax });
    if (fields.some((f) => f.field === 'image')) set.imageId = want.image;
    const shape = fields.some((f) => f.field === 'flavor')
      ? idOrRef(flavor, 'flavorId', 'flavor')
      : { input: {}, refs: {} };
    call(
      'templates',
      'sandboxTemplates.update',
      {
        templateId: template.id,
        ...ifVersion(template.id, template.version),
        ...set,
        ...shape.input,
      },
      { refs: shape.refs },
    );
  }

  if (prune) prunePlan(matched, changes, call, depends);
  const ordered = STAGES.flatMap((stage) => calls[stage]);
  const counts = {
    create: changes.filter((c) => c.op === '+' && c.blocked === null).length,
    update: changes.filter((c) => c.op === '~' && c.blocked === null).length,
    delete: changes.filter((c) => c.op === '-' && c.blocked === null).length,
    blocked: changes.filter((c) => c.blocked !== null).length,
  };
  const sortedDepends = Object.fromEntries(Object.entries(depends).sort(([a], [b]) => (a < b ? -1 : 1)));
  return {
    tenantId,
    prune,
    changes,
    calls: ordered,
    counts,
    empty: changes.length === 0,
    planHash: planHash(tenantId, prune, ordered, sortedDepends),
    depends: sortedDepends,
  };
}

/** SHA-256 over what a plan would do and what it read: equal inputs, equal hashes, on any replica. */
function planHash(
  tenantId: string,
  prune: boolean,
  calls: readonly FleetCall[],
  depends: Record<string, number>,
): string {
  return createHash('sha256')
    .update(canonicalJson({ format: 'better-compute/fleet-plan/1', tenantId, prune, calls, depends }))
    .digest('hex');
}

function findLive(live: LiveFleet, kind: FleetObjectKind, id: string): { version: number } | undefined {
  const rows: readonly { id: string; version: number }[] =
    kind === 'site'
      ? live.sites
      : kind === 'pool'
        ? live.pools
        : kind === 'flavor'
          ? live.flavors
          : kind === 'sandboxTemplate'
            ? live.templates
            : live.accounts;
  return rows.find((row) => row.id === id);
}

/**
 * Names the document gives twice, and names another live object holds: both would fail in the
 * services, so both are blocked here (a rename onto a name being freed is two applies).
 */
function checkNames(matched: Matched, live: LiveFleet): void {
  const scopes: [Entry[], (entry: Entry) => string, { id: string; name: string; scope: string }[]][] = [
    [matched.sites, () => '', live.sites.map((s) => ({ id: s.id, name: s.name, scope: '' }))],
    [matched.pools, () => '', live.pools.map((p) => ({ id: p.id, name: p.name, scope: '' }))],
    [
      matched.flavors,
      (entry) => {
        const target = matched.resolve('pool', (entry.spec as { pool: string }).pool);
        return 'problem' in target ? `?${entry.key}` : (target.liveId ?? `pools/${target.entry!.key}`);
      },
      live.flavors.map((f) => ({ id: f.id, name: f.name, scope: f.poolId })),
    ],
    [matched.templates, () => '', live.templates.map((t) => ({ id: t.id, name: t.name, scope: '' }))],
    [matched.accounts, () => '', live.accounts.map((a) => ({ id: a.id, name: a.name, scope: '' }))],
  ];
  for (const [entries, scopeOf, rows] of scopes) {
    const held = new Map<string, { id: string }[]>();
    for (const row of rows) {
      const key = `${row.scope}/${row.name}`;
      held.set(key, [...(held.get(key) ?? []), row]);
    }
    const seen = new Map<string, Entry>();
    for (const entry of entries) {
      const name = `${scopeOf(entry)}/${entry.spec.name}`;
      const twin = seen.get(name);
      if (twin) {
        const why = `the document names two ${NOUN[entry.kind]}s ${entry.spec.name} (${twin.key} and ${entry.key})`;
        twin.blocked.push(why);
        entry.blocked.push(why);
      }
      seen.set(name, entry);
      if (entry.live && entry.live.name === entry.spec.name) continue;
      const holder = held.get(name)?.find((h) => h.id !== entry.live?.id);
      if (holder && !entry.blocked.some((b) => b.includes(holder.id)))
        entry.blocked.push(
          `${NOUN[entry.kind]} ${holder.id} is named ${entry.spec.name} now: rename or delete it in one apply, then take its name in the next`,
        );
    }
  }
}

/** With --prune: the live objects the document leaves out are deleted (a pool archived), last first. */
function prunePlan(
  matched: Matched,
  changes: FleetChange[],
  call: (stage: Stage, method: string, input: Record<string, unknown>) => void,
  depends: Record<string, number>,
): void {
  const drop = (
    kind: FleetObjectKind,
    row: { id: string; name: string; version: number },
    blocked: string | null,
  ) => {
    depends[row.id] = row.version;
    changes.push({ op: '-', kind, key: row.id, id: row.id, name: row.name, fields: [], blocked });
    return blocked === null;
  };
  for (const t of matched.unmatched.templates)
    if (drop('sandboxTemplate', t, null))
      call('dropTemplates', 'sandboxTemplates.delete', { templateId: t.id, ifVersion: t.version });
  for (const a of matched.unmatched.accounts)
    if (drop('providerAccount', a, null))
      call('dropAccounts', 'providerAccounts.delete', { accountId: a.id, ifVersion: a.version });
  for (const f of matched.unmatched.flavors)
    if (drop('flavor', f, null))
      call('dropFlavors', 'flavors.delete', { flavorId: f.id, ifVersion: f.version });
  for (const p of matched.unmatched.pools)
    if (drop('pool', p, null)) call('dropPools', 'pools.archive', { poolId: p.id, ifVersion: p.version });
  for (const s of matched.unmatched.sites) {
    const kept =
      s.pools > 0
        ? `site ${s.id} has had ${s.pools} pool(s); a site that has had a pool is kept as their record: put it back in the document`
        : null;
    if (drop('site', s, kept)) call('dropSites', 'sites.delete', { siteId: s.id, ifVersion: s.version });
  }
}

/** The document's tenant must be the acting one: the root tenant, for now. */
export function documentTenantProblem(document: FleetConfig, tenantId: string): string | null {
  if (document.tenantId === tenantId) return null;
  return `the document is tenant ${document.tenantId}'s; fleet configuration acts on the ${ROOT_TENANT} tenant's platform objects`;
}
