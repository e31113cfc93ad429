/**
 * What the instances commands share: --wait (wait.ts polls instances.get until the instance's
 * workflow ended), reading the small files create takes, and the table columns.
 */
import type { CommandContext, NumberFlag } from '../../define.js';
import { CliError } from '../../errors.js';
import type { CliApi } from '../../transport-types.js';
import { waitFor } from '../../wait.js';

export const waitFlag = {
  type: 'number',
  integer: true,
  min: 0,
  max: 3600,
  default: 0,
  description:
    'Seconds to wait until it is running, stopped or deleted, with progress on stderr; one that ends failed exits 1 with its reason (0: do not wait)',
  placeholder: 'SECONDS',
} as const satisfies NumberFlag;

// The states an instance passes through while its workflow runs.
const BUSY = new Set(['provisioning', 'stopping', 'deleting']);

/**
 * Waits up to `seconds` while the instance's workflow runs (wait.ts), then answers it as it is; an
 * instance that ends failed fails the command with its reason.
 */
export function waitSettled<T extends { id: string; state: string; reason?: string | null }>(
  context: Pick<CommandContext, 'log' | 'print' | 'status'>,
  client: CliApi,
  instance: T,
  seconds: number,
): Promise<T> {
  return waitFor(context, instance, seconds, {
    noun: 'instance',
    show: `better-compute instances get ${instance.id}`,
    read: async () => (await client.call('instances.get', { instanceId: instance.id })) as unknown as T,
    busy: (current) => BUSY.has(current.state),
    failure: (current) =>
      current.state === 'failed' ? `failed: ${current.reason ?? 'its node gave no reason'}` : null,
    hint: `"better-compute instances get ${instance.id}" shows it; delete it (better-compute instances delete ${instance.id}) once the cause is fixed, and create it again.`,
  });
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
