/**
 * The live fleet as fleet configuration sees it, read through the owning modules' own readers
 * (fleet, vps, sandboxes: never their tables), and the FleetConfig document `fleet.export` makes of
 * it. What the document holds: every site, the active pools with their offers and the quotas that
 * set a limit, and the flavors and sandbox templates of those pools. Archived pools (never
 * unarchived) and deleted flavors and templates are left out; no object is marked as made by the
 * fleet itself today, so nothing else is (docs/decisions/fleet-config.md).
 */
import {
  type FleetProviderAccount,
  FLEET_CONFIG_KIND,
  FLEET_CONFIG_VERSION,
  type FleetConfig,
  type FleetFlavor,
  type FleetPool,
  type FleetSite,
  type FleetTemplate,
} from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { platformObjects, type PlatformPool, type PlatformSite } from '../fleet/index.js';
import { tenantAccounts } from '../provider-accounts/index.js';
import { tenantTemplates } from '../sandboxes/index.js';
import { tenantFlavors } from '../vps/index.js';

export type LiveSite = PlatformSite;
export type LivePool = PlatformPool;

export interface LiveFlavor extends Omit<FleetFlavor, 'pool'> {
  id: string;
  poolId: string;
  version: number;
}

export interface LiveTemplate extends Omit<FleetTemplate, 'pool' | 'flavor' | 'image' | 'warmMax'> {
  id: string;
  poolId: string;
  flavorId: string;
  imageId: string;
  warmMax: number;
  version: number;
}

/** A provider account: its document, whose credentials are secret references only. */
export interface LiveAccount {
  id: string;
  name: string;
  version: number;
  config: FleetProviderAccount;
}

export interface LiveFleet {
  tenantId: string;
  sites: LiveSite[];
  accounts: LiveAccount[];
  /** Archived pools too: their names stay taken and their sites stay. */
  pools: LivePool[];
  flavors: LiveFlavor[];
  templates: LiveTemplate[];
}

/** The tenant's platform objects, in a handful of statements whatever their number. */
export async function readLiveFleet(db: Kysely<ComputeTables>, tenantId: string): Promise<LiveFleet> {
  const { sites, pools } = await platformObjects(db, tenantId);
  const flavors = (await tenantFlavors(db, tenantId)).map((row): LiveFlavor => ({
    id: row.id,
    poolId: row.pool_id,
    name: row.name,
    vcpus: row.vcpus,
    memoryMiB: row.memory_mib,
    diskGiB: row.disk_gib,
    gpus: row.gpus,
    gpuModel: row.gpu_model,
    description: row.description,
    image:
      row.image_os && row.image_channel && row.image_channel !== 'deprecated'
        ? { os: row.image_os, channel: row.image_channel }
        : null,
    version: row.version,
  }));
  const templates = (await tenantTemplates(db, tenantId)).map((row): LiveTemplate => ({
    id: row.id,
    poolId: row.pool_id,
    flavorId: row.flavor_id,
    imageId: row.image_id,
    name: row.name,
    runtime: row.runtime,
    userData: row.user_data,
    defaultTtlSeconds: row.default_ttl_seconds,
    maxTtlSeconds: row.max_ttl_seconds,
    warmMin: row.warm_min,
    warmMax: row.warm_max,
    env: row.env.map((entry) => ({ name: entry.name, secretRef: entry.secretRef })),
    network: row.network,
    volumes: row.volumes.map((v) => ({ volumeId: v.volumeId, path: v.path, readOnly: v.readOnly })),
    version: row.version,
  }));
  const accounts = await tenantAccounts(db, tenantId);
  return { tenantId, sites, accounts, pools, flavors, templates };
}

/** Whether a live pool is in the document's scope: active (an archived pool is never unarchived). */
export function inScope(pool: LivePool | undefined): pool is LivePool {
  return pool !== undefined && pool.state === 'active';
}

export function siteSpecOf(site: LiveSite): FleetSite {
  return { name: site.name, region: site.region, description: site.description, labels: site.labels };
}

/** A pool's document form: its quotas that set a limit, by tenant. */
export function poolSpecOf(pool: LivePool): FleetPool {
  const quotas: FleetPool['quotas'] = {};
  for (const quota of pool.quotas) {
    if (quota.limit === null) continue;
    (quotas[quota.tenantId] ??= {})[quota.resource] = quota.limit;
  }
  return {
    site: pool.siteId,
    name: pool.name,
    class: pool.class,
    driver: pool.driver,
    description: pool.description,
    labels: pool.labels,
    offers: pool.offers,
    quotas,
  };
}

export function flavorSpecOf(flavor: LiveFlavor): FleetFlavor {
  const { id: _id, poolId, version: _version, ...fields } = flavor;
  return { pool: poolId, ...fields };
}

export function templateSpecOf(template: LiveTemplate): FleetTemplate {
  const { id: _id, poolId, flavorId, imageId, version: _version, ...fields } = template;
  return {
    pool: poolId,
    name: fields.name,
    runtime: fields.runtime,
    flavor: flavorId,
    image: imageId,
    userData: fields.userData,
    defaultTtlSeconds: fields.defaultTtlSeconds,
    maxTtlSeconds: fields.maxTtlSeconds,
    warmMin: fields.warmMin,
    warmMax: fields.warmMax,
    env: fields.env,
    network: fields.network,
    volumes: fields.volumes,
  };
}

/** The document `fleet.export` answers: every object keyed by its id, in id order. */
export function exportDocument(live: LiveFleet): FleetConfig {
  const active = new Map(live.pools.filter((p) => inScope(p)).map((p) => [p.id, p]));
  return {
    kind: FLEET_CONFIG_KIND,
    version: FLEET_CONFIG_VERSION,
    tenantId: live.tenantId,
    sites: Object.fromEntries(live.sites.map((site) => [site.id, siteSpecOf(site)])),
    providerAccounts: Object.fromEntries(live.accounts.map((account) => [account.id, account.config])),
    pools: Object.fromEntries([...active.values()].map((pool) => [pool.id, poolSpecOf(pool)])),
    flavors: Object.fromEntries(
      live.flavors.filter((f) => active.has(f.poolId)).map((flavor) => [flavor.id, flavorSpecOf(flavor)]),
    ),
    sandboxTemplates: Object.fromEntries(
      live.templates
        .filter((t) => active.has(t.poolId))
        .map((template) => [template.id, templateSpecOf(template)]),
    ),
  };
}
