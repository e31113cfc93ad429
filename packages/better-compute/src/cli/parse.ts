/**
 * Parses a command's flags and positionals. Everything a person can get wrong here is a usage
 * mistake (INVALID_ARGUMENT, exit 2) found before anything is sent: an unknown flag (with a "did
 * you mean"), a missing value, a value outside the choices, a number or duration that does not
 * parse, an id that does not look like its kind.
 */
import { ID_PREFIXES, idShapeMessage, isId, parseDuration } from '@better-compute/core';
import type { AnyCommand, FlagSpec, FlagSpecs } from './define.js';
import { kebabCase } from './define.js';
import { CliError } from './errors.js';
import { looksLikeSecret, shownWord } from './shown.js';
import { didYouMean } from './suggest.js';

export interface ParsedLine {
  flags: Record<string, unknown>;
  args: Record<string, string | string[] | undefined>;
  rest: string[];
  /** `--help` or `-h` was given. */
  help: boolean;
}

function usage(commandName: string, message: string, field?: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    hint: `Run "better-compute help ${commandName}" for its flags and examples.`,
    ...(field ? { details: { field } } : {}),
  });
}

function describeValue(spec: FlagSpec): string {
  if (spec.type === 'string' && spec.choices) return spec.choices.join('|');
  return spec.placeholder ?? (spec.type === 'id' ? `${ID_PREFIXES[spec.kind]}_…` : spec.type.toUpperCase());
}

function convert(commandName: string, flag: string, spec: FlagSpec, raw: string): unknown {
  switch (spec.type) {
    case 'string':
      if (spec.choices && !spec.choices.includes(raw)) {
        const near = didYouMean(raw, spec.choices);
        throw usage(
          commandName,
          `--${flag} must be one of ${spec.choices.join(', ')} (got ${shownWord(raw)})${near ? `; did you mean "${near}"?` : ''}`,
          flag,
        );
      }
      return raw;
    case 'number': {
      const value = /^-?(\d+(\.\d+)?|\.\d+)$/.test(raw.trim()) ? Number(raw) : Number.NaN;
      if (!Number.isFinite(value))
        throw usage(commandName, `--${flag} must be a number (got ${shownWord(raw)})`, flag);
      if (spec.integer && !Number.isInteger(value))
        throw usage(commandName, `--${flag} must be a whole number (got ${shownWord(raw)})`, flag);
      if (spec.min !== undefined && value < spec.min)
        throw usage(commandName, `--${flag} must be at least ${spec.min} (got ${raw})`, flag);
      if (spec.max !== undefined && value > spec.max)
        throw usage(commandName, `--${flag} must be at most ${spec.max} (got ${raw})`, flag);
      return value;
    }
    case 'duration': {
      let seconds: number;
      try {
        seconds = parseDuration(raw, `--${flag}`);
      } catch (error) {
        throw usage(commandName, error instanceof Error ? error.message : String(error), flag);
      }
      if (spec.min !== undefined && seconds < parseDuration(spec.min))
        throw usage(commandName, `--${flag} must be at least ${spec.min} (got ${raw})`, flag);
      if (spec.max !== undefined && seconds > parseDuration(spec.max))
        throw usage(commandName, `--${flag} must be at most ${spec.max} (got ${raw})`, flag);
      return seconds;
    }
    case 'id':
      if (!isId(spec.kind, raw))
        throw usage(commandName, `${idShapeMessage(`--${flag}`, spec.kind)} (got ${shownWord(raw)})`, flag);
      return raw;
    case 'boolean':
      if (raw === 'true') return true;
      if (raw === 'false') return false;
      throw usage(commandName, `--${flag} takes no value (or true/false; got ${shownWord(raw)})`, flag);
  }
}

