/**
 * IAM's migrations (module `iam`, schema `iam`). Plain SQL that runs on PostgreSQL 15 and PGlite;
 * never edited once landed: a change is a new migration. The built-in roles are rows with
 * `tenant_id` null and fixed ids, so bindings reference them like any custom role.
 */
import type { ModuleMigrations } from '@better-compute/db';

const INIT = `
create schema if not exists iam;

create table iam.tenants (
  id text primary key,
  parent_id text references iam.tenants (id),
  name text not null,
  state text not null default 'active' check (state in ('active', 'suspended', 'deleted')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  version integer not null default 1
);
create index tenants_parent on iam.tenants (parent_id);
insert into iam.tenants (id, parent_id, name) values ('root', null, 'Platform');

create table iam.principals (
  id text primary key,
  tenant_id text not null references iam.tenants (id),
  kind text not null check (kind in ('person', 'service-account', 'agent')),
  email text,
  display_name text not null,
  password_hash text,
  disabled boolean not null default false,
  acting_for text references iam.principals (id),
  created_at timestamptz not null default now(),
  version integer not null default 1,
  check ((kind = 'person') = (email is not null)),
  check (kind <> 'agent' or acting_for is not null)
);
create unique index principals_email on iam.principals (tenant_id, email) where email is not null;
create index principals_tenant on iam.principals (tenant_id, id);
create index principals_acting_for on iam.principals (acting_for) where acting_for is not null;

create table iam.sessions (
  id text primary key,
  principal_id text not null references iam.principals (id),
  token_hash text not null unique,
  mfa boolean not null default false,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  last_seen_at timestamptz
);
create index sessions_principal on iam.sessions (principal_id);

create table iam.totp (
  principal_id text primary key references iam.principals (id),
  secret text not null,
  confirmed boolean not null default false,
  last_counter bigint,
  created_at timestamptz not null default now()
);

create table iam.api_keys (
  id text primary key,
  principal_id text not null references iam.principals (id),
  token_hash text not null unique,
  name text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz,
  revoked_at timestamptz,
  last_used_at timestamptz
);
create index api_keys_principal on iam.api_keys (principal_id);

create table iam.roles (
  id text primary key,
  tenant_id text references iam.tenants (id),
  name text not null,
  description text not null default '',
  actions text[] not null,
  created_at timestamptz not null default now(),
  deleted_at timestamptz
);
create unique index roles_name on iam.roles (coalesce(tenant_id, ''), name) where deleted_at is null;

create table iam.groups (
  id text primary key,
  tenant_id text not null references iam.tenants (id),
  name text not null,
  created_at timestamptz not null default now(),
  unique (tenant_id, name)
);

create table iam.group_members (
  group_id text not null references iam.groups (id),
  principal_id text not null references iam.principals (id),
  primary key (group_id, principal_id)
);
create index group_members_principal on iam.group_members (principal_id);

create table iam.bindings (
  id text primary key,
  tenant_id text not null references iam.tenants (id),
  role_id text not null references iam.roles (id),
  principal_id text references iam.principals (id),
  group_id text references iam.groups (id),
  scope_type text not null check (scope_type in ('tenant', 'project', 'resource')),
  scope_id text,
  scope_resource_type text,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  check ((principal_id is null) <> (group_id is null)),
  check ((scope_type = 'tenant') = (scope_id is null)),
  check ((scope_type = 'resource') = (scope_resource_type is not null))
);
create index bindings_principal on iam.bindings (principal_id) where revoked_at is null;
create index bindings_group on iam.bindings (group_id) where revoked_at is null;
create index bindings_tenant on iam.bindings (tenant_id, id);

-- One active key at a time: replicas racing to create the first one keep whichever wins.
create table iam.signing_keys (
  kid text primary key,
  alg text not null,
  public_jwk text not null,
  private_jwk text not null,
  created_at timestamptz not null default now(),
  retired_at timestamptz
);
create unique index signing_keys_active on iam.signing_keys ((retired_at is null)) where retired_at is null;

create table iam.action_catalog (
  action text primary key,
  summary text not null,
  source text not null
);

insert into iam.roles (id, tenant_id, name, description, actions) values
  ('role_00000000000000000000000001', null, 'platform-admin',
   'Everything, in every tenant, including compute:fleet:admin (bind in the root tenant only)',
   array['*']),
  ('role_00000000000000000000000002', null, 'tenant-admin',
   'Every compute action but compute:fleet:admin, and every IAM action, in its tenant',
   array['compute:*', 'iam:*']),
  ('role_00000000000000000000000003', null, 'operator',
   'Runs the fleet: nodes, pools, sites, capacity, reservations, events; reads everything',
   array['compute:nodes:*', 'compute:pools:*', 'compute:sites:*', 'compute:capacity:*',
         'compute:reservations:*', 'compute:events:*', 'compute:offers:*', 'compute:quotas:*',
         'compute:join-tokens:*', 'compute:join-requests:*', 'compute:site-tokens:*', 'compute:usage:*',
         'compute:*:read', 'compute:*:list', 'compute:*:get',
         'iam:tenants:get', 'iam:tenants:list', 'iam:principals:get', 'iam:principals:list',
         'iam:roles:list', 'iam:bindings:list', 'iam:sessions:*@own', 'iam:api-keys:*@own']),
  ('role_00000000000000000000000004', null, 'member',
   'Reserves, releases and extends capacity; manages its own sandboxes and volumes; reads',
   array['compute:reservations:create', 'compute:reservations:release', 'compute:reservations:extend',
         'compute:sandboxes:create', 'compute:sandboxes:*@own', 'compute:volumes:create', 'compute:volumes:*@own',
         'compute:*:read', 'compute:*:list', 'compute:*:get',
         'iam:tenants:get', 'iam:principals:get', 'iam:roles:list',
         'iam:sessions:*@own', 'iam:api-keys:*@own']),
  ('role_00000000000000000000000005', null, 'viewer',
   'Reads: every compute action ending in :read, :list or :get',
   array['compute:*:read', 'compute:*:list', 'compute:*:get',
         'iam:tenants:get', 'iam:principals:get', 'iam:roles:list', 'iam:sessions:*@own']);
`;

