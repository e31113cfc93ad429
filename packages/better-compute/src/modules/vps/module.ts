/**
 * The VPS module: the image catalog, flavors of VPS pools, instances and their quotas; the hooks
 * that move an instance with its workflows; and the `sim` runtime that completes the runtime
 * commands of simulated nodes.
 */
import { flavorsGroup, imagesGroup, instancesGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { registerWorkflowHooks } from '../workflows/hooks.js';
import { deleteInstance, resizeInstance, startInstance, stopInstance } from './actions.js';
import { createInstance } from './create.js';
import { createFlavor, deleteFlavor, listFlavors, updateFlavor } from './flavors.js';
import { getImage, listImages, promoteImage, registerImage } from './images.js';
import { getInstance, instanceOwner, listInstances } from './instances.js';
import { INSTANCE_WORKFLOW_KINDS, instanceWorkflowHooks } from './lifecycle.js';
import { vpsMigrations } from './migrations.js';
import { instanceQuotas } from './quotas.js';
import { scheduleSimulated, SIM_RUNTIME_JOB, simRuntimeJob } from './sim-runtime.js';

registerWorkflowHooks(INSTANCE_WORKFLOW_KINDS, {
  ...instanceWorkflowHooks,
  commandQueued: scheduleSimulated,
});

export const vpsModule = defineModule({
  name: 'vps',
  migrations: vpsMigrations,
  methods: [
    implement(imagesGroup, {
      list: listImages,
      get: getImage,
      register: registerImage,
      promote: promoteImage,
    }),
    implement(flavorsGroup, {
      list: listFlavors,
      create: createFlavor,
      update: updateFlavor,
      delete: deleteFlavor,
    }),
    implement(
      instancesGroup,
      {
        list: listInstances,
        get: getInstance,
        create: createInstance,
        start: startInstance,
        stop: stopInstance,
        delete: deleteInstance,
        resize: resizeInstance,
        quotas: instanceQuotas.get,
        setQuota: instanceQuotas.set,
      },
      // Members start, stop, resize and delete their own: the owner is read before the call is decided.
      { start: instanceOwner, stop: instanceOwner, delete: instanceOwner, resize: instanceOwner },
    ),
  ],
  jobs: { [SIM_RUNTIME_JOB]: simRuntimeJob },
});
