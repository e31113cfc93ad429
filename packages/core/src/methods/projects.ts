/** The `projects` group: a tenant's projects, which group work and scope IAM bindings. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, resourceName } from './sites.js';

const projectSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  description: z.string(),
  state: z.enum(['active', 'archived']),
  version: z.number().int(),
  createdAt: isoTime,
  archivedAt: isoTime.nullable(),
});

const projectsList = method({
  kind: 'query',
  summary: 'List the tenant’s projects',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      state: z
        .enum(['active', 'archived'])
        .optional()
        .describe('Only projects in this state; both when omitted'),
      ...pageInputById('project'),
    })
    .strict(),
  output: pageOf(projectSchema),
});

const projectsGet = method({
  kind: 'query',
  summary: 'Show a project',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-project', id: input.projectId }),
  input: z.object({ tenantId, projectId: idOf('project') }).strict(),
  output: projectSchema,
});

const projectsCreate = method({
  kind: 'mutation',
  summary: 'Create a project',
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({
      tenantId,
      name: resourceName,
      description: z
        .string()
        .max(1000)
        .optional()
        .describe('What the project is for, for people (up to 1,000 characters)'),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: projectSchema,
});

const projectsArchive = method({
  kind: 'mutation',
  summary: 'Archive a project',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-project', id: input.projectId }),
  input: z.object({ tenantId, projectId: idOf('project'), ifVersion }).strict(),
  output: projectSchema,
});

/** The `projects` group: each method's name, route (`/projects/…`) and default IAM action come from here. */
export const projectsGroup = defineGroup(
  'projects',
  { module: 'fleet' },
  {
    list: projectsList,
    get: projectsGet,
    create: projectsCreate,
    archive: projectsArchive,
  },
);
