/**
 * The `secrets` group: write-only values of a tenant, sealed at rest under the deployment secret
 * and referenced as `secret://TENANT/sec_…` where a resource uses them (a sandbox template's
 * environment). `put` creates a secret or gives it a new version; no method ever answers a value:
 * every answer is the secret's metadata (docs/secrets.md).
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, resourceName } from './sites.js';

/** The most bytes a secret's value holds (UTF-8). The request body's 64 KiB limit applies too. */
export const MAX_SECRET_BYTES = 32_768;
/** The most secrets a tenant keeps. */
export const MAX_SECRETS_PER_TENANT = 1000;

export const SECRETS_WRITE_ACTION = 'compute:secrets:write';
export const SECRETS_DELETE_ACTION = 'compute:secrets:delete';
/** Naming a secret where a resource uses it (a sandbox template's env) is decided on the secret. */
export const SECRETS_USE_ACTION = 'compute:secrets:use';

/** A secret as every answer shows it: never its value. */
export const secretSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  /** 1 when created; each put of a new value adds one. */
  version: z.number().int(),
  /** How a resource names it: `secret://TENANT/sec_…`. */
  reference: z.string(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

/**
 * A value: text of 1 to 32,768 UTF-8 bytes, without NUL (an environment variable cannot hold one).
 * The messages say what is wrong with it, never what it is.
 */
export const secretValue = z
  .string()
  .min(1, 'must not be empty')
  .refine((text) => !text.includes('\0'), 'must not contain a NUL byte')
  .refine(
    (text) => new TextEncoder().encode(text).length <= MAX_SECRET_BYTES,
    `must be at most ${MAX_SECRET_BYTES} bytes`,
  );

const secretResource = (input: { secretId?: string | undefined; name?: string | undefined }) => ({
  type: 'compute-secret',
  id: input.secretId ?? input.name,
});

/** A secret named by its id or its name (exactly one of them). */
const named = {
  secretId: idOf('secret').optional().describe('The secret’s id, sec_…; or give name'),
  name: resourceName.optional().describe('The secret’s name in its tenant; or give secretId'),
};
const oneOf = (input: { secretId?: string | undefined; name?: string | undefined }) =>
  (input.secretId === undefined) !== (input.name === undefined);
const ONE_OF = { message: 'give exactly one of secretId and name', path: ['secretId'] };

const secretsList = method({
  kind: 'query',
  summary: 'List the tenant’s secrets: names, ids and versions, never values',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      name: resourceName.optional().describe('Only the secret of this name'),
      ...pageInputById('secret'),
    })
    .strict(),
  output: pageOf(secretSchema),
});

const secretsGet = method({
  kind: 'query',
  summary: 'Show a secret’s metadata (never its value)',
  tenantScoped: true,
  resource: secretResource,
  input: z
    .object({ tenantId, ...named })
    .strict()
    .refine(oneOf, ONE_OF),
  output: secretSchema,
});

const secretsPut = method({
  kind: 'mutation',
  summary: 'Create a secret, or give an existing one a new version; answers its metadata, never the value',
  access: { action: SECRETS_WRITE_ACTION },
  tenantScoped: true,
  idempotent: true,
  secretInput: ['value'],
  resource: secretResource,
  input: z
    .object({
      tenantId,
      ...named,
      value: secretValue.describe(
        'The value: text of 1 to 32,768 UTF-8 bytes without NUL, kept exactly (a trailing newline too); never answered',
      ),
      ifVersion,
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict()
    .refine(oneOf, ONE_OF),
  output: secretSchema,
});

const secretsDelete = method({
  kind: 'mutation',
  summary: 'Delete a secret and its value; resources that name it fail to start until changed',
  access: { action: SECRETS_DELETE_ACTION },
  tenantScoped: true,
  resource: secretResource,
  input: z
    .object({ tenantId, ...named, ifVersion })
    .strict()
    .refine(oneOf, ONE_OF),
  output: z.object({ id: z.string(), name: z.string(), deleted: z.literal(true) }),
});

/** The `secrets` group: each method's name and route (`/secrets/…`) come from here. */
export const secretsGroup = defineGroup(
  'secrets',
  { module: 'core' },
  { list: secretsList, get: secretsGet, put: secretsPut, delete: secretsDelete },
);
