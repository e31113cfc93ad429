/**
 * `flavors update FLAVOR [--vcpus N] [--memory MIB] [--disk GIB] [--gpus N] [--gpu-model M]
 * [--image-os OS --image-channel CHANNEL | --image-os none] [--if-version N]`: flavors.update.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { defined, ifVersionFlag } from '../shared.js';
import { flavorImage, shapeFlags } from './shared.js';

export default defineCommand({
  name: 'flavors update',
  group: 'VPS',
  summary: 'Change a flavor; instances take it when resized to it (flavors.update)',
  target: 'token',
  calls: ['flavors.update'],
  positionals: [{ name: 'flavor', description: 'The flavor id', required: true, kind: 'flavor' }],
  flags: { ...shapeFlags, ifVersion: ifVersionFlag },
  examples: [
    'better-compute flavors update flv_01k… --memory 1024 --if-version 1',
    'better-compute flavors update flv_01k… --image-os debian-12 --image-channel stable',
    'better-compute flavors update flv_01k… --image-os none',
  ],
  async run({ args, flags, api, commandName }) {
    const change = defined({
      vcpus: flags.vcpus,
      memoryMiB: flags.memory,
      diskGiB: flags.disk,
      gpus: flags.gpus,
      gpuModel: flags.gpuModel,
      description: flags.description,
      image: flavorImage(flags, commandName),
    });
    if (Object.keys(change).length === 0)
      throw new CliError('INVALID_ARGUMENT', 'flavors update needs something to change; nothing was sent', {
        hint: `Run "better-compute help ${commandName}" for its flags.`,
      });
    return (await api()).call('flavors.update', {
      flavorId: args.flavor,
      ...change,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});
