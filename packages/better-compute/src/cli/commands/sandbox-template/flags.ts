/** The field flags `sandbox-template create` and `update` share, and the input they make. */
import type { FlagSpecs } from '../../define.js';
import { CliError } from '../../errors.js';
import type { CliApi } from '../../transport-types.js';
import { readSmallFile } from '../instances/shared.js';
import { flavorIdOf, parseEnv, parseVolumes } from '../sandbox/shared.js';

export const templateFieldFlags = {
  flavor: { type: 'string', description: 'A flavor of the pool, by id or name', placeholder: 'FLAVOR' },
  image: { type: 'id', kind: 'image', description: 'The image its sandboxes start from' },
  userData: { type: 'string', description: 'A first-start file (on bwrap a #! script)', placeholder: 'FILE' },
  noUserData: { type: 'boolean', description: 'Remove the user data (update)' },
  defaultTtl: {
    type: 'duration',
    min: '1m',
    max: '7d',
    description: 'The lifetime of a sandbox that asks none, such as 1h',
    placeholder: 'DURATION',
  },
  maxTtl: {
    type: 'duration',
    min: '1m',
    max: '7d',
    description: 'The longest a sandbox may live, extended or not, such as 4h',
    placeholder: 'DURATION',
  },
  warmMin: {
    type: 'number',
    integer: true,
    min: 0,
    max: 64,
    description: 'Sandboxes kept booted and waiting (0-64)',
    placeholder: 'N',
  },
  warmMax: {
    type: 'number',
    integer: true,
    min: 0,
    max: 64,
    description: 'The most kept warm (0-64; needs --warm-min; default --warm-min)',
    placeholder: 'N',
  },
  env: {
    type: 'string',
    description: 'NAME=secret://TENANT/sec_…,… secret references ("" removes them)',
    placeholder: 'NAME=REF,…',
  },
  network: {
    type: 'string',
    choices: ['egress', 'private', 'none'],
    description: 'egress (outbound NAT), private (the node only) or none',
  },
  volumes: {
    type: 'string',
    description: 'NAME:/PATH[:ro],… volumes every sandbox mounts ("" removes them)',
    placeholder: 'VOLUMES',
  },
} as const satisfies FlagSpecs;

type Values = {
  flavor?: string | undefined;
  image?: string | undefined;
  userData?: string | undefined;
  noUserData: boolean;
  defaultTtl?: number | undefined;
  maxTtl?: number | undefined;
  warmMin?: number | undefined;
  warmMax?: number | undefined;
  env?: string | undefined;
  network?: string | undefined;
  volumes?: string | undefined;
};

function usage(command: string, field: string, message: string) {
  return new CliError('INVALID_ARGUMENT', message, {
    hint: `Run "better-compute help ${command}" for its flags and examples.`,
    details: { field },
  });
}

/** The input fields the flags give; usage errors before anything is sent. */
export async function templateFields(
  command: string,
  cwd: string,
  flags: Values,
  client: CliApi,
  poolId: () => Promise<string>,
) {
  if (flags.userData !== undefined && flags.noUserData)
    throw usage(command, 'userData', '--user-data and --no-user-data cannot go together');
  if (flags.warmMax !== undefined && flags.warmMin === undefined)
    throw usage(command, 'warmMax', '--warm-max needs --warm-min');
  const fields: Record<string, unknown> = {};
  if (flags.flavor !== undefined) fields.flavorId = await flavorIdOf(client, await poolId(), flags.flavor);
  if (flags.image !== undefined) fields.imageId = flags.image;
  if (flags.userData !== undefined)
    fields.userData = await readSmallFile(cwd, 'user-data', flags.userData, 32768);
  if (flags.noUserData) fields.userData = null;
  if (flags.defaultTtl !== undefined) fields.defaultTtlSeconds = flags.defaultTtl;
  if (flags.maxTtl !== undefined) fields.maxTtlSeconds = flags.maxTtl;
  if (flags.warmMin !== undefined) fields.warmMin = flags.warmMin;
  if (flags.warmMax !== undefined) fields.warmMax = flags.warmMax;
  if (flags.env !== undefined) fields.env = parseEnv(command, flags.env);
  if (flags.network !== undefined) fields.network = flags.network;
  if (flags.volumes !== undefined) fields.volumes = parseVolumes(command, flags.volumes);
  return fields;
}

/** The same checks, synchronous, for the flags that need no call: run before anything is sent. */
export function checkTemplateFlags(command: string, flags: Values) {
  if (flags.userData !== undefined && flags.noUserData)
    throw usage(command, 'userData', '--user-data and --no-user-data cannot go together');
  if (flags.warmMax !== undefined && flags.warmMin === undefined)
    throw usage(command, 'warmMax', '--warm-max needs --warm-min');
  if (flags.env !== undefined) parseEnv(command, flags.env);
  if (flags.volumes !== undefined) parseVolumes(command, flags.volumes);
}
