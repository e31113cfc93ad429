/** "Did you mean": the closest known word, when it is close enough to be a typo. */
import { CliError } from './errors.js';
import { looksLikeSecret } from './shown.js';

function distance(a: string, b: string): number {
  const previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = previous[0]!;
    previous[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = previous[j]!;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      previous[j] = Math.min(above + 1, previous[j - 1]! + 1, diagonal + cost);
      // A swap of two neighbours (`hlep`) counts as one typo.
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        previous[j] = Math.min(previous[j]!, diagonal);
      diagonal = above;
    }
  }
  return previous[b.length]!;
}

/** The candidate closest to `input`, or undefined when none is within a typo's reach. */
export function didYouMean(input: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  const limit = Math.max(1, Math.min(3, Math.floor(input.length / 3)));
  for (const candidate of candidates) {
    // `--STRICT` for `--strict`: a difference of case alone is the nearest typo there is.
    const d =
      candidate !== input && candidate.toLowerCase() === input.toLowerCase()
        ? 0.25
        : candidate.startsWith(input) && input.length >= 3
          ? 0.5
          : distance(input, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return bestDistance <= limit ? best : undefined;
}

/** How many leading words name a group of commands (`events` of `events list`), longest first. */
function groupLength(words: readonly string[], names: readonly string[]): number {
  for (let n = words.length - 1; n > 0; n--) {
    const prefix = `${words.slice(0, n).join(' ')} `;
    if (names.some((name) => name.startsWith(prefix))) return n;
  }
  return 0;
}

/**
 * INVALID_COMMAND for words that name no command, with the nearest command when there is one.
 * Words under a known group (`events foo`) are reported whole: the group is right, so the mistake
 * is the word after it, and a suggestion must complete the group rather than replace that word.
 */
export function unknownCommandError(words: readonly string[], names: readonly string[]): CliError {
  // A word that looks like a credential (a token pasted where a command was meant) is never echoed.
  const secretAt = words.findIndex((word) => looksLikeSecret(word));
  if (secretAt !== -1) {
    const before = words.slice(0, secretAt).join(' ');
    return new CliError(
      'INVALID_COMMAND',
      `unknown command: word ${secretAt + 1}${before ? ` (after "${before}")` : ''} looks like a credential, not a command (not shown)`,
      {
        hint: 'Run "better-compute help" for every command; tokens are read from standard input or BETTER_COMPUTE_TOKEN, never from an argument.',
      },
    );
  }
  // `migrate extra`: the leading words are a command; the words after them are not part of it.
  const exact = [...words.keys()]
    .map((i) => words.slice(0, words.length - i).join(' '))
    .find((name, i) => i > 0 && names.includes(name));
  if (exact !== undefined) {
    const extra = words.slice(exact.split(' ').length).join(' ');
    return new CliError(
      'INVALID_COMMAND',
      `unknown command "${words.join(' ')}": "${exact}" is a command, and "${extra}" is not part of it`,
      {
        hint: `Run "better-compute help ${exact}" for what it takes.`,
        details: { command: words.join(' '), suggestion: exact },
      },
    );
  }
  const group = groupLength(words, names);
  let typed = words[0] ?? '';
  let near: string | undefined;
  // Compare as many of the typed words as could be command words, longest first, and never fewer
  // than the group and the word after it: `events` alone would "match" every events command.
  for (let n = Math.min(words.length, Math.max(3, group + 1)); n > group && !near; n--) {
    typed = words.slice(0, n).join(' ');
    near = didYouMean(typed, names);
  }
  if (!near) typed = words.slice(0, group + 1).join(' ');
  const groupWords = words.slice(0, group).join(' ');
  return new CliError(
    'INVALID_COMMAND',
    `unknown command "${typed}"${near ? `; did you mean "${near}"?` : ''}`,
    {
      hint: group
        ? `Run "better-compute ${groupWords}" for the commands under ${groupWords}, or "better-compute help" for every command.`
        : 'Run "better-compute help" for every command.',
      details: { command: typed, ...(near ? { suggestion: near } : {}) },
    },
  );
}
