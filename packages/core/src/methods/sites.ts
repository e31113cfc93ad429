/**
 * The `sites` group, and the small schemas every fleet group shares (names, labels, versions).
 * A site is where machines live (a data centre, a rack row, a cloud region), owned by a tenant.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import {
  idempotencyKey,
  idOf,
  INT4_MAX,
  isoTime,
  MAX_LABELS,
  pageInputById,
  pageOf,
  tenantId,
} from './common.js';

/** A resource name: lowercase letters, digits and dashes. */
export const resourceName = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9-]{0,62}$/,
    'must be 1-63 lowercase letters, digits and dashes, starting with a letter or digit',
  )
  .describe('A name: 1-63 lowercase letters, digits and dashes, unique in its tenant');

/** A label key: `zone`, `example.com/rack`. */
export const labelKey = z
  .string()
  .regex(
    /^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/,
    'must be a label key like zone or example.com/rack',
  );
/** Taint keys under this prefix are compute's own: it sets and clears them; no caller does, or tolerates them. */
export const SYSTEM_TAINT_PREFIX = 'better-compute.io/';

/** A label value, and a taint's: empty, or up to 63 letters, digits, - _ . starting and ending with a letter or digit. */
export const labelValue = z
  .string()
  .regex(/^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$/, 'must be up to 63 letters, digits, - _ .');

/**
 * A record of labels, at most MAX_LABELS of them. A bad key is named with what a key must be: zod's
 * own "Invalid key in record" hides the key schema's message.
 */
export const labels = z
  .record(labelKey, labelValue, {
    error: (issue) =>
      issue.code === 'invalid_key'
        ? `label key ${JSON.stringify(issue.input)} must be up to 63 letters, digits, - _ . (starting and ending with a letter or digit), optionally after a DNS-name prefix and /, like zone or example.com/rack`
        : undefined,
  })
  .superRefine((record, ctx) => {
    const count = Object.keys(record).length;
    if (count > MAX_LABELS)
      ctx.addIssue({ code: 'custom', message: `must be at most ${MAX_LABELS} labels, not ${count}` });
  })
  .describe(`Labels, key to value (at most ${MAX_LABELS}): keys like zone or example.com/rack`);

/** `ifVersion`: the update applies only while the resource is at this version (else CONFLICT). */
export const ifVersion = z
  .number()
  .int('must be a version number from 1 to 2147483647, as the resource showed it')
  .min(1, 'must be a version number from 1 to 2147483647, as the resource showed it')
  .max(INT4_MAX, 'must be a version number from 1 to 2147483647, as the resource showed it')
  .optional()
  .describe('Apply only while the resource is at this version (its version field), else CONFLICT');

const siteSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  region: z.string().nullable(),
  description: z.string(),
  labels: z.record(z.string(), z.string()),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

const sitesList = method({
  kind: 'query',
  summary: 'List the tenant’s sites',
  tenantScoped: true,
  input: z.object({ tenantId, ...pageInputById('site') }).strict(),
  output: pageOf(siteSchema),
});

const sitesGet = method({
  kind: 'query',
  summary: 'Show a site',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-site', id: input.siteId }),
  input: z.object({ tenantId, siteId: idOf('site') }).strict(),
  output: siteSchema,
});

const sitesCreate = method({
  kind: 'mutation',
  summary: 'Create a site',
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({
      tenantId,
      name: resourceName,
      region: z
        .string()
        .min(1)
        .max(100)
        .optional()
        .describe('The region the site is in, free text like eu-west (1 to 100 characters)'),
      description: z
        .string()
        .max(1000)
        .optional()
        .describe('What the site is, for people (up to 1,000 characters)'),
      labels: labels.optional(),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: siteSchema,
});

const sitesUpdate = method({
  kind: 'mutation',
  summary: 'Rename or relabel a site',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-site', id: input.siteId }),
  input: z
    .object({
      tenantId,
      siteId: idOf('site'),
      name: resourceName.optional(),
      region: z
        .string()
        .min(1)
        .max(100)
        .nullable()
        .optional()
        .describe('The new region (1 to 100 characters), or null to clear it'),
      description: z.string().max(1000).optional().describe('The new description (up to 1,000 characters)'),
      /** Replace the site's labels. */
      labels: labels.optional(),
      /** Label keys to remove (after `labels`, when given, replaced them); a key it lacks is no change. */
      removeLabels: z.array(labelKey).max(64).optional().describe('Label keys to remove (at most 64)'),
      ifVersion,
    })
    .strict(),
  output: siteSchema,
});

const sitesDelete = method({
  kind: 'mutation',
  summary: 'Delete a site that never had a pool (pools are archived, never deleted, and keep their site)',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-site', id: input.siteId }),
  input: z.object({ tenantId, siteId: idOf('site'), ifVersion }).strict(),
  output: z.object({ id: z.string(), deleted: z.literal(true) }),
});

/** The `sites` group: each method's name, route (`/sites/…`) and default IAM action come from here. */
export const sitesGroup = defineGroup(
  'sites',
  { module: 'fleet' },
  {
    list: sitesList,
    get: sitesGet,
    create: sitesCreate,
    update: sitesUpdate,
    delete: sitesDelete,
  },
);