/** IAM's tables, for `migrate(db, [...computeMigrations, iamMigrations])`. */
export const iamMigrations: ModuleMigrations = {
  module: 'iam',
  migrations: [
    { name: '0001_init', sql: INIT },
    {
      name: '0002_sign_in_attempts',
      sql: `
-- Failed sign-ins per account (a hash of tenant and email, so unknown emails are throttled alike):
-- after a few failures the account's sign-ins wait (docs/decisions/iam-sign-in-throttling.md).
create table iam.sign_in_attempts (
  account_hash text primary key,
  failures integer not null,
  first_failed_at timestamptz not null,
  locked_until timestamptz
);
`,
    },
    {
      name: '0003_members_end_their_own_reservations',
      sql: `
-- A member extends and releases its own reservations; ending someone else's takes the action
-- pattern administrators (compute:*) and operators (compute:reservations:*) hold.
update iam.roles
   set actions = array['compute:reservations:create', 'compute:reservations:release@own',
                       'compute:reservations:extend@own',
                       'compute:sandboxes:create', 'compute:sandboxes:*@own', 'compute:volumes:create',
                       'compute:volumes:*@own', 'compute:*:read', 'compute:*:list', 'compute:*:get',
                       'iam:tenants:get', 'iam:principals:get', 'iam:roles:list',
                       'iam:sessions:*@own', 'iam:api-keys:*@own'],
       description = 'Reserves capacity and extends and releases its own reservations; manages its own sandboxes and volumes; reads'
 where id = 'role_00000000000000000000000004';
`,
    },
    {
      name: '0004_recovery_codes',
      sql: `
-- One-time codes that stand in for a TOTP code when the authenticator is lost: shown once when the
-- factor is confirmed, kept only as SHA-256 hashes, each spent by its first use.
create table iam.recovery_codes (
  principal_id text not null references iam.principals (id),
  code_hash text not null,
  used_at timestamptz,
  primary key (principal_id, code_hash)
);

-- What administrators did to recover a person's access (a second factor removed, a one-time
-- password given), with who and the request, written with the change itself.
create table iam.recovery_audit (
  id bigint generated always as identity primary key,
  tenant_id text not null,
  actor text not null,
  action text not null check (action in ('totp.reset', 'passwords.reset')),
  principal_id text not null,
  request_id text not null,
  occurred_at timestamptz not null
);
create index recovery_audit_tenant on iam.recovery_audit (tenant_id, occurred_at);
`,
    },
    {
      name: '0005_delegations',
      sql: `
-- An agent's delegation (docs/confirmations.md): which of its calls wait for its person's
-- confirmation (action patterns) and how many GPU-hours one reservation may take without it. An
-- agent has at most one that is not revoked; an agent without a usable one does not authenticate.
create table iam.delegations (
  id text primary key,
  tenant_id text not null references iam.tenants (id),
  agent_id text not null references iam.principals (id),
  person_id text not null references iam.principals (id),
  confirm text[] not null,
  spend_limit_gpu_hours double precision check (spend_limit_gpu_hours is null or spend_limit_gpu_hours >= 0),
  created_by text not null,
  created_at timestamptz not null,
  expires_at timestamptz,
  revoked_at timestamptz
);
create unique index delegations_active on iam.delegations (agent_id) where revoked_at is null;
create index delegations_tenant on iam.delegations (tenant_id, id);
create index delegations_person on iam.delegations (person_id);

-- Every agent there is gets the default delegation (DEFAULT_CONFIRM in areas/delegations.ts, as it
-- read when this landed; a test holds the two equal). The id is dlg_ and a ULID-shaped digest of
-- the agent's id: a migration has no ULID generator, and an agent gets one backfilled delegation.
insert into iam.delegations (id, tenant_id, agent_id, person_id, confirm, created_by, created_at)
select 'dlg_0' || substr(md5('delegation:' || p.id), 1, 25), p.tenant_id, p.id, p.acting_for,
       array['compute:*:delete', 'compute:*:archive', 'compute:*:set-quota', 'compute:quotas:set',
             'compute:nodes:retire', 'compute:nodes:drain',
             'compute:nodes:console', 'compute:commands:run', 'compute:batches:approve',
             'compute:join-tokens:create', 'compute:join-requests:approve',
             'compute:webhooks:create', 'compute:webhooks:update', 'compute:webhooks:ping',
             'compute:webhooks:rotate-secret', 'compute:webhooks:redeliver', 'iam:*'],
       'migration', now()
  from iam.principals p
 where p.kind = 'agent';

-- A person reads, approves and declines the confirmations their agents ask of them
-- (compute:confirmations:*, decided on the confirmation with its person as owner).
update iam.roles
   set actions = array_append(actions, 'compute:confirmations:*@own')
 where id in ('role_00000000000000000000000003', 'role_00000000000000000000000004')
   and not ('compute:confirmations:*@own' = any (actions));
`,
    },
    {
      name: '0006_operators_register_releases',
      sql: `
-- Operators register signed bcd releases (compute:releases:register; reading them is
-- compute:*:read already). Releases are the platform's: compute answers only the root tenant's
-- calls, so an operator bound in another tenant gains nothing by it.
update iam.roles
   set actions = array_append(actions, 'compute:releases:*'),
       description = 'Runs the fleet: nodes, pools, sites, capacity, reservations, events, releases; reads everything'
 where id = 'role_00000000000000000000000003'
   and not ('compute:releases:*' = any (actions));
`,
    },
    {
      name: '0007_operators_write_secrets',
      sql: `
-- Operators keep the secrets the fleet's machines use (a BMC's password, a provider account's
-- credentials): they put and delete secrets (values are never read back by anyone). Tenant and
-- platform administrators have them through compute:*; members and viewers read names only.
update iam.roles
   set actions = actions || array['compute:secrets:write', 'compute:secrets:delete']
 where id = 'role_00000000000000000000000003'
   and not ('compute:secrets:write' = any (actions));
`,
    },
    {
      name: '0008_meters',
      sql: `
-- Billing meters: what usage exports count in (compute's gpuSeconds is compute.gpu-seconds), made
-- by better-compute iam setup --meters; a name is made once and never redefined in place.
create table iam.meters (
  name text primary key check (name ~ '^[a-z][a-z0-9.-]{0,99}$'),
  unit text not null,
  aggregation text not null check (aggregation in ('sum', 'max')),
  dimensions text[] not null,
  description text not null,
  created_at timestamptz not null default now()
);
`,
    },
    {
      name: '0009_operators_run_rollouts',
      sql: `
-- Operators roll releases out (compute:rollouts:create, pause, resume, abort; reading them is
-- compute:*:read already). Like releases, rollouts answer only the root tenant's calls.
update iam.roles
   set actions = array_append(actions, 'compute:rollouts:*'),
       description = 'Runs the fleet: nodes, pools, sites, capacity, reservations, events, releases and rollouts; reads everything'
 where id = 'role_00000000000000000000000003'
   and not ('compute:rollouts:*' = any (actions));
`,
    },
    {
      name: '0010_members_manage_their_own_volumes',
      sql: `
-- Sandbox volumes are decided on their group's own actions (compute:sandbox-volumes:create,
-- resize, delete; docs/decisions/member-volumes.md), in place of compute:sandboxes:volumes for
-- all three. A member makes volumes and resizes and deletes its own (decided with the volume's
-- owner), in place of the compute:volumes:* patterns no method ever checked.
update iam.roles
   set actions = array_replace(array_replace(actions, 'compute:volumes:create', 'compute:sandbox-volumes:create'),
                               'compute:volumes:*@own', 'compute:sandbox-volumes:*@own')
 where id = 'role_00000000000000000000000004';

-- A custom role that granted compute:sandboxes:volumes keeps what it let its holders do.
update iam.roles
   set actions = array_replace(actions, 'compute:sandboxes:volumes', 'compute:sandbox-volumes:*')
 where 'compute:sandboxes:volumes' = any (actions);
update iam.roles
   set actions = array_replace(actions, 'compute:sandboxes:volumes@own', 'compute:sandbox-volumes:*@own')
 where 'compute:sandboxes:volumes@own' = any (actions);

-- compute:sandboxes:* covered the volumes too, and no longer does: it gets their pattern beside it.
update iam.roles
   set actions = array_append(actions, 'compute:sandbox-volumes:*')
 where 'compute:sandboxes:*' = any (actions)
   and not ('compute:sandbox-volumes:*' = any (actions));
update iam.roles
   set actions = array_append(actions, 'compute:sandbox-volumes:*@own')
 where 'compute:sandboxes:*@own' = any (actions)
   and not ('compute:sandbox-volumes:*@own' = any (actions));

-- A delegation that held the volume calls back keeps holding them.
update iam.delegations
   set confirm = array_replace(confirm, 'compute:sandboxes:volumes', 'compute:sandbox-volumes:*')
 where 'compute:sandboxes:volumes' = any (confirm);
update iam.delegations
   set confirm = array_append(confirm, 'compute:sandbox-volumes:*')
 where 'compute:sandboxes:*' = any (confirm)
   and not ('compute:sandbox-volumes:*' = any (confirm));
`,
    },
  ],
};

/** The fixed ids of the built-in roles the first migration creates. */
export const BUILT_IN_ROLE_IDS = {
  'platform-admin': 'role_00000000000000000000000001',
  'tenant-admin': 'role_00000000000000000000000002',
  operator: 'role_00000000000000000000000003',
  member: 'role_00000000000000000000000004',
  viewer: 'role_00000000000000000000000005',
} as const;

export type BuiltInRoleName = keyof typeof BUILT_IN_ROLE_IDS;
