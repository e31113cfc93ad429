/**
 * The fleet module: sites, projects, pools and offers, quotas, drivers, nodes, join tokens and
 * requests, inventory, usage, capacity and reservations, and the controller that keeps them moving.
 */
import { methods } from '@better-compute/core/methods';
import { controllerJob, CONTROLLER_JOB } from './controller.js';
import { bindMethod, defineModule } from '../define-module.js';
import { listDrivers } from './drivers.js';
import {
  approveJoinRequest,
  claimNode,
  createJoinToken,
  joinNode,
  listJoinRequests,
  listJoinTokens,
  rejectJoinRequest,
  revokeJoinToken,
} from './join.js';
import { getInventory, inventoryDiff, inventoryHistory } from './inventory.js';
import { heartbeat } from './heartbeat.js';
import { fleetMigrations } from './migrations.js';
import {
  cordonNode,
  deleteNode,
  drainNode,
  getNode,
  labelNode,
  listNodes,
  nodeEvents,
  retireNode,
  taintNode,
  uncordonNode,
} from './nodes.js';
import { archivePool, createPool, getPool, listPools, offerPool, updatePool } from './pools.js';
import { getQuotas, setQuota } from './quotas.js';
import { archiveProject, createProject, getProject, listProjects } from './projects.js';
import { createSite, deleteSite, getSite, listSites, updateSite } from './sites.js';
import { exportUsage, listUsage } from './usage.js';
import { createReservation } from './reservations/reserve.js';
import { extendReservation, releaseReservation } from './reservations/extend-release.js';
import { getCapacity, previewCapacity } from './reservations/capacity.js';
import { getReservation, listReservations } from './reservations/views.js';

export const fleetModule = defineModule({
  name: 'fleet',
  migrations: fleetMigrations,
  methods: [
    bindMethod(methods['sites.list'], listSites),
    bindMethod(methods['sites.get'], getSite),
    bindMethod(methods['sites.create'], createSite),
    bindMethod(methods['sites.update'], updateSite),
    bindMethod(methods['sites.delete'], deleteSite),
    bindMethod(methods['projects.list'], listProjects),
    bindMethod(methods['projects.get'], getProject),
    bindMethod(methods['projects.create'], createProject),
    bindMethod(methods['projects.archive'], archiveProject),
    bindMethod(methods['pools.list'], listPools),
    bindMethod(methods['pools.get'], getPool),
    bindMethod(methods['pools.create'], createPool),
    bindMethod(methods['pools.update'], updatePool),
    bindMethod(methods['pools.archive'], archivePool),
    bindMethod(methods['pools.offer'], (ctx) => offerPool(ctx, true)),
    bindMethod(methods['pools.unoffer'], (ctx) => offerPool(ctx, false)),
    bindMethod(methods['quotas.get'], getQuotas),
    bindMethod(methods['quotas.set'], setQuota),
    bindMethod(methods['drivers.list'], listDrivers),
    bindMethod(methods['nodes.list'], listNodes),
    bindMethod(methods['nodes.get'], getNode),
    bindMethod(methods['nodes.events'], nodeEvents),
    bindMethod(methods['nodes.cordon'], cordonNode),
    bindMethod(methods['nodes.uncordon'], uncordonNode),
    bindMethod(methods['nodes.drain'], drainNode),
    bindMethod(methods['nodes.label'], labelNode),
    bindMethod(methods['nodes.taint'], taintNode),
    bindMethod(methods['nodes.retire'], retireNode),
    bindMethod(methods['nodes.delete'], deleteNode),
    bindMethod(methods['nodes.join'], joinNode),
    bindMethod(methods['nodes.claim'], claimNode),
    bindMethod(methods['nodes.heartbeat'], heartbeat),
    bindMethod(methods['joinTokens.create'], createJoinToken),
    bindMethod(methods['joinTokens.list'], listJoinTokens),
    bindMethod(methods['joinTokens.revoke'], revokeJoinToken),
    bindMethod(methods['joinRequests.list'], listJoinRequests),
    bindMethod(methods['joinRequests.approve'], approveJoinRequest),
    bindMethod(methods['joinRequests.reject'], rejectJoinRequest),
    bindMethod(methods['inventory.get'], getInventory),
    bindMethod(methods['inventory.history'], inventoryHistory),
    bindMethod(methods['inventory.diff'], inventoryDiff),
    bindMethod(methods['usage.list'], listUsage),
    bindMethod(methods['usage.export'], exportUsage),
    bindMethod(methods['capacity.get'], getCapacity),
    bindMethod(methods['capacity.preview'], previewCapacity),
    bindMethod(methods['reservations.create'], createReservation),
    bindMethod(methods['reservations.get'], getReservation),
    bindMethod(methods['reservations.list'], listReservations),
    bindMethod(methods['reservations.extend'], extendReservation),
    bindMethod(methods['reservations.release'], releaseReservation),
  ],
  jobs: { [CONTROLLER_JOB]: controllerJob },
});
