/**
 * The command after `--` of `sandbox exec` and `ssh-cert --connect`, as one remote command line.
 * OpenSSH sends the remote side a single string, which sshd hands to the account's shell as
 * `$SHELL -c STRING`; plain `ssh host sh -c 'exit 7'` joins its arguments with spaces and the guest
 * runs `sh -c exit 7`. Agents and CI jobs pass argument vectors, as they would to `kubectl exec` or
 * `docker exec`, so each word is single-quoted for the remote POSIX shell and the guest runs exactly
 * the vector given: spaces, quotes, `$`, newlines and leading dashes stay inside their word.
 */
import { CliError } from './errors.js';

// A lone UTF-16 surrogate has no UTF-8 form: spawn would send U+FFFD in its place, another word.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** One word for a POSIX shell: inside single quotes nothing is special but `'`, written `'\''`. */
export function quoteShellWord(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * The remote command line that runs `argv` word for word, or undefined for none (ssh then opens a
 * login shell). An argument holding a NUL, or a lone surrogate, cannot reach the remote program
 * intact (a C string ends at NUL; UTF-8 has no surrogates), so it is a usage error, naming its
 * position and never its text, which may be a secret.
 */
export function remoteCommandLine(argv: readonly string[]): string | undefined {
  if (argv.length === 0) return undefined;
  argv.forEach((word, index) => {
    const broken = word.includes('\0')
      ? 'a NUL byte'
      : LONE_SURROGATE.test(word)
        ? 'a lone UTF-16 surrogate'
        : '';
    if (broken)
      throw new CliError(
        'INVALID_ARGUMENT',
        `argument ${index + 1} after -- holds ${broken}, which cannot reach the remote command intact`,
        {
          hint: 'Remove it from the command after --; pass binary data through a file or standard input instead.',
          details: { field: 'command', index: index + 1 },
        },
      );
  });
  return argv.map(quoteShellWord).join(' ');
}
