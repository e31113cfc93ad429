/**
 * The metal module: `metal.*`, bare-metal machines and their provision states (docs/metal.md).
 * Built per deployment: it seals BMC passwords under the deployment's secret, and power off and
 * reset follow the destructive-batch quorum when the deployment's bundle turns it on.
 */
import type { AuthorizationCheck } from '@better-compute/core';
import { METAL_PROVISION_ACTION, metalGroup } from '@better-compute/core/methods';
import { defineModule, implement, type MethodBinding } from '../define-module.js';
import { type BulkVerb, bulkMachines, dedupe, isDestructive, type ProposeBatch } from './bulk.js';
import { confirmMac, listDiscovered } from './discovery.js';
import { metalMigrations } from './migrations.js';
import { createBmcSealer } from './sealing.js';
import { abortMachine, enrollMachine, getMachine, listMachines, powerMachine, runVerb } from './service.js';
import { BOOT_ENTRIES_ENDED_JOB, bootEntriesEnded } from './ramdisk.js';
import { memberEnded, METAL_MEMBER_ENDED_JOB } from './workflows.js';

/**
 * What a bulk call is decided on besides its own action on the tenant: that action on each machine
 * it names (so a policy that limits it to some machines limits bulk too), and, when it becomes a
 * batch, compute:batches:create, as commandBatches.create is decided. No more authority than the
 * one-machine calls and batch create give, for a person or an agent acting for one.
 */
function bulkChecks(quorumOn: () => Promise<boolean>) {
  return async (_db: unknown, tenantId: string, input: unknown): Promise<AuthorizationCheck[]> => {
    const { verb, machineIds } = input as { verb: BulkVerb; machineIds: string[] };
    const checks: AuthorizationCheck[] = dedupe(machineIds).map((id) => ({
      action: METAL_PROVISION_ACTION,
      resource: { type: 'compute-metal-machine', id, tenantId },
    }));
    if (isDestructive(verb) && (await quorumOn()))
      checks.push({ action: 'compute:batches:create', resource: { type: 'tenant', id: tenantId, tenantId } });
    return checks;
  };
}

export function createMetalModule(
  options: {
    secret?: string | undefined;
    quorumOn?: () => Promise<boolean>;
    /** How bulk makes its batch (the batches module's createBatch, wired by compute.ts). */
    proposeBatch?: ProposeBatch;
  } = {},
) {
  const sealer = createBmcSealer(options.secret);
  const quorumOn = options.quorumOn ?? (async () => false);
  const metal = implement(metalGroup, {
    enroll: enrollMachine(sealer),
    list: listMachines,
    get: getMachine,
    manage: runVerb('manage', quorumOn),
    inspect: runVerb('inspect', quorumOn),
    provide: runVerb('provide', quorumOn),
    retire: runVerb('retire', quorumOn),
    recover: runVerb('recover', quorumOn),
    abort: abortMachine,
    power: powerMachine(quorumOn),
    bulk: bulkMachines(quorumOn, options.proposeBatch),
    discovered: listDiscovered,
    confirmMac,
  });
  for (const binding of metal.bindings as MethodBinding[])
    if (binding.method.name === 'bulk') binding.checks = bulkChecks(quorumOn);
  return defineModule({
    name: 'metal',
    migrations: metalMigrations,
    methods: [metal],
    jobs: { [METAL_MEMBER_ENDED_JOB]: memberEnded, [BOOT_ENTRIES_ENDED_JOB]: bootEntriesEnded },
  });
}

/** The module without a secret or quorum: what the method table's coverage is checked against. */
export const metalModule = createMetalModule();
