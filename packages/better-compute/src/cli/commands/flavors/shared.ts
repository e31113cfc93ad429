/** What the flavors commands share: the shape flags and the table columns. */
import type { NumberFlag, StringFlag } from '../../define.js';
import { CliError } from '../../errors.js';

export const shapeFlags = {
  vcpus: { type: 'number', integer: true, min: 1, max: 256, description: 'vCPUs', placeholder: 'N' },
  memory: {
    type: 'number',
    integer: true,
    min: 128,
    max: 4 * 1024 * 1024,
    description: 'Memory in MiB',
    placeholder: 'MIB',
  },
  disk: { type: 'number', integer: true, min: 1, max: 65536, description: 'Disk in GiB', placeholder: 'GIB' },
  gpus: {
    type: 'number',
    integer: true,
    min: 0,
    max: 16,
    description: 'GPUs (0 for none)',
    placeholder: 'N',
  },
  gpuModel: { type: 'string', description: 'The GPUs’ model (H100)', placeholder: 'MODEL' },
  description: { type: 'string', description: 'What it is for', placeholder: 'TEXT' },
  imageOs: {
    type: 'string',
    description: 'The OS whose newest image on --image-channel its instances boot when they name none',
    placeholder: 'OS',
  },
  imageChannel: {
    type: 'string',
    choices: ['testing', 'stable'],
    description: 'The channel --image-os follows',
  },
} as const satisfies Record<string, NumberFlag | StringFlag>;

/**
 * The image channel a flavor follows, from --image-os and --image-channel: both or neither; on
 * update, `--image-os none` stops following one.
 */
export function flavorImage(
  flags: { imageOs?: string | undefined; imageChannel?: 'testing' | 'stable' | undefined },
  commandName: string,
): { os: string; channel: 'testing' | 'stable' } | null | undefined {
  if (flags.imageOs === 'none' && flags.imageChannel === undefined && commandName === 'flavors update')
    return null;
  if (flags.imageOs === undefined && flags.imageChannel === undefined) return undefined;
  if (flags.imageOs === undefined || flags.imageChannel === undefined)
    throw new CliError('INVALID_ARGUMENT', '--image-os and --image-channel go together', {
      hint: `Give both, as in --image-os debian-12 --image-channel stable (better-compute help ${commandName}).`,
    });
  return { os: flags.imageOs, channel: flags.imageChannel };
}

export interface FlavorView {
  id: string;
  name: string;
  poolId: string;
  vcpus: number;
  memoryMiB: number;
  diskGiB: number;
  gpus: number;
  gpuModel: string | null;
  image: { os: string; channel: string } | null;
  version: number;
}

export function flavorColumns(f: FlavorView): Record<string, unknown> {
  return {
    id: f.id,
    name: f.name,
    vcpus: f.vcpus,
    memory: `${f.memoryMiB} MiB`,
    disk: `${f.diskGiB} GiB`,
    gpus: f.gpus ? `${f.gpus}${f.gpuModel ? ` ${f.gpuModel}` : ''}` : '-',
    image: f.image ? `${f.image.os}@${f.image.channel}` : '-',
    version: f.version,
  };
}
