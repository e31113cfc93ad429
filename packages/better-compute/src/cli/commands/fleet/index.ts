/** The fleet commands (sites, projects, fleet configuration), in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import sitesList from './sites/list.js';
import sitesGet from './sites/get.js';
import sitesCreate from './sites/create.js';
import sitesUpdate from './sites/update.js';
import sitesDelete from './sites/delete.js';
import projectsList from './projects/list.js';
import projectsGet from './projects/get.js';
import projectsCreate from './projects/create.js';
import projectsArchive from './projects/archive.js';
import fleetExport from './export.js';
import fleetPlan from './plan.js';
import fleetApply from './apply.js';
import fleetStatus from './status.js';
import fleetSchema from './schema.js';

export const fleetCommands: readonly AnyCommand[] = [
  sitesList,
  sitesGet,
  sitesCreate,
  sitesUpdate,
  sitesDelete,
  projectsList,
  projectsGet,
  projectsCreate,
  projectsArchive,
  fleetExport,
  fleetPlan,
  fleetApply,
  fleetStatus,
  fleetSchema,
] as readonly AnyCommand[];
