/**
 * `flavors create --pool POOL --name N --vcpus N --memory MIB --disk GIB [--gpus N --gpu-model M]
 * [--image-os OS --image-channel CHANNEL]`: flavors.create.
 */
import { defineCommand, nameFlag } from '../../define.js';
import { defined } from '../shared.js';
import { flavorImage, shapeFlags } from './shared.js';

export default defineCommand({
  name: 'flavors create',
  group: 'VPS',
  summary: 'Add a flavor to a VPS pool you own (flavors.create)',
  target: 'token',
  calls: ['flavors.create'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The VPS pool' },
    name: nameFlag('Its name in the pool (small, gpu.1)'),
    vcpus: { ...shapeFlags.vcpus, required: true },
    memory: { ...shapeFlags.memory, required: true },
    disk: { ...shapeFlags.disk, required: true },
    gpus: shapeFlags.gpus,
    gpuModel: shapeFlags.gpuModel,
    description: shapeFlags.description,
    imageOs: shapeFlags.imageOs,
    imageChannel: shapeFlags.imageChannel,
  },
  examples: [
    'better-compute flavors create --pool pool_01k… --name small --vcpus 1 --memory 512 --disk 4',
    'better-compute flavors create --pool pool_01k… --name gpu.1 --vcpus 8 --memory 65536 --disk 200 --gpus 1 --gpu-model H100',
    'better-compute flavors create --pool pool_01k… --name web --vcpus 2 --memory 2048 --disk 20 --image-os debian-12 --image-channel stable',
  ],
  async run({ flags, api, commandName }) {
    return (await api()).call('flavors.create', {
      poolId: flags.pool,
      name: flags.name,
      vcpus: flags.vcpus,
      memoryMiB: flags.memory,
      diskGiB: flags.disk,
      ...defined({
        gpus: flags.gpus,
        gpuModel: flags.gpuModel,
        description: flags.description,
        image: flavorImage(flags, commandName) ?? undefined,
      }),
    });
  },
});
