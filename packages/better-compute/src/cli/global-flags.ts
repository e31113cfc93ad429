/**
 * The flags commands share, by what they do: every command that prints a result takes --format and
 * --query; token commands take --url, --tenant, --profile and --config (the configuration is their
 * in-process transport); config commands take --config.
 */
import { type AnyCommand, type FlagSpecs, kebabCase, type OutputFormat, type StringFlag } from './define.js';

const FORMAT_WORDS: Record<OutputFormat, string> = {
  json: 'indented JSON',
  compact: 'JSON on one line',
  table: 'a table',
};

/**
 * What --format's help says the default is, from the command's own `defaultFormat`: help must not
 * promise JSON on a list that prints a table. A default that depends on the flags is tried with
 * each boolean flag flipped, so the line can name the flags that change it.
 */
function formatDefaultOf(command: Pick<AnyCommand, 'defaultFormat' | 'flags'>): string {
  const given = command.defaultFormat;
  if (typeof given !== 'function') return FORMAT_WORDS[given ?? 'json'];
  const flags = command.flags ?? {};
  const base: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(flags))
    base[key] = spec.type === 'boolean' ? (spec.default ?? false) : spec.default;
  try {
    const plain = given(base);
    const changes: string[] = [];
    for (const [key, spec] of Object.entries(flags)) {
      if (spec.type !== 'boolean') continue;
      const format = given({ ...base, [key]: !base[key] });
      const flag = base[key] ? `--no-${kebabCase(key)}` : `--${kebabCase(key)}`;
      if (format !== plain) changes.push(`${FORMAT_WORDS[format]} with ${flag}`);
    }
    return [FORMAT_WORDS[plain], ...changes].join('; ');
  } catch {
    // A project command's function may expect flags help cannot guess; help must still render.
    return 'it depends on the other flags';
  }
}

const QUERY_FLAG = {
  type: 'string',
  description: 'Print part of the result, like binding, items[].id or findings[].check; strings print raw',
  placeholder: 'PATH',
} as const satisfies StringFlag;

/** The output flags of a command: --format's help states the command's real default. */
function outputFlagsOf(command: Pick<AnyCommand, 'defaultFormat' | 'flags'>): FlagSpecs {
  return {
    format: {
      type: 'string',
      choices: ['json', 'compact', 'table'],
      description: `Output format: indented JSON, JSON on one line, or a table (default: ${formatDefaultOf(command)})`,
      placeholder: 'FORMAT',
    },
    query: QUERY_FLAG,
  };
}

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

/** The shared flags a command takes, before its own; --format's help names the command's default. */
export function globalFlagsOf(
  command: Pick<AnyCommand, 'target' | 'output' | 'defaultFormat' | 'flags'>,
): FlagSpecs {
  const output: FlagSpecs = command.output === false ? {} : outputFlagsOf(command);
  if (command.target === 'token') return { ...TOKEN_FLAGS, ...output };
  if (command.target === 'config') return { ...CONFIG_FLAGS, ...output };
  return { ...output };
}
