/**
 * IAM's own method table: every route under `/api/iam/{group}/{name}`, declared once with core's
 * `defineMethod`. The handler, IAM's `iam:*` action list and the CLI derive from it.
 */
import { z } from 'zod';
import {
  type AnyMethod,
  defineMethod,
  isId,
  type MethodDefinition,
  TENANT_ID_PATTERN,
} from '@better-compute/core';
import { confirmPatterns, delegationMethods, spendLimitGpuHours } from './delegation-methods.js';

const tenantId = z.string().regex(TENANT_ID_PATTERN, 'must be a tenant id such as acme');
const principalId = z
  .string()
  .refine((value) => isId('person', value) || isId('serviceAccount', value) || isId('agent', value), {
    message: 'must be a principal id like usr_01…, sa_01… or agt_01…',
  });
const idOf = (kind: 'session' | 'apiKey' | 'role' | 'binding' | 'group', prefix: string) =>
  z.string().refine((value) => isId(kind, value), { message: `must be an id like ${prefix}_01…` });
const limit = z.number().int().min(1).max(500).default(50);
/** A current TOTP code, or a recovery code (`xxxxx-xxxxx`, lower-case letters and digits). */
const secondFactorCode = z
  .string()
  .regex(/^(\d{6}|[a-z0-9]{5}-[a-z0-9]{5})$/, 'must be a 6-digit code or a recovery code like abcde-12345');
const cursor = z.string().min(1).max(200).optional();
const isoTime = z.string();
const email = z
  .string()
  .max(254)
  .regex(/^[^\s@]+@[^\s@]+$/, 'must be an email address');
const roleName = z.string().regex(/^[a-z][a-z0-9-]{0,62}$/, 'must be lowercase letters, digits and dashes');

const tenant = z.object({
  id: z.string(),
  parentId: z.string().nullable(),
  name: z.string(),
  state: z.enum(['active', 'suspended', 'deleted']),
  createdAt: isoTime,
  updatedAt: isoTime,
  version: z.number().int(),
});
const principal = z.object({
  id: z.string(),
  tenantId: z.string(),
  kind: z.enum(['person', 'service-account', 'agent']),
  email: z.string().nullable(),
  displayName: z.string(),
  disabled: z.boolean(),
  actingFor: z.string().nullable(),
  createdAt: isoTime,
});
const session = z.object({
  id: z.string(),
  principalId: z.string(),
  mfa: z.boolean(),
  createdAt: isoTime,
  expiresAt: isoTime,
  revokedAt: isoTime.nullable(),
  lastSeenAt: isoTime.nullable(),
});
const apiKey = z.object({
  id: z.string(),
  principalId: z.string(),
  name: z.string(),
  createdAt: isoTime,
  expiresAt: isoTime.nullable(),
  revokedAt: isoTime.nullable(),
  lastUsedAt: isoTime.nullable(),
});
const role = z.object({
  id: z.string(),
  tenantId: z.string().nullable(),
  name: z.string(),
  description: z.string(),
  actions: z.array(z.string()),
  builtIn: z.boolean(),
});
const scope = z.discriminatedUnion('type', [
  z.object({ type: z.literal('tenant') }).strict(),
  z.object({ type: z.literal('project'), id: z.string().min(1).max(200) }).strict(),
  z
    .object({
      type: z.literal('resource'),
      resourceType: z.string().min(1).max(100),
      id: z.string().min(1).max(200),
    })
    .strict(),
]);
const binding = z.object({
  id: z.string(),
  tenantId: z.string(),
  roleId: z.string(),
  roleName: z.string(),
  principalId: z.string().nullable(),
  groupId: z.string().nullable(),
  scope,
  createdAt: isoTime,
  revokedAt: isoTime.nullable(),
});
const identity = z.object({
  principalId: z.string(),
  principalKind: z.enum(['person', 'service-account', 'agent']),
  tenantId: z.string(),
  credentialKind: z.enum(['session', 'api-key', 'jwt']),
  credentialId: z.string(),
  mfa: z.boolean(),
  expiresAt: isoTime.nullable(),
  displayName: z.string().optional(),
  email: z.string().optional(),
});
const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({ items: z.array(item), nextCursor: z.string().nullable() });
const resourceRef = z
  .object({
    type: z.string().min(1).max(100),
    id: z.string().min(1).max(200).optional(),
    tenantId: tenantId.optional(),
    ownerId: z.string().min(1).max(200).optional(),
    projectId: z.string().min(1).max(200).optional(),
  })
  .strict();

const decision = z.object({ allowed: z.boolean(), reason: z.string() });

