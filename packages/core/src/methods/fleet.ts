/**
 * The `fleet` group: fleet configuration (docs/fleet.md). `export` writes the tenant's platform
 * objects as a FleetConfig document, `plan` compares a document with the live fleet (`+ ~ -`, the
 * changes that cannot be made, the calls apply would make and a `planHash`), `apply` makes the
 * reviewed plan in one transaction, and `status` says whether the fleet drifted from the last apply.
 * Every method is decided on compute:fleet:admin, which only the root tenant's administrators hold,
 * and acts in the root tenant only (`platformOnly`: the request pipeline refuses any other tenant).
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { tenantId } from './common.js';
import {
  FLEET_ADMIN_ACTION,
  FLEET_DOCUMENT_MAX_BYTES,
  fleetApplySchema,
  fleetConfigSchema,
  fleetPlanSchema,
  fleetStatusSchema,
} from './fleet-config.js';

export * from './fleet-config.js';

const access = { action: FLEET_ADMIN_ACTION };
const resource = () => ({ type: 'compute-fleet' });

const document = fleetConfigSchema.describe(
  'The FleetConfig document, as fleet.export writes it and its JSON Schema (better-compute fleet schema) describes it',
);
const prune = z
  .boolean()
  .default(false)
  .describe('Also delete the live objects the document leaves out (archive pools); without it they stay');

export const fleetGroup = defineGroup(
  'fleet',
  { module: 'fleet' },
  {
    export: method({
      kind: 'query',
      summary:
        'The tenant’s sites, pools (quotas, offers), flavors and sandbox templates as a FleetConfig document',
      access,
      tenantScoped: true,
      platformOnly: true,
      resource,
      input: z.object({ tenantId }).strict(),
      output: fleetConfigSchema,
    }),
    plan: method({
      kind: 'query',
      summary:
        'Compare a FleetConfig document with the live fleet: the changes (+ ~ -, BLOCKED), the calls apply would make, and their planHash',
      access,
      tenantScoped: true,
      platformOnly: true,
      resource,
      maxBodyBytes: FLEET_DOCUMENT_MAX_BYTES,
      input: z.object({ tenantId, document, prune }).strict(),
      output: fleetPlanSchema,
    }),
    apply: method({
      kind: 'mutation',
      summary:
        'Apply a reviewed plan: every call decided first, then all of them in one transaction (CONFIG_DRIFT when the fleet changed since the plan)',
      access,
      tenantScoped: true,
      platformOnly: true,
      resource,
      maxBodyBytes: FLEET_DOCUMENT_MAX_BYTES,
      input: z
        .object({
          tenantId,
          document,
          prune,
          planHash: z
            .string()
            .regex(/^[0-9a-f]{64}$/, 'must be the planHash fleet.plan answered: 64 hex digits')
            .describe(
              'The planHash of the plan you reviewed; apply refuses with CONFIG_DRIFT when it no longer matches',
            ),
        })
        .strict(),
      output: fleetApplySchema,
    }),
    status: method({
      kind: 'query',
      summary: 'The last apply, and whether the live fleet drifted from it as the fleet.drift job last saw',
      access,
      tenantScoped: true,
      platformOnly: true,
      resource,
      input: z.object({ tenantId }).strict(),
      output: fleetStatusSchema,
    }),
  },
);
