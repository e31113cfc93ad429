/**
 * The FleetConfig document (docs/fleet.md): a tenant's platform objects as one JSON document that
 * `fleet export` writes, `fleet plan` compares with the live fleet and `fleet apply` makes true.
 * Objects are keyed by id (`site_01…`); a new object is keyed by a name of the author's choosing and
 * referred to by that key until the apply gives it an id. Every field takes what the object's own
 * create and update methods take (the schemas are theirs), so a document that parses here is one
 * those methods accept. Secrets appear only as `secret://` references. The published JSON Schema
 * (`better-compute fleet schema`, docs/fleet-config.schema.json) is made from this schema.
 */
import { z } from 'zod';
import { idOf, tenantId } from './common.js';
import { flavorFields } from './flavors.js';
import { poolClass } from './pools.js';
import { providerAccountConfig } from './provider-accounts.js';
import { sandboxRuntime, templateFields } from './sandbox-schemas.js';
import { labels, resourceName } from './sites.js';

/** The IAM action every fleet method is decided on; only the root tenant's administrators hold it. */
export const FLEET_ADMIN_ACTION = 'compute:fleet:admin';
/** The document's `kind` and `version`: what a reader checks before anything else. */
export const FLEET_CONFIG_KIND = 'FleetConfig';
export const FLEET_CONFIG_VERSION = 1;
/** The largest document `fleet.plan` and `fleet.apply` take: some 50,000 quota rows. */
export const FLEET_DOCUMENT_MAX_BYTES = 4 * 1024 * 1024;
/** The most objects of one kind a document holds. */
export const FLEET_MAX_OBJECTS = 20_000;

/** The kinds of object a document holds, in the order they are created. */
export const fleetObjectKind = z.enum(['site', 'pool', 'flavor', 'sandboxTemplate', 'providerAccount']);
export type FleetObjectKind = z.infer<typeof fleetObjectKind>;

/** A key of the document: an object's id, or a key of the author's choosing for a new object. */
const fleetKey = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/,
    'must be an id (site_01…) or a key of your own: 1-100 letters, digits and . _ -',
  )
  .describe(
    'An object’s id (site_01…), or for a new object a key of your own: 1-100 letters, digits and . _ -',
  );

const reference = (what: string, section: string) =>
  fleetKey.describe(`The ${what}: its id, or its key in this document’s ${section}`);

const quotaLimit = z
  .number()
  .int()
  .min(0)
  .max(1_000_000)
  .describe('The most the tenant may hold (0 to 1,000,000); leave it out for no limit');

const fleetSiteSpec = z
  .object({
    name: resourceName,
    region: z
      .string()
      .min(1)
      .max(100)
      .nullable()
      .default(null)
      .describe('The region the site is in (1 to 100 characters), or null; never changed in place'),
    description: z.string().max(1000).default('').describe('What the site is, for people'),
    labels: labels.default({}),
  })
  .strict()
  .describe('A site: where machines live');

const fleetPoolSpec = z
  .object({
    site: reference('pool’s site', 'sites'),
    name: resourceName,
    class: poolClass.describe('What the pool’s machines serve: gpu, vps or metal; never changed in place'),
    driver: z
      .string()
      .min(1)
      .max(40)
      .default('bcd')
      .describe('The driver that runs the pool’s machines (bcd, or a plugin’s); never changed in place'),
    description: z.string().max(1000).default('').describe('What the pool is, for people'),
    labels: labels.default({}),
    offers: z
      .array(tenantId)
      .max(1000)
      .default([])
      .superRefine((tenants, ctx) => {
        const seen = new Set<string>();
        for (const tenant of tenants) {
          if (seen.has(tenant)) ctx.addIssue({ code: 'custom', message: `${tenant} is listed twice` });
          seen.add(tenant);
        }
      })
      .describe('The tenants the pool is offered to: every one of them, each once'),
    quotas: z
      .record(
        tenantId,
        z
          .object({ gpus: quotaLimit.optional(), reservations: quotaLimit.optional() })
          .strict()
          .describe('A tenant’s limits on the pool: gpus (held at once) and reservations (held at once)'),
      )
      .default({})
      .describe('Each tenant’s quotas on the pool, by tenant id: every limit the pool has'),
  })
  .strict()
  .describe('A pool of machines at a site, with its offers and quotas');

