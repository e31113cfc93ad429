/**
 * Helpers of the capacity commands (the ones every command shares are in ../shared.ts). Light on purpose: command files load it for
 * help, so anything heavy is imported inside `run`.
 */
import { ComputeError, formatDuration } from '@better-compute/core';
import type { BooleanFlag, StringFlag } from '../../define.js';
import { CliError } from '../../errors.js';

/** What a request asks of its GPUs, the same on `reserve` and `capacity --preview`. */
export const matchFlags = {
  nvlink: { type: 'boolean', description: 'Every GPU in one NVLink domain' },
  selector: {
    type: 'string',
    description: 'GPU and node match, such as "gpuProduct in (H100-SXM5-80GB), vramGiB >= 80"',
    placeholder: 'EXPR',
  },
  model: { type: 'string', description: 'Only GPUs of this model (gpuModel)', placeholder: 'MODEL' },
  product: {
    type: 'string',
    description: 'Only GPUs of this product (gpuProduct)',
    placeholder: 'PRODUCT',
  },
  tolerate: {
    type: 'string',
    repeated: true,
    description: 'A taint key whose NoSchedule the request tolerates',
    placeholder: 'KEY',
  },
} as const satisfies {
  nvlink: BooleanFlag;
  selector: StringFlag;
  model: StringFlag;
  product: StringFlag;
  tolerate: StringFlag;
};

/** Validates a --selector locally with the server's own parser (INVALID_ARGUMENT, exit 2). */
export async function checkSelector(selector: string | undefined): Promise<void> {
  if (selector === undefined) return;
  const { parseSelector } = await import('../../../modules/fleet/reservations/selector.js');
  try {
    parseSelector(selector);
  } catch (error) {
    if (error instanceof ComputeError) {
      throw new CliError('INVALID_ARGUMENT', `--${error.message}`, {
        ...(error.hint ? { hint: error.hint } : {}),
        ...(error.details ? { details: error.details } : {}),
      });
    }
    throw error;
  }
}

/** The columns of a reservation in a table. */
export function reservationColumns(r: {
  id: string;
  state: string;
  poolId: string;
  gpus: number;
  nvlink: boolean;
  durationSeconds: number;
  queuePosition: number | null;
  health: string;
  endsAt: string | null;
  endReason: string | null;
  binding: { nodeId: string; gpuIndices: number[] }[];
  ownerId: string | null;
  agentId: string | null;
}): Record<string, unknown> {
  return {
    id: r.id,
    state: r.state,
    pool: r.poolId,
    gpus: r.gpus,
    nvlink: r.nvlink ? 'yes' : 'no',
    for: formatDuration(r.durationSeconds),
    queue: r.queuePosition ?? '',
    health: r.health,
    endsAt: r.endsAt ?? '',
    nodes: r.binding.length,
    endReason: r.endReason ?? '',
    owner: r.agentId ? `${r.ownerId ?? ''} (agent ${r.agentId})` : (r.ownerId ?? ''),
  };
}
