/**
 * The flags commands share, by what they do: every command that prints a result takes --format and
 * --query; token commands take --url, --tenant, --profile and --config (the configuration is their
 * in-process transport); config commands take --config.
 */
import type { AnyCommand, FlagSpecs } from './define.js';

export const OUTPUT_FLAGS = {
  format: {
    type: 'string',
    choices: ['json', 'compact', 'table'],
    description: 'Output format: indented JSON (the default), JSON on one line, or a table for lists',
    placeholder: 'FORMAT',
  },
  query: {
    type: 'string',
    description: 'Print part of the result, like binding, items[].id or findings[].check; strings print raw',
    placeholder: 'PATH',
  },
} as const satisfies FlagSpecs;

export const CONFIG_FLAGS = {
  config: {
    type: 'string',
    description:
      'The configuration file (default: BETTER_COMPUTE_CONFIG, else the nearest better-compute.config.*)',
    placeholder: 'PATH',
  },
} as const satisfies FlagSpecs;

export const TOKEN_FLAGS = {
  url: {
    type: 'string',
    description:
      'Call a running server at this origin or endpoint (default: BETTER_COMPUTE_URL; else in process)',
    placeholder: 'URL',
  },
  tenant: {
    type: 'string',
    description: 'The tenant acting (default: BETTER_COMPUTE_TENANT)',
    placeholder: 'TENANT',
  },
  profile: {
    type: 'string',
    description: 'The saved credentials profile (default: BETTER_COMPUTE_PROFILE, else the current one)',
    placeholder: 'NAME',
  },
  ...CONFIG_FLAGS,
} as const satisfies FlagSpecs;

/** The shared flags a command takes, before its own. */
export function globalFlagsOf(command: Pick<AnyCommand, 'target' | 'output'>): FlagSpecs {
  const output: FlagSpecs = command.output === false ? {} : OUTPUT_FLAGS;
  if (command.target === 'token') return { ...TOKEN_FLAGS, ...output };
  if (command.target === 'config') return { ...CONFIG_FLAGS, ...output };
  return { ...output };
}
