/**
 * The sandboxes module: templates with warm pools, sandboxes, snapshots and volumes on the nodes
 * of VPS pools; the hooks that move them with their workflows, and the controller that expires
 * sandboxes and keeps warm pools filled. Built per deployment: it signs with the deployment's
 * sandbox SSH CA and follows its snapshot setting.
 */
import {
  sandboxesGroup,
  sandboxSnapshotsGroup,
  sandboxTemplatesGroup,
  sandboxVolumesGroup,
} from '@better-compute/core/methods';
import { defineModule, implement, type MethodBinding } from '../define-module.js';
import type { DeploymentKeySettings } from '../ssh-certs/keys.js';
import { registerWorkflowHooks } from '../workflows/hooks.js';
import { scheduleSimulated } from '../vps/sim-runtime.js';
import { SANDBOX_CONTROLLER_JOB, sandboxControllerJob } from './controller.js';
import { execSandbox } from './exec.js';
import { SANDBOX_WORKFLOW_KINDS, sandboxWorkflowHooks } from './lifecycle.js';
import { sandboxesMigrations } from './migrations.js';
import {
  createSandbox,
  deleteSandbox,
  extendSandbox,
  getSandbox,
  listSandboxes,
  sandboxOwner,
  settleCreate,
  snapshotSandbox,
} from './sandboxes.js';
import { sandboxQuotas } from './quotas.js';
import { sandboxDeps, type SandboxSettings } from './settings.js';
import { deleteSnapshot, getSnapshot, listSnapshots } from './snapshots.js';
import {
  attachChecks,
  createTemplate,
  deleteTemplate,
  getTemplate,
  listTemplates,
  updateTemplate,
} from './templates.js';
import { createVolume, deleteVolume, getVolume, listVolumes, resizeVolume, volumeOwner } from './volumes.js';

export function createSandboxesModule(
  keySettings: DeploymentKeySettings = {},
  settings: SandboxSettings = {},
) {
  const deps = sandboxDeps(keySettings, settings);
  registerWorkflowHooks(SANDBOX_WORKFLOW_KINDS, {
    ...sandboxWorkflowHooks(deps),
    commandQueued: scheduleSimulated,
  });
  const sandboxes = implement(
    sandboxesGroup,
    {
      list: listSandboxes,
      get: getSandbox,
      create: createSandbox(deps),
      extend: extendSandbox,
      delete: deleteSandbox,
      snapshot: snapshotSandbox(deps),
      exec: execSandbox(deps),
      quotas: sandboxQuotas.get,
      setQuota: sandboxQuotas.set,
    },
    // Members act on their own sandboxes: the owner is read before the call is decided.
    {
      get: sandboxOwner,
      extend: sandboxOwner,
      delete: sandboxOwner,
      snapshot: sandboxOwner,
      exec: sandboxOwner,
    },
  );
  // A cold create answers once its sandbox is ready, up to waitSeconds: waited for after the
  // create committed, since the node's work starts only then.
  const create = sandboxes.bindings.find((b) => b.method.name === 'create') as MethodBinding;
  create.settle = async (output, context) => {
    const out = output as { id: string; tenantId: string; state: string };
    const wait = Number((context.input as { waitSeconds?: number }).waitSeconds ?? 0);
    if (out.state !== 'starting' || wait <= 0) return output;
    // The sandbox exists whatever happens here: a failed wait answers it as it was created.
    return (await settleCreate(context.db, out, wait, context.now).catch(() => undefined)) ?? output;
  };
  const templates = implement(sandboxTemplatesGroup, {
    list: listTemplates,
    get: getTemplate,
    create: createTemplate,
    update: updateTemplate,
    delete: deleteTemplate,
  });
  // Naming a volume is decided on the volume (compute:sandboxes:attach), beside manage on the tenant.
  for (const binding of templates.bindings as MethodBinding[])
    if (binding.method.name === 'create' || binding.method.name === 'update') binding.checks = attachChecks;
  return defineModule({
    name: 'sandboxes',
    migrations: sandboxesMigrations,
    methods: [
      templates,
      sandboxes,
      implement(sandboxSnapshotsGroup, { list: listSnapshots, get: getSnapshot, delete: deleteSnapshot }),
      implement(
        sandboxVolumesGroup,
        {
          list: listVolumes,
          get: getVolume,
          create: createVolume,
          resize: resizeVolume,
          delete: deleteVolume,
        },
        // Members resize and delete their own volumes, as their own sandboxes: the owner is read first.
        { get: volumeOwner, resize: volumeOwner, delete: volumeOwner },
      ),
    ],
    jobs: { [SANDBOX_CONTROLLER_JOB]: sandboxControllerJob(deps) },
  });
}

/** The module as the builtins list it; a deployment's own is made with its settings (compute.ts). */
export const sandboxesModule = createSandboxesModule();
