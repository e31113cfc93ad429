/**
 * What the sandbox commands share: table columns, and reading the template flags that need more
 * than a type (--volumes, --env, --flavor by name), refused as usage errors before anything is sent.
 */
import { formatDuration } from '@better-compute/core';
import { CliError } from '../../errors.js';
import type { CliApi } from '../../transport-types.js';

function usage(command: string, field: string, message: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    hint: `Run "better-compute help ${command}" for its flags and examples.`,
    details: { field },
  });
}

export interface SandboxRow {
  id: string;
  templateId: string;
  state: string;
  runtime: string;
  nodeId: string | null;
  warm: boolean;
  expiresAt: string | null;
  reason: string | null;
}

export function sandboxColumns(s: SandboxRow): Record<string, unknown> {
  return {
    id: s.id,
    template: s.templateId,
    state: s.state,
    runtime: s.runtime,
    node: s.nodeId ?? '',
    warm: s.warm ? 'yes' : 'no',
    expires: s.expiresAt ?? '',
    reason: s.reason ?? '',
  };
}

export function templateColumns(t: {
  id: string;
  name: string;
  runtime: string;
  poolId: string;
  network: string;
  warm: { min: number; max: number; ready: number; starting: number };
  maxTtlSeconds: number;
}): Record<string, unknown> {
  return {
    id: t.id,
    name: t.name,
    runtime: t.runtime,
    pool: t.poolId,
    network: t.network,
    warm: `${t.warm.ready} ready, ${t.warm.starting} starting (${t.warm.min}..${t.warm.max})`,
    'max ttl': formatDuration(t.maxTtlSeconds),
  };
}

/** `NAME:/PATH[:ro],…`; an entry that looks like vol_… is sent as volumeId; "" clears them all. */
export function parseVolumes(command: string, value: string) {
  if (value.trim() === '') return [];
  return value.split(',').map((entry) => {
    const parts = entry.trim().split(':');
    const [name, path, mode, ...rest] = parts;
    if (!name || !path || !path.startsWith('/') || rest.length > 0 || (mode !== undefined && mode !== 'ro'))
      throw usage(command, 'volumes', `--volumes takes NAME:/PATH[:ro] entries (got "${entry}")`);
    return {
      ...(/^vol_[0-9a-z]{26}$/.test(name) ? { volumeId: name } : { name }),
      path,
      readOnly: mode === 'ro',
    };
  });
}

/** `NAME=secret://…,…` (references, never values); "" clears them all. */
export function parseEnv(command: string, value: string) {
  if (value.trim() === '') return [];
  return value.split(',').map((entry) => {
    const eq = entry.indexOf('=');
    const name = entry.slice(0, eq).trim();
    const secretRef = entry.slice(eq + 1).trim();
    if (eq <= 0 || !secretRef.startsWith('secret://'))
      throw usage(
        command,
        'env',
        `--env takes NAME=secret://TENANT/sec_… references, never values (got "${name || entry.slice(0, 20)}")`,
      );
    return { name, secretRef };
  });
}

/** A flavor by id, or by its name in the pool (the guide's `--flavor small`). */
export async function flavorIdOf(client: CliApi, poolId: string, flavor: string): Promise<string> {
  if (/^flv_[0-9a-z]{26}$/.test(flavor)) return flavor;
  const page = (await client.call('flavors.list', { poolId, limit: 500 })) as {
    items: { id: string; name: string }[];
  };
  const found = page.items.find((f) => f.name === flavor);
  if (!found)
    throw new CliError('NOT_FOUND', `pool ${poolId} has no flavor named ${flavor}`, {
      details: { field: 'flavor' },
      hint: `better-compute flavors list --pool ${poolId} shows its flavors.`,
    });
  return found.id;
}