const fleetFlavorSpec = z
  .object({
    pool: reference('flavor’s VPS pool', 'pools'),
    name: flavorFields.flavorName,
    vcpus: flavorFields.vcpus,
    memoryMiB: flavorFields.memoryMiB,
    diskGiB: flavorFields.diskGiB,
    gpus: flavorFields.gpus.default(0),
    gpuModel: flavorFields.gpuModel
      .nullable()
      .default(null)
      .describe('The model of the flavor’s GPUs, like H100, or null'),
    description: flavorFields.description.default(''),
    image: flavorFields.flavorImage
      .nullable()
      .default(null)
      .describe('The image an instance boots when it names none (os and channel), or null'),
  })
  .strict()
  .describe('A VPS flavor: the shape of an instance or sandbox; its pool and name never change in place');

const fleetTemplateSpec = z
  .object({
    pool: reference('template’s VPS pool', 'pools'),
    name: resourceName,
    runtime: sandboxRuntime
      .default('bwrap')
      .describe('What runs its sandboxes: bwrap or qemu; never changed in place'),
    flavor: reference('flavor its sandboxes get', 'flavors'),
    image: idOf('image').describe('The image its sandboxes boot, like img_01…'),
    userData: templateFields.userData.default(null),
    defaultTtlSeconds: templateFields.defaultTtlSeconds.default(3600),
    maxTtlSeconds: templateFields.maxTtlSeconds.default(4 * 3600),
    warmMin: templateFields.warmMin.default(0),
    warmMax: templateFields.warmMax.optional(),
    env: templateFields.env.default([]),
    network: templateFields.network.default('egress'),
    volumes: z
      .array(
        z
          .object({
            volumeId: idOf('volume'),
            path: z.string().max(1024).describe('Where the volume is mounted, an absolute path'),
            readOnly: z.boolean().default(false).describe('Mounted read-only'),
          })
          .strict(),
      )
      .max(16)
      .default([])
      .describe('Volumes its sandboxes mount, by volumeId, with path and readOnly (at most 16)'),
  })
  .strict()
  .describe('A sandbox template; its pool, name and runtime never change in place');

/** At most FLEET_MAX_OBJECTS of one kind. */
const objects = <T extends z.ZodType>(spec: T, what: string) =>
  z
    .record(fleetKey, spec)
    .default({})
    .superRefine((record, ctx) => {
      const count = Object.keys(record).length;
      if (count > FLEET_MAX_OBJECTS)
        ctx.addIssue({
          code: 'custom',
          message: `must hold at most ${FLEET_MAX_OBJECTS} ${what}, not ${count}`,
        });
    });

export const fleetConfigSchema = z
  .object({
    $schema: z.string().max(2000).optional().describe('The JSON Schema the document follows, for editors'),
    kind: z.literal(FLEET_CONFIG_KIND).describe('Always FleetConfig'),
    version: z.literal(FLEET_CONFIG_VERSION).describe('The document format’s version: 1'),
    tenantId: tenantId.describe('The tenant whose platform objects the document holds (root)'),
    sites: objects(fleetSiteSpec, 'sites').describe('Sites, by id or by a key of your own for a new one'),
    providerAccounts: objects(providerAccountConfig, 'provider accounts').describe(
      'Provider accounts (pacct_…), by id or by a key of your own for a new one; credentials as secret:// references only',
    ),
    pools: objects(fleetPoolSpec, 'pools').describe('Pools, by id or by a key of your own for a new one'),
    flavors: objects(fleetFlavorSpec, 'flavors').describe(
      'VPS flavors, by id or by a key of your own for a new one',
    ),
    sandboxTemplates: objects(fleetTemplateSpec, 'sandbox templates').describe(
      'Sandbox templates, by id or by a key of your own for a new one',
    ),
  })
  .strict()
  .describe(
    'A FleetConfig document: a tenant’s sites, provider accounts, pools, flavors and sandbox templates',
  );

