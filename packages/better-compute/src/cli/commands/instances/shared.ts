/**
 * What the instances commands share: --wait (poll instances.get until the instance's workflow
 * ended), reading the small files create takes, and the table columns.
 */
import type { NumberFlag } from '../../define.js';
import { CliError } from '../../errors.js';
import type { CliApi } from '../../transport-types.js';

export const waitFlag = {
  type: 'number',
  integer: true,
  min: 0,
  max: 3600,
  default: 0,
  description: 'Seconds to wait until it is running, stopped, deleted or failed (0: do not wait)',
  placeholder: 'SECONDS',
} as const satisfies NumberFlag;

const BUSY = new Set(['provisioning', 'stopping', 'deleting']);
const POLL_MS = 500;

/** Polls until the instance is no longer busy or the time is up, then answers it as it is. */
export async function waitSettled<T extends { id: string; state: string }>(
  client: CliApi,
  instance: T,
  seconds: number,
): Promise<T> {
  const until = Date.now() + seconds * 1000;
  let current: T = instance;
  while (BUSY.has(current.state) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    current = (await client.call('instances.get', { instanceId: instance.id })) as unknown as T;
  }
  return current;
}

/** A small text file named by a flag: refused before anything is sent when unreadable or too big. */
export async function readSmallFile(
  cwd: string,
  flag: string,
  path: string,
  maxBytes: number,
): Promise<string> {
  const [{ readFile, stat }, { resolve }] = await Promise.all([
    import('node:fs/promises'),
    import('node:path'),
  ]);
  const full = resolve(cwd, path);
  const info = await stat(full).catch(() => null);
  if (!info?.isFile())
    throw new CliError(
      'NOT_FOUND',
      `--${flag} ${path} is not a file this machine can read; nothing was sent`,
      {
        details: { field: flag },
      },
    );
  if (info.size > maxBytes)
    throw new CliError('INVALID_ARGUMENT', `--${flag} ${path} is ${info.size} bytes; at most ${maxBytes}`, {
      details: { field: flag },
    });
  return readFile(full, 'utf8');
}

export interface InstanceView {
  id: string;
  name: string;
  state: string;
  poolId: string;
  nodeId: string;
  vcpus: number;
  memoryMiB: number;
  diskGiB: number;
  gpus: number;
  address: string | null;
  reason: string | null;
}

export function instanceColumns(i: InstanceView): Record<string, unknown> {
  return {
    id: i.id,
    name: i.name,
    state: i.state,
    node: i.nodeId,
    shape: `${i.vcpus} vCPU, ${i.memoryMiB} MiB, ${i.diskGiB} GiB${i.gpus ? `, ${i.gpus} GPU` : ''}`,
    address: i.address ?? '',
    reason: i.reason ?? '',
  };
}
