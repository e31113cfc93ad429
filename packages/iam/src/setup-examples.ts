/**
 * Example policies for `better-compute iam setup`: each a custom role and the bindings that use it,
 * as data the command prints (and could apply with roles.create and bindings.create).
 */
import type { BindingScope } from './types.js';

export interface ExamplePolicy {
  name: string;
  summary: string;
  /** The tenant the example is written for. */
  tenantId: string;
  /** A custom role to create, or null when a built-in role is enough. */
  role: { name: string; description: string; actions: string[] } | null;
  bindings: { role: string; principal: string; scope: BindingScope; note: string }[];
}

/** The example policies. Every action they name exists in compute's catalog (a test holds them to it). */
export function iamSetupExamples(): ExamplePolicy[] {
  return [
    {
      name: 'gpu-tenant',
      summary: 'A GPU tenant: its admins run the tenant, researchers reserve GPUs',
      tenantId: 'acme',
      role: {
        name: 'gpu-researcher',
        description: 'Reserve, extend and release GPUs; read the rest',
        actions: [
          'compute:reservations:create',
          'compute:reservations:extend',
          'compute:reservations:release',
          'compute:*:read',
        ],
      },
      bindings: [
        {
          role: 'tenant-admin',
          principal: 'usr_… (the tenant’s administrator)',
          scope: { type: 'tenant' },
          note: 'runs the tenant',
        },
        {
          role: 'gpu-researcher',
          principal: 'grp_… (the research group)',
          scope: { type: 'tenant' },
          note: 'everyone in the group',
        },
      ],
    },
    {
      name: 'operator',
      summary:
        'A platform operator: runs nodes, pools and sites in every tenant, without compute:fleet:admin',
      tenantId: 'root',
      role: null,
      bindings: [
        {
          role: 'operator',
          principal: 'usr_… (a person of the root tenant)',
          scope: { type: 'tenant' },
          note: 'bound in the root tenant, so it applies in every tenant',
        },
      ],
    },
    {
      name: 'ci-job',
      summary: 'A CI job: a service account with an API key that may only reserve and release in one project',
      tenantId: 'acme',
      role: {
        name: 'ci-reserver',
        description: 'Reserve and release capacity, read reservations and events',
        actions: [
          'compute:reservations:create',
          'compute:reservations:release',
          'compute:reservations:read',
          'compute:events:read',
        ],
      },
      bindings: [
        {
          role: 'ci-reserver',
          principal: 'sa_… (the CI service account)',
          scope: { type: 'project', id: 'proj_… (the CI project)' },
          note: 'create the key with `better-iam keys create --principal sa_… --name ci --expires-in 90d`',
        },
      ],
    },
  ];
}
