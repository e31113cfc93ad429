/**
 * The `providerAccounts` group: a tenant's accounts with providers of rented capacity
 * (docs/provider-accounts.md). An account names a driver and its settings; its credentials are
 * secret references (`secret://TENANT/sec_…`) only, opened where the driver uses them, never a
 * value. `offers` asks the driver what the account can supply; `bootstrap` brings the account's
 * machines up as nodes of a pool, through the project's own installer and `bcd join`.
 *
 * The one driver of this release is `ssh`: capacity rented as dedicated servers reachable over SSH,
 * each host pinned to its host key (docs/decisions/provider-accounts.md says why this one).
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, resourceName } from './sites.js';

/** Create, update and delete: held through compute:* by tenant and platform administrators. */
export const PROVIDER_ACCOUNTS_WRITE_ACTION = 'compute:provider-accounts:write';
/** Asking an account's hosts what they hold: it opens the account's credential. */
export const PROVIDER_ACCOUNTS_OFFERS_ACTION = 'compute:provider-accounts:offers';
/** Turning an account's machines into nodes of a pool. */
export const PROVIDER_ACCOUNTS_BOOTSTRAP_ACTION = 'compute:provider-accounts:bootstrap';
/** The drivers this build has. */
export const PROVIDER_DRIVERS = ['ssh'] as const;
export const MAX_PROVIDER_ACCOUNTS_PER_TENANT = 200;
export const MAX_PROVIDER_ACCOUNT_HOSTS = 64;

const SECRET_REFERENCE = /^secret:\/\/[a-z0-9][a-z0-9-]{0,62}\/sec_[0-9a-z]{26}$/;

/**
 * A credential: a secret reference only. Anything else is taken for a literal credential and
 * refused, so a key pasted into a document is never stored, listed, exported or logged.
 */
export const credentialReference = z
  .string()
  .max(200, 'must be a secret reference, secret://TENANT/sec_…, never the credential itself')
  .regex(
    SECRET_REFERENCE,
    'must be a secret reference, secret://TENANT/sec_…; a literal credential is never stored (put it with better-compute secrets put NAME --value-file FILE and name the reference it answers)',
  );

/**
 * A host of the ssh driver: `user@host:port`. The host is a DNS name or an IPv4 address (an IPv6
 * one in brackets), never something OpenSSH would read as an option.
 */
const sshHostAddress = z
  .string()
  .max(300)
  .regex(
    /^[a-z_][a-z0-9_-]{0,31}@([A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]):[1-9][0-9]{0,4}$/,
    'must be user@host:port, such as root@10.0.0.5:22 (an IPv6 host in brackets)',
  )
  .refine(
    (value) => Number(value.slice(value.lastIndexOf(':') + 1)) <= 65_535,
    'the port must be 1 to 65535',
  );

/** A host key pin: one OpenSSH public key line (type and base64 key), as ssh-keyscan prints it. */
const sshHostKey = z
  .string()
  .max(8192)
  .regex(
    /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}$/,
    'must be the host’s public key as type and base64 key, such as "ssh-ed25519 AAAAC3…" (ssh-keyscan -t ed25519 HOST shows it)',
  );

const sshHost = z
  .object({
    address: sshHostAddress.describe('user@host:port; the user must be root or able to run the installer'),
    hostKey: sshHostKey.describe('The host key the host must present: its pin'),
  })
  .strict();

const sshAccountConfig = z
  .object({
    name: resourceName.describe('The account’s name: 1-63 lower-case letters, digits and dashes'),
    description: z.string().max(1000).optional().describe('What the account is, for people'),
    driver: z.literal('ssh').describe('ssh: dedicated servers reachable over SSH'),
    settings: z
      .object({
        joinUrl: z
          .string()
          .max(2000)
          .regex(/^https?:\/\/[^\s'"\\]+$/, 'must be an http(s) URL, such as https://compute.example.com')
          .describe('The server URL the hosts’ bcd joins, as the hosts reach it'),
        hosts: z
          .array(sshHost)
          .min(1, 'must list at least one host')
          .max(MAX_PROVIDER_ACCOUNT_HOSTS, `must list at most ${MAX_PROVIDER_ACCOUNT_HOSTS} hosts`)
          .refine(
            (list) => new Set(list.map((host) => host.address)).size === list.length,
            'must not list a host twice',
          )
          .describe('The servers the account rents'),
      })
      .strict(),
    credentials: z
      .object({
        privateKey: credentialReference.describe(
          'The SSH private key (OpenSSH format) the hosts accept, as a reference to the tenant’s secret',
        ),
      })
      .strict(),
  })
  .strict();

/** A provider account's document, as create and update take it and get answers it. */
export const providerAccountConfig = z
  .discriminatedUnion('driver', [sshAccountConfig])
  .describe('A provider account: its driver, the driver’s settings, and credentials as secret references');

export type ProviderAccountConfig = z.output<typeof providerAccountConfig>;

export const providerAccountSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  driver: z.string(),
  /** 1 when created; each update adds one. */
  version: z.number().int(),
  config: providerAccountConfig,
  createdAt: isoTime,
  updatedAt: isoTime,
});

const providerAccountSummarySchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  driver: z.string(),
  version: z.number().int(),
  hosts: z.number().int(),
  updatedAt: isoTime,
});

