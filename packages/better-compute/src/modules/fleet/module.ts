/**
 * The fleet module: sites, projects, pools and offers, quotas, drivers, nodes, join tokens and
 * requests, inventory, usage, capacity and reservations, and the controller that keeps them moving.
 */
import {
  sitesGroup,
  projectsGroup,
  poolsGroup,
  offersGroup,
  quotasGroup,
  driversGroup,
  nodesGroup,
  joinTokensGroup,
  siteTokensGroup,
  joinRequestsGroup,
  inventoryGroup,
  usageGroup,
  capacityGroup,
  reservationsGroup,
} from '@better-compute/core/methods';
import { controllerJob, CONTROLLER_JOB } from './controller.js';
import { fleetGauges } from './gauges.js';
import { defineModule, implement } from '../define-module.js';
import { invalidState } from './common.js';
import { listDrivers } from './drivers.js';
import {
  approveJoinRequest,
  claimNode,
  createJoinToken,
  createSiteToken,
  joinNode,
  listJoinRequests,
  listJoinTokens,
  rejectJoinRequest,
  revokeJoinToken,
  revokeSiteToken,
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
import { answerOffer, listOffers, offerPool } from './offers.js';
import { archivePool, createPool, getPool, listPools, updatePool } from './pools.js';
import { getQuotas, setQuota } from './quotas.js';
import { archiveProject, createProject, getProject, listProjects } from './projects.js';
import { createSite, deleteSite, getSite, listSites, updateSite } from './sites.js';
import { exportUsage, listUsage } from './usage.js';
import { createReservation } from './reservations/reserve.js';
import { extendReservation, releaseReservation } from './reservations/extend-release.js';
import { getCapacity, previewCapacity } from './reservations/capacity.js';
import { getReservation, listReservations, reservationOwner } from './reservations/views.js';

export interface FleetSettings {
  /**
   * Whether the deployment's destructive-batch quorum is on (an approver chain in its PKI bundle).
   * While it is, a node is deleted only as the member of an approved batch (docs/quorum.md).
   */
  quorumOn?: (() => Promise<boolean>) | undefined;
}

export function createFleetModule(settings: FleetSettings = {}) {
  return defineModule({
    name: 'fleet',
    migrations: fleetMigrations,
    gauges: fleetGauges,
    methods: [
      implement(sitesGroup, {
        list: listSites,
        get: getSite,
        create: createSite,
        update: updateSite,
        delete: deleteSite,
      }),
      implement(projectsGroup, {
        list: listProjects,
        get: getProject,
        create: createProject,
        archive: archiveProject,
      }),
      implement(poolsGroup, {
        list: listPools,
        get: getPool,
        create: createPool,
        update: updatePool,
        archive: archivePool,
        offer: (ctx) => offerPool(ctx, true),
        unoffer: (ctx) => offerPool(ctx, false),
      }),
      implement(offersGroup, {
        list: listOffers,
        accept: (ctx) => answerOffer(ctx, true),
        decline: (ctx) => answerOffer(ctx, false),
      }),
      implement(quotasGroup, {
        get: getQuotas,
        set: setQuota,
      }),
      implement(driversGroup, {
        list: listDrivers,
      }),
      implement(nodesGroup, {
        list: listNodes,
        get: getNode,
        events: nodeEvents,
        cordon: cordonNode,
        uncordon: uncordonNode,
        drain: drainNode,
        label: labelNode,
        taint: taintNode,
        retire: retireNode,
        delete: async (ctx) => {
          if (await settings.quorumOn?.()) throw deleteNeedsBatch(ctx.input.nodeId);
          return deleteNode(ctx);
        },
        join: joinNode,
        claim: claimNode,
        heartbeat,
      }),
      implement(joinTokensGroup, {
        create: createJoinToken,
        list: listJoinTokens,
        revoke: revokeJoinToken,
      }),
      implement(siteTokensGroup, {
        create: createSiteToken,
        revoke: revokeSiteToken,
      }),
      implement(joinRequestsGroup, {
        list: listJoinRequests,
        approve: approveJoinRequest,
        reject: rejectJoinRequest,
      }),
      implement(inventoryGroup, {
        get: getInventory,
        history: inventoryHistory,
        diff: inventoryDiff,
      }),
      implement(usageGroup, {
        list: listUsage,
        export: exportUsage,
      }),
      implement(capacityGroup, {
        get: getCapacity,
        preview: previewCapacity,
      }),
      implement(
        reservationsGroup,
        {
          create: createReservation,
          get: getReservation,
          list: listReservations,
          extend: extendReservation,
          release: releaseReservation,
        },
        // Members extend and release their own: the owner is read before the call is decided.
        { extend: reservationOwner, release: reservationOwner },
      ),
    ],
    jobs: { [CONTROLLER_JOB]: controllerJob },
  });
}

/** The module without a quorum: what the method table's coverage is checked against. */
export const fleetModule = createFleetModule();

function deleteNeedsBatch(nodeId: string) {
  return invalidState(
    `node ${nodeId} is deleted only through an approved batch while the destructive-batch quorum is on`,
    { nodeId, reason: 'quorum' },
    `Propose it as a batch with a node.delete leaf (better-compute batch create --reason … --scope FILE); it is deleted once a threshold of approvers sign (docs/quorum.md).`,
  );
}
