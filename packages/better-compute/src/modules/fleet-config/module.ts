/**
 * The fleet-config module: the `fleet` group (docs/fleet.md), fleet configuration as one
 * FleetConfig document. It changes the fleet only through the services of the modules that own
 * each object (fleet, vps, sandboxes), and keeps its own applies and drift verdicts.
 */
import { fleetGroup } from '@better-compute/core/methods';
import { defineModule, implement, type MethodBinding } from '../define-module.js';
import { applyChecks, applyFleet, exportFleet, planFleetMethod } from './apply.js';
import { FLEET_DRIFT_JOB, fleetDriftJob, fleetStatus } from './drift.js';
import { fleetConfigMigrations } from './migrations.js';

const fleet = implement(fleetGroup, {
  export: exportFleet,
  plan: planFleetMethod,
  apply: applyFleet,
  status: fleetStatus,
});
// Every call an apply makes is decided with compute:fleet:admin, before any of them runs.
for (const binding of fleet.bindings as MethodBinding[])
  if (binding.method.name === 'apply') binding.checks = applyChecks;

export const fleetConfigModule = defineModule({
  name: 'fleet-config',
  migrations: fleetConfigMigrations,
  methods: [fleet],
  jobs: { [FLEET_DRIFT_JOB]: fleetDriftJob },
});