/** What one host of an account can supply, as the driver found it. */
const providerOfferSchema = z.object({
  host: z.string(),
  reachable: z.boolean(),
  /** Why it could not be asked (unreachable, a host key that is not the pin, a key refused). */
  error: z.string().nullable(),
  hostname: z.string().nullable(),
  cores: z.number().int().nullable(),
  memoryMiB: z.number().int().nullable(),
  gpus: z.array(z.object({ model: z.string(), memoryMiB: z.number().int().nullable() })),
  /** The node the host already is (its bcd's identity), null when it is not one. */
  nodeId: z.string().nullable(),
});

const providerBootstrapHostSchema = z.object({
  host: z.string(),
  state: z.enum(['pending', 'running', 'joined', 'already-node', 'failed']),
  nodeId: z.string().nullable(),
  error: z.string().nullable(),
});

const providerBootstrapSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  accountId: z.string(),
  poolId: z.string(),
  state: z.enum(['running', 'succeeded', 'failed']),
  hosts: z.array(providerBootstrapHostSchema),
  createdAt: isoTime,
  finishedAt: isoTime.nullable(),
});

const accountResource = (input: { accountId: string }) => ({
  type: 'compute-provider-account',
  id: input.accountId,
});

const accountId = idOf('providerAccount').describe('The account’s id, pacct_…');

const providerAccountsList = method({
  kind: 'query',
  summary: 'List the tenant’s provider accounts',
  tenantScoped: true,
  input: z.object({ tenantId, ...pageInputById('providerAccount') }).strict(),
  output: pageOf(providerAccountSummarySchema),
});

const providerAccountsGet = method({
  kind: 'query',
  summary: 'Show a provider account, its document (credentials as references) and its recent bootstraps',
  tenantScoped: true,
  resource: accountResource,
  input: z.object({ tenantId, accountId }).strict(),
  output: providerAccountSchema.extend({ bootstraps: z.array(providerBootstrapSchema) }),
});

const providerAccountsCreate = method({
  kind: 'mutation',
  summary: 'Create a provider account from its document; credentials only as secret references',
  access: { action: PROVIDER_ACCOUNTS_WRITE_ACTION },
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({ tenantId, config: providerAccountConfig, idempotencyKey: idempotencyKey.optional() })
    .strict(),
  output: providerAccountSchema,
});

const providerAccountsUpdate = method({
  kind: 'mutation',
  summary: 'Replace a provider account’s document (a new version); its driver stays',
  access: { action: PROVIDER_ACCOUNTS_WRITE_ACTION },
  tenantScoped: true,
  resource: accountResource,
  input: z.object({ tenantId, accountId, config: providerAccountConfig, ifVersion }).strict(),
  output: providerAccountSchema,
});

const providerAccountsDelete = method({
  kind: 'mutation',
  summary: 'Delete a provider account with no bootstrap running; its nodes stay nodes',
  access: { action: PROVIDER_ACCOUNTS_WRITE_ACTION },
  tenantScoped: true,
  resource: accountResource,
  input: z.object({ tenantId, accountId, ifVersion }).strict(),
  output: z.object({ id: z.string(), name: z.string(), deleted: z.literal(true) }),
});

const providerAccountsOffers = method({
  kind: 'query',
  summary:
    'Ask the account’s hosts what they can supply (cores, memory, GPUs) and whether each is already a node',
  access: { action: PROVIDER_ACCOUNTS_OFFERS_ACTION },
  tenantScoped: true,
  resource: accountResource,
  input: z
    .object({
      tenantId,
      accountId,
      hosts: z
        .array(sshHostAddress)
        .min(1)
        .max(MAX_PROVIDER_ACCOUNT_HOSTS)
        .optional()
        .describe('Only these hosts of the account (user@host:port); all of them when absent'),
    })
    .strict(),
  output: z.object({ accountId: z.string(), driver: z.string(), offers: z.array(providerOfferSchema) }),
});

const providerAccountsBootstrap = method({
  kind: 'mutation',
  summary:
    'Bring the account’s hosts up as nodes of a pool: a job runs the installer on each with a fresh join token',
  access: { action: PROVIDER_ACCOUNTS_BOOTSTRAP_ACTION },
  tenantScoped: true,
  idempotent: true,
  resource: accountResource,
  input: z
    .object({
      tenantId,
      accountId,
      poolId: idOf('pool').describe('The pool the hosts join, one the tenant owns'),
      hosts: z
        .array(sshHostAddress)
        .min(1)
        .max(MAX_PROVIDER_ACCOUNT_HOSTS)
        .optional()
        .describe('Only these hosts of the account (user@host:port); all of them when absent'),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: providerBootstrapSchema,
});

/** The `providerAccounts` group: each method's name and route (`/providerAccounts/…`) come from here. */
export const providerAccountsGroup = defineGroup(
  'providerAccounts',
  { module: 'fleet' },
  {
    list: providerAccountsList,
    get: providerAccountsGet,
    create: providerAccountsCreate,
    update: providerAccountsUpdate,
    delete: providerAccountsDelete,
    offers: providerAccountsOffers,
    bootstrap: providerAccountsBootstrap,
  },
);