/** Parses `tokens` (what follows the command words) against the command's flags and the shared ones. */
export function parseLine(command: AnyCommand, specs: FlagSpecs, tokens: readonly string[]): ParsedLine {
  const name = command.name;
  const byFlag = new Map<string, { key: string; spec: FlagSpec }>();
  for (const [key, spec] of Object.entries(specs)) byFlag.set(kebabCase(key), { key, spec });
  const given = new Map<string, string[]>();
  const booleans = new Map<string, boolean>();
  const positionals: string[] = [];
  let rest: string[] = [];
  let help = false;

  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token === '--') {
      rest = tokens.slice(i + 1);
      break;
    }
    if (token === '-h' || token === '--help') {
      help = true;
      continue;
    }
    if (token.startsWith('--')) {
      const eq = token.indexOf('=');
      const flag = eq === -1 ? token.slice(2) : token.slice(2, eq);
      const inline = eq === -1 ? undefined : token.slice(eq + 1);
      const known = byFlag.get(flag);
      const negated = !known && flag.startsWith('no-') ? byFlag.get(flag.slice(3)) : undefined;
      if (negated && negated.spec.type === 'boolean') {
        if (inline !== undefined) throw usage(name, `--${flag} takes no value`, flag.slice(3));
        booleans.set(negated.key, false);
        continue;
      }
      if (!known) {
        const candidates = [...byFlag.entries()].flatMap(([f, { spec }]) =>
          spec.type === 'boolean' ? [f, `no-${f}`] : [f],
        );
        const secret = looksLikeSecret(flag);
        const near = secret ? undefined : didYouMean(flag, candidates);
        throw new CliError(
          'INVALID_ARGUMENT',
          secret
            ? `unknown flag for "${name}": a flag name that looks like a credential (not shown)`
            : `unknown flag --${flag} for "${name}"${near ? `; did you mean --${near}?` : ''}`,
          {
            hint: `Run "better-compute help ${name}" for its flags.`,
            details: secret ? {} : { field: flag, ...(near ? { suggestion: `--${near}` } : {}) },
          },
        );
      }
      if (known.spec.type === 'boolean') {
        booleans.set(
          known.key,
          inline === undefined ? true : (convert(name, flag, known.spec, inline) as boolean),
        );
        continue;
      }
      let value = inline;
      if (value === undefined) {
        if (i + 1 >= tokens.length)
          throw usage(name, `--${flag} needs a value (${describeValue(known.spec)})`, flag);
        value = tokens[++i]!;
      }
      const list = given.get(known.key) ?? [];
      list.push(value);
      given.set(known.key, list);
      continue;
    }
    if (token.startsWith('-') && token.length > 1 && !/^-\d/.test(token)) {
      const secret = looksLikeSecret(token);
      throw new CliError(
        'INVALID_ARGUMENT',
        secret
          ? `unknown flag for "${name}": a word starting with - that looks like a credential (not shown)`
          : `unknown flag ${token} for "${name}"`,
        {
          hint: `Flags are spelled --name; run "better-compute help ${name}" for them.`,
          details: secret ? {} : { field: token },
        },
      );
    }
    positionals.push(token);
  }

  // A flag that is also the command's argument (nameFlag) takes the first one, when the command
  // declares no positionals of its own: the value is one, whichever way it was given.
  const argumentFlag = command.positionals?.length
    ? undefined
    : Object.entries(specs).find(([, spec]) => spec.type === 'string' && spec.argument === true);
  if (argumentFlag && positionals.length > 0) {
    const [key] = argumentFlag;
    const flag = kebabCase(key);
    const argument = positionals.shift()!;
    const flagged = given.get(key);
    if (flagged?.some((value) => value !== argument))
      throw usage(
        name,
        `${flag.toUpperCase()} is given twice, as the argument ${shownWord(argument)} and as --${flag} ${shownWord(flagged.find((value) => value !== argument)!)}; give it once`,
        flag,
      );
    given.set(key, flagged ?? [argument]);
  }

  const flags: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(specs)) {
    const flag = kebabCase(key);
    if (spec.type === 'boolean') {
      flags[key] = booleans.get(key) ?? spec.default ?? false;
      continue;
    }
    const repeated = (spec.type === 'string' || spec.type === 'id') && spec.repeated === true;
    const values = given.get(key) ?? (spec.default !== undefined ? [String(spec.default)] : undefined);
    if (!values) {
      if (spec.required && !help)
        throw usage(
          name,
          spec === argumentFlag?.[1]
            ? `missing ${flag.toUpperCase()}: give it as --${flag} ${describeValue(spec)} or as the argument`
            : `missing --${flag} (${describeValue(spec)})`,
          flag,
        );
      flags[key] = repeated ? [] : undefined;
      continue;
    }
    if (repeated) {
      // Repeated flags take several occurrences, comma-separated lists, or both.
      flags[key] = values
        .flatMap((value) => value.split(','))
        .map((v) => v.trim())
        .filter((v) => v !== '')
        .map((v) => convert(name, flag, spec, v));
    } else {
      if (values.length > 1)
        throw usage(name, `--${flag} is given ${values.length} times; give it once`, flag);
      flags[key] = convert(name, flag, spec, values[0]!);
    }
  }

  const args: Record<string, string | string[] | undefined> = {};
  const specsOfArgs = command.positionals ?? [];
  let index = 0;
  for (const positional of specsOfArgs) {
    if (positional.variadic) {
      args[positional.name] = positionals.slice(index);
      index = positionals.length;
    } else {
      args[positional.name] = positionals[index];
      if (positionals[index] !== undefined) index++;
    }
    const values = ([] as (string | undefined)[]).concat(args[positional.name]);
    if (positional.required && (values.length === 0 || values[0] === undefined) && !help) {
      throw usage(
        name,
        `missing ${positional.name.toUpperCase()}: ${positional.description}`,
        positional.name,
      );
    }
    if (positional.kind) {
      const kind = positional.kind;
      for (const value of values) {
        if (value !== undefined && !isId(kind, value)) {
          throw usage(
            name,
            `${idShapeMessage(positional.name, kind)} (got ${shownWord(value)})`,
            positional.name,
          );
        }
      }
    }
  }
  if (index < positionals.length && !help) {
    // Never the argument itself: it may be a secret pasted by mistake (a token after `auth login`).
    const takes = specsOfArgs.length
      ? `it takes ${specsOfArgs.map((p) => (p.variadic ? `${p.name.toUpperCase()}…` : p.name.toUpperCase())).join(' ')}`
      : argumentFlag
        ? `it takes one argument, ${kebabCase(argumentFlag[0]).toUpperCase()}`
        : 'it takes no arguments';
    // Counted as typed: the argument a name flag took was the first.
    const position = index + 1 + (argumentFlag ? 1 : 0);
    throw new CliError(
      'INVALID_ARGUMENT',
      `unexpected argument ${position} for "${name}": ${takes} (the argument is not shown)`,
      {
        hint: command.argumentsHint ?? `Run "better-compute help ${name}" for its flags and examples.`,
        details: { field: 'arguments', position },
      },
    );
  }
  return { flags, args, rest, help };
}
