/** The `projects` group: a tenant's projects, which group work and scope IAM bindings. */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, resourceName } from './sites.js';

export const projectSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  description: z.string(),
  state: z.enum(['active', 'archived']),
  version: z.number().int(),
  createdAt: isoTime,
  archivedAt: isoTime.nullable(),
});

export const projectsList = defineMethod({
  group: 'projects',
  name: 'list',
  kind: 'query',
  summary: 'List the tenant’s projects',
  module: 'fleet',
  access: { action: 'compute:projects:read' },
  tenantScoped: true,
  input: z
    .object({ tenantId, state: z.enum(['active', 'archived']).optional(), ...pageInputById('project') })
    .strict(),
  output: pageOf(projectSchema),
});

export const projectsGet = defineMethod({
  group: 'projects',
  name: 'get',
  kind: 'query',
  summary: 'Show a project',
  module: 'fleet',
  access: { action: 'compute:projects:read' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-project', id: input.projectId }),
  input: z.object({ tenantId, projectId: idOf('project') }).strict(),
  output: projectSchema,
});

export const projectsCreate = defineMethod({
  group: 'projects',
  name: 'create',
  kind: 'mutation',
  summary: 'Create a project',
  module: 'fleet',
  access: { action: 'compute:projects:create' },
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({
      tenantId,
      name: resourceName,
      description: z.string().max(1000).optional(),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: projectSchema,
});

export const projectsArchive = defineMethod({
  group: 'projects',
  name: 'archive',
  kind: 'mutation',
  summary: 'Archive a project',
  module: 'fleet',
  access: { action: 'compute:projects:archive' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-project', id: input.projectId }),
  input: z.object({ tenantId, projectId: idOf('project'), ifVersion }).strict(),
  output: projectSchema,
});
