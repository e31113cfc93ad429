/** What the flavors commands share: the shape flags and the table columns. */
import type { NumberFlag, StringFlag } from '../../define.js';

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
} as const satisfies Record<string, NumberFlag | StringFlag>;

export interface FlavorView {
  id: string;
  name: string;
  poolId: string;
  vcpus: number;
  memoryMiB: number;
  diskGiB: number;
  gpus: number;
  gpuModel: string | null;
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
    version: f.version,
  };
}