export type FleetConfig = z.output<typeof fleetConfigSchema>;
export type FleetConfigInput = z.input<typeof fleetConfigSchema>;
export type FleetSite = z.output<typeof fleetSiteSpec>;
export type FleetPool = z.output<typeof fleetPoolSpec>;
export type FleetFlavor = z.output<typeof fleetFlavorSpec>;
export type FleetTemplate = z.output<typeof fleetTemplateSpec>;
export type FleetProviderAccount = z.output<typeof providerAccountConfig>;

/** One field of a change: what it is and what it becomes. */
const fleetFieldChangeSchema = z.object({ field: z.string(), from: z.unknown(), to: z.unknown() });

/** One object a plan creates (+), updates (~) or deletes (-), or a change it cannot make (blocked). */
export const fleetChangeSchema = z.object({
  op: z.enum(['+', '~', '-']),
  kind: fleetObjectKind,
  /** The object's key in the document (its id for an object the document names by id or leaves out). */
  key: z.string(),
  /** The live object's id; null for one the plan creates. */
  id: z.string().nullable(),
  name: z.string(),
  /** What changes: for `~` the fields that differ, for `+` the fields set. */
  fields: z.array(fleetFieldChangeSchema),
  /** Why the change cannot be made; null when it can. */
  blocked: z.string().nullable(),
});

/** One API call `fleet.apply` makes, in order. */
export const fleetCallSchema = z.object({
  method: z.string(),
  input: z.record(z.string(), z.unknown()),
  /** Input fields filled at apply with the id of an object an earlier call creates (`siteId` → `sites/fra-2`). */
  refs: z.record(z.string(), z.string()),
  /** The document object this call creates, as `sites/KEY`; null for any other call. */
  creates: z.string().nullable(),
});

const counts = z.object({
  create: z.number().int(),
  update: z.number().int(),
  delete: z.number().int(),
  blocked: z.number().int(),
});

export const fleetPlanSchema = z.object({
  tenantId: z.string(),
  prune: z.boolean(),
  changes: z.array(fleetChangeSchema),
  calls: z.array(fleetCallSchema),
  counts,
  /** No change at all: the live fleet is what the document says. */
  empty: z.boolean(),
  /** The version of every live object the plan read, by id (a quota as `pool/tenant/resource`). */
  depends: z.record(z.string(), z.number().int()),
  /** SHA-256 (hex) over the calls and `depends`: apply refuses with CONFIG_DRIFT when it no longer matches. */
  planHash: z.string(),
});

export const fleetApplySchema = z.object({
  applyId: z.string(),
  tenantId: z.string(),
  planHash: z.string(),
  counts,
  calls: z.number().int(),
  appliedAt: z.string(),
});

export const fleetStatusSchema = z.object({
  tenantId: z.string(),
  /** The last apply, or null when none was made. */
  applied: z
    .object({ id: z.string(), appliedAt: z.string(), actor: z.string().nullable(), planHash: z.string() })
    .nullable(),
  drift: z.object({
    /** unknown: no apply yet, or the fleet.drift job has not looked since. */
    state: z.enum(['converged', 'drifted', 'unknown']),
    checkedAt: z.string().nullable(),
    /** When the fleet last moved from converged to drifted. */
    since: z.string().nullable(),
    /** What differs from the last apply: `+` added since, `~` changed, `-` gone. */
    changes: z.array(fleetChangeSchema),
  }),
});

export type FleetChange = z.infer<typeof fleetChangeSchema>;
export type FleetCall = z.infer<typeof fleetCallSchema>;
export type FleetPlan = z.infer<typeof fleetPlanSchema>;
export type FleetStatus = z.infer<typeof fleetStatusSchema>;

/** The document's JSON Schema (draft 2020-12), as a writer of documents reads it: defaults optional. */
export function fleetConfigJsonSchema(): Record<string, unknown> {
  const schema = fleetConfigSchema.toJSONSchema({ target: 'draft-2020-12', io: 'input' }) as Record<
    string,
    unknown
  >;
  return {
    $schema: schema.$schema,
    title: 'FleetConfig',
    ...Object.fromEntries(Object.entries(schema).filter(([key]) => key !== '$schema')),
  };
}