/** Builds one IAM method: module `iam`. */
function iamMethod<I extends z.ZodType, O extends z.ZodType>(
  definition: Omit<MethodDefinition<I, O>, 'module'>,
) {
  return defineMethod<I, O>({ ...definition, module: 'iam' });
}

function tenantStateMethod(verb: 'suspend' | 'reactivate' | 'delete', summary: string) {
  return iamMethod({
    group: 'tenants',
    name: verb,
    kind: 'mutation',
    summary,
    access: { action: `iam:tenants:${verb}` },
    tenantScoped: false,
    input: z.object({ id: tenantId }).strict(),
    output: tenant,
  });
}

export const iamMethods = {
  'sessions.signIn': iamMethod({
    group: 'sessions',
    name: 'signIn',
    kind: 'mutation',
    summary: 'Sign in with email and password (and a TOTP code once enrolled); sets the session cookie',
    access: { public: true },
    tenantScoped: true,
    input: z
      .object({
        tenantId,
        email,
        password: z.string().min(1).max(1024),
        /** The current 6-digit code, or one of the recovery codes given at enrolment (`xxxxx-xxxxx`). */
        totp: secondFactorCode.optional(),
      })
      .strict(),
    output: z.object({ token: z.string(), session, principal }),
  }),
  'sessions.signOut': iamMethod({
    group: 'sessions',
    name: 'signOut',
    kind: 'mutation',
    summary: 'End the current session and clear the session cookie',
    access: { authenticated: true },
    tenantScoped: false,
    input: z.object({}).strict(),
    output: z.object({ revoked: z.boolean() }),
  }),
  'sessions.get': iamMethod({
    group: 'sessions',
    name: 'get',
    kind: 'query',
    summary: 'The current identity, and its session when the credential is one',
    access: { authenticated: true },
    tenantScoped: false,
    input: z.object({}).strict(),
    output: z.object({ identity, session: session.nullable() }),
  }),
  'sessions.list': iamMethod({
    group: 'sessions',
    name: 'list',
    kind: 'query',
    summary: 'A principal’s open sessions (your own by default)',
    access: { action: 'iam:sessions:list' },
    tenantScoped: true,
    input: z
      .object({ tenantId: tenantId.optional(), principalId: principalId.optional(), limit, cursor })
      .strict(),
    output: pageOf(session),
  }),
  'sessions.revoke': iamMethod({
    group: 'sessions',
    name: 'revoke',
    kind: 'mutation',
    summary: 'Revoke a session; it is refused on its next use',
    access: { action: 'iam:sessions:revoke' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), sessionId: idOf('session', 'ses') }).strict(),
    output: session,
  }),
  'totp.enroll': iamMethod({
    group: 'totp',
    name: 'enroll',
    kind: 'mutation',
    summary: 'Start TOTP enrollment: a secret and otpauth URI to load into an authenticator',
    access: { authenticated: true },
    tenantScoped: false,
    input: z.object({}).strict(),
    output: z.object({ secret: z.string(), uri: z.string() }),
  }),
  'totp.confirm': iamMethod({
    group: 'totp',
    name: 'confirm',
    kind: 'mutation',
    summary: 'Confirm TOTP with a current code; sign-in then requires a code',
    access: { authenticated: true },
    tenantScoped: false,
    input: z.object({ code: z.string().regex(/^\d{6}$/) }).strict(),
    /** The recovery codes, each good for one sign-in without the authenticator: shown this once. */
    output: z.object({ confirmed: z.boolean(), recoveryCodes: z.array(z.string()) }),
  }),
  'totp.remove': iamMethod({
    group: 'totp',
    name: 'remove',
    kind: 'mutation',
    summary: 'Remove your own TOTP second factor, with a current code or a recovery code',
    access: { authenticated: true },
    tenantScoped: false,
    input: z.object({ code: secondFactorCode }).strict(),
    output: z.object({ removed: z.boolean() }),
  }),
  'totp.reset': iamMethod({
    group: 'totp',
    name: 'reset',
    kind: 'mutation',
    summary: 'Remove a person’s TOTP second factor, for one who lost it (administrators; an event)',
    access: { action: 'iam:totp:reset' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), principalId }).strict(),
    output: z.object({ removed: z.boolean() }),
  }),
  'passwords.change': iamMethod({
    group: 'passwords',
    name: 'change',
    kind: 'mutation',
    summary: 'Change your own password from a password session; your other sessions end',
    access: { authenticated: true },
    tenantScoped: false,
    input: z
      .object({ currentPassword: z.string().min(1).max(1024), newPassword: z.string().min(8).max(1024) })
      .strict(),
    output: z.object({ changed: z.boolean(), sessionsEnded: z.number().int() }),
  }),
  'passwords.reset': iamMethod({
    group: 'passwords',
    name: 'reset',
    kind: 'mutation',
    summary: 'Give a person a one-time password (shown once) and end their sessions (administrators)',
    access: { action: 'iam:passwords:reset' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), principalId }).strict(),
    output: z.object({ oneTimePassword: z.string(), sessionsEnded: z.number().int() }),
  }),
  'apiKeys.create': iamMethod({
    group: 'apiKeys',
    name: 'create',
    kind: 'mutation',
    summary: 'Create an API key (shown once) for a principal, yourself by default',
    access: { action: 'iam:api-keys:create' },
    tenantScoped: true,
    input: z
      .object({
        tenantId: tenantId.optional(),
        principalId: principalId.optional(),
        name: z.string().min(1).max(100),
        expiresAt: isoTime.optional(),
      })
      .strict(),
    output: z.object({ key: z.string(), apiKey }),
  }),
  'apiKeys.list': iamMethod({
    group: 'apiKeys',
    name: 'list',
    kind: 'query',
    summary: 'A principal’s API keys, without their secrets',
    access: { action: 'iam:api-keys:list' },
    tenantScoped: true,
    input: z
      .object({ tenantId: tenantId.optional(), principalId: principalId.optional(), limit, cursor })
      .strict(),
    output: pageOf(apiKey),
  }),
  'apiKeys.revoke': iamMethod({
    group: 'apiKeys',
    name: 'revoke',
    kind: 'mutation',
    summary: 'Revoke an API key; it is refused on its next use',
    access: { action: 'iam:api-keys:revoke' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), apiKeyId: idOf('apiKey', 'key') }).strict(),
    output: apiKey,
  }),
  'tenants.create': iamMethod({
    group: 'tenants',
    name: 'create',
    kind: 'mutation',
    summary: 'Create a tenant under a parent (the root tenant by default)',
    access: { action: 'iam:tenants:create' },
    tenantScoped: false,
    resource: () => ({ type: 'iam-tenant' }),
    input: z
      .object({ id: tenantId, name: z.string().min(1).max(200), parentId: tenantId.optional() })
      .strict(),
    output: tenant,
  }),
  'tenants.get': iamMethod({
    group: 'tenants',
    name: 'get',
    kind: 'query',
    summary: 'One tenant',
    access: { action: 'iam:tenants:get' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional() }).strict(),
    output: tenant,
  }),
  'tenants.list': iamMethod({
    group: 'tenants',
    name: 'list',
    kind: 'query',
    summary: 'The tenants under a tenant (every tenant, for the root tenant)',
    access: { action: 'iam:tenants:list' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), limit, cursor }).strict(),
    output: pageOf(tenant),
  }),
  'tenants.suspend': tenantStateMethod(
    'suspend',
    'Suspend a tenant: its calls get TENANT_SUSPENDED (decided in its parent tenant)',
  ),
  'tenants.reactivate': tenantStateMethod(
    'reactivate',
    'Reactivate a suspended tenant (decided in its parent tenant)',
  ),
  'tenants.delete': tenantStateMethod(
    'delete',
    'Delete a tenant (soft): its credentials stop working (decided in its parent tenant)',
  ),
  'principals.create': iamMethod({
    group: 'principals',
    name: 'create',
    kind: 'mutation',
    summary: 'Create a person (email, password), a service account or an agent acting for a person',
    access: { action: 'iam:principals:create' },
    tenantScoped: true,
    input: z
      .object({
        tenantId: tenantId.optional(),
        kind: z.enum(['person', 'service-account', 'agent']),
        email: email.optional(),
        displayName: z.string().min(1).max(200).optional(),
        password: z.string().min(8).max(1024).optional(),
        actingFor: principalId.optional(),
        /** An agent's delegation: what of its calls waits for its person (DEFAULT_CONFIRM when absent). */
        confirm: confirmPatterns.optional(),
        spendLimitGpuHours: spendLimitGpuHours.optional(),
      })
      .strict(),
    output: principal,
  }),
  'principals.get': iamMethod({
    group: 'principals',
    name: 'get',
    kind: 'query',
    summary: 'One principal',
    access: { action: 'iam:principals:get' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), principalId }).strict(),
    output: principal,
  }),
  'principals.list': iamMethod({
    group: 'principals',
    name: 'list',
    kind: 'query',
    summary: 'The tenant’s people, service accounts and agents',
    access: { action: 'iam:principals:list' },
    tenantScoped: true,
    input: z
      .object({
        tenantId: tenantId.optional(),
        kind: z.enum(['person', 'service-account', 'agent']).optional(),
        limit,
        cursor,
      })
      .strict(),
    output: pageOf(principal),
  }),
  'principals.disable': iamMethod({
    group: 'principals',
    name: 'disable',
    kind: 'mutation',
    summary: 'Disable a principal: every credential of it is refused on its next use',
    access: { action: 'iam:principals:disable' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), principalId }).strict(),
    output: principal,
  }),
  'principals.enable': iamMethod({
    group: 'principals',
    name: 'enable',
    kind: 'mutation',
    summary: 'Enable a disabled principal',
    access: { action: 'iam:principals:enable' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), principalId }).strict(),
    output: principal,
  }),
  'roles.create': iamMethod({
    group: 'roles',
    name: 'create',
    kind: 'mutation',
    summary: 'Create a custom role: a set of action patterns known to this deployment',
    access: { action: 'iam:roles:create' },
    tenantScoped: true,
    input: z
      .object({
        tenantId: tenantId.optional(),
        name: roleName,
        description: z.string().max(500).optional(),
        actions: z.array(z.string().min(1).max(200)).min(1).max(100),
      })
      .strict(),
    output: role,
  }),
  'roles.list': iamMethod({
    group: 'roles',
    name: 'list',
    kind: 'query',
    summary: 'The built-in roles and the tenant’s custom roles',
    access: { action: 'iam:roles:list' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional() }).strict(),
    output: pageOf(role),
  }),
  'roles.delete': iamMethod({
    group: 'roles',
    name: 'delete',
    kind: 'mutation',
    summary: 'Delete a custom role that no binding uses',
    access: { action: 'iam:roles:delete' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), roleId: idOf('role', 'role') }).strict(),
    output: role,
  }),
  'bindings.create': iamMethod({
    group: 'bindings',
    name: 'create',
    kind: 'mutation',
    summary: 'Give a role (by id or name) to a principal or group at a scope',
    access: { action: 'iam:bindings:create' },
    tenantScoped: true,
    input: z
      .object({
        tenantId: tenantId.optional(),
        role: z.string().min(1).max(100),
        principalId: principalId.optional(),
        groupId: idOf('group', 'grp').optional(),
        scope: scope.optional(),
      })
      .strict(),
    output: binding,
  }),
  'bindings.list': iamMethod({
    group: 'bindings',
    name: 'list',
    kind: 'query',
    summary: 'The tenant’s active bindings, optionally of one principal',
    access: { action: 'iam:bindings:list' },
    tenantScoped: true,
    input: z
      .object({ tenantId: tenantId.optional(), principalId: principalId.optional(), limit, cursor })
      .strict(),
    output: pageOf(binding),
  }),
  'bindings.revoke': iamMethod({
    group: 'bindings',
    name: 'revoke',
    kind: 'mutation',
    summary: 'Revoke a binding; it stops counting on the next authorize',
    access: { action: 'iam:bindings:revoke' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), bindingId: idOf('binding', 'bnd') }).strict(),
    output: binding,
  }),
  ...delegationMethods,
  can: iamMethod({
    group: 'can',
    name: 'check',
    kind: 'query',
    summary: 'Decide up to 50 { action, resource } checks for the caller (the console’s buttons)',
    access: { authenticated: true },
    tenantScoped: true,
    input: z
      .object({
        tenantId: tenantId.optional(),
        checks: z
          .array(z.object({ action: z.string().min(1).max(200), resource: resourceRef }).strict())
          .min(1)
          .max(50),
      })
      .strict(),
    output: z.object({ results: z.array(decision) }),
  }),
  'jwt.issue': iamMethod({
    group: 'jwt',
    name: 'issue',
    kind: 'mutation',
    summary: 'A short-lived session JWT for the current session, verifiable with /api/iam/jwks',
    access: { authenticated: true },
    tenantScoped: false,
    input: z.object({}).strict(),
    output: z.object({ token: z.string(), expiresAt: isoTime }),
  }),
} as const;

export type IamMethodName = keyof typeof iamMethods;

/** Every `iam:*` action the table decides on, for the action catalog. */
export const IAM_ACTIONS: readonly string[] = [
  ...new Set(
    Object.values(iamMethods as Record<string, AnyMethod>).flatMap((method) =>
      'action' in method.access ? [method.access.action] : [],
    ),
  ),
];
