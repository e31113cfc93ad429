/**
 * Failures, printed one way: `CODE: message`, then a hint line saying what to run or set next.
 * `exitStatusOf` is the one place a code becomes an exit status: 2 for usage mistakes, the remote
 * program's own status for tunnels, 1 for everything else.
 */
import {
  ComputeError,
  type ComputeErrorOptions,
  type ErrorCode,
  hideSecrets,
  isErrorCode,
  safeCell,
  safeText,
} from '@better-compute/core';

/** A usage mistake or a local refusal of the CLI; it keeps the ComputeError shape and code. */
export class CliError extends ComputeError {}

/** A remote program (console, exec, sandbox exec, ssh-cert --connect) ended with a status. */
export class RemoteExitError extends ComputeError {
  /** 1 to 255; 255 when the tunnel broke or the program ended by a signal. */
  readonly exitStatus: number;

  constructor(
    exitStatus: number,
    message = `the remote program exited with status ${exitStatus}`,
    options: ComputeErrorOptions = {},
  ) {
    super('REMOTE_EXIT', message, options);
    this.exitStatus = Number.isInteger(exitStatus) && exitStatus >= 1 && exitStatus <= 255 ? exitStatus : 255;
  }
}

/** Codes that mean the command line itself was wrong. */
export const USAGE_CODES: ReadonlySet<string> = new Set(['INVALID_ARGUMENT', 'INVALID_COMMAND']);

/** The exit status of a failure. */
export function exitStatusOf(error: unknown): number {
  if (error instanceof RemoteExitError) return error.exitStatus;
  return error instanceof ComputeError && USAGE_CODES.has(error.code) ? 2 : 1;
}

/**
 * Any thrown value as a ComputeError. Unlike the server, the CLI keeps the message of an unknown
 * throw (a file it cannot write, say): it is shown only to the person who ran the command.
 */
export function toFailure(error: unknown): ComputeError {
  if (error instanceof ComputeError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new ComputeError('INTERNAL', message || 'internal error', { cause: error });
}

/**
 * The hint of each code when the error brings none of its own, phrased for every place the code
 * can come from: the server's hint (carried in the envelope) and the CLI's own refusals, which
 * name their flag or file, take precedence. Typed by ERROR_STATUS, so a new code needs one.
 */
const DEFAULT_HINTS: Readonly<Record<ErrorCode, string>> = {
  INVALID_ARGUMENT: 'Run "better-compute help COMMAND" for the command\'s flags and examples.',
  INVALID_COMMAND: 'Run "better-compute help" for every command.',
  MISSING_ENV: 'Set BETTER_COMPUTE_TOKEN, or run "better-compute auth login" to save a credential.',
  CONFIG_NOT_FOUND:
    'Run "better-compute init", pass --config, set BETTER_COMPUTE_DATABASE_URL, or pass --url to call a running server.',
  INVALID_CONFIG: 'Fix the configuration file, then run the command again.',
  UNAUTHENTICATED:
    'The credential was refused: run "better-compute auth login" again, or set another BETTER_COMPUTE_TOKEN.',
  ACCESS_DENIED:
    "Check --tenant (BETTER_COMPUTE_TENANT): it must be the token's own tenant, or root for operators; then the roles bound to you in Better IAM.",
  TENANT_SUSPENDED:
    'The tenant is suspended or deleted in IAM; an administrator of a parent tenant can reactivate it.',
  CONFIRMATION_REQUIRED:
    'A person must approve this call; once approved, repeat the command with the same --key.',
  RATE_LIMITED: 'Wait a moment, then run the command again.',
  UNAVAILABLE: 'Check --url (BETTER_COMPUTE_URL) and that the server is running.',
  INVALID_RESPONSE: 'Check that --url points at a better-compute API.',
  NOT_FOUND: 'Check the id or name; list commands show what exists.',
  ALREADY_EXISTS: 'Choose another name, or list what exists; nothing was changed.',
  CONFLICT:
    'Read it again with its get command, then retry; a --key used before needs its first request exactly, or a new key.',
  INVALID_STATE: "Check the resource's state with its get command; the message says what it must be.",
  QUOTA_EXCEEDED:
    'Release something you hold (reservations list shows it), or ask the pool\'s owner for a larger quota ("quotas get --pool POOL" shows yours).',
  SCOPE_MISMATCH:
    'Do not sign it: the leaves do not give the root and size asked for. Fetch the scope again with "better-compute batch show --scope-out", and report the batch if it still differs.',
  SCOPE_CHANGED:
    'The batch changed since you reviewed it: review it again, then approve with its new --root.',
  SCOPE_UNEXPECTED:
    'The batch is not what your --expect file lists; the message names the differences. Nothing was signed.',
  UNBOUND_SCOPE:
    'Some leaves admit any payload of their kind; pass --allow-unbound only if you mean to approve every such command.',
  RELEASE_UNVERIFIED:
    'Do not install it: fewer pinned release keys signed it than the threshold needs. "better-compute release verify --pin …" shows which keys signed.',
  DIGEST_MISMATCH: 'Do not install it: the artifact is not the one the release names. Fetch it again.',
  DOWNGRADE_REFUSED:
    'The release does not replace the version running: check its minimumVersion, or ask for a rollback explicitly.',
  CONFIG_DRIFT:
    'The fleet changed since the plan: run "better-compute fleet plan FILE" again, review it, and apply with its new --plan-hash.',
  PLAN_BLOCKED:
    'A change in the plan cannot be made in place (the BLOCKED lines say which and why): change the document back, or make the change another way.',
  FLEET_DRIFTED:
    'The live fleet differs from the document or from the last apply: "better-compute fleet plan FILE" shows how; apply the document, or export the fleet again.',
  PAYLOAD_TOO_LARGE: 'Send less in one call: the API takes at most 64 KiB a request.',
  DOCTOR_FINDINGS: 'Fix the findings above, then run "better-compute doctor --strict" again.',
  UNSUPPORTED: 'See "better-compute help COMMAND" for what the command needs.',
  INTERNAL: 'Run again with BETTER_COMPUTE_DEBUG=1 to see the stack trace.',
};

// Codes outside ERROR_STATUS that the CLI itself answers with.
const CLI_HINTS: Readonly<Record<string, string>> = {
  REMOTE_EXIT: "The remote program's own output above says why it failed.",
};

/**
 * The hint printed under a failure: the error's own (the server's, carried in the envelope, or the
 * CLI's), else the code's, naming the failed command where it says COMMAND. An error's own hint
 * is printed as it came.
 */
export function hintFor(error: ComputeError, commandName?: string, situation: FailureSituation = {}): string {
  if (error.hint !== undefined) return error.hint;
  // Under BETTER_COMPUTE_DEBUG the stack is already printed below: say what to do with it.
  if (error.code === 'INTERNAL' && situation.debug)
    return 'The stack trace below shows where it failed; include it (and the request id, if one is printed) when you report the problem.';
  const hint =
    (isErrorCode(error.code) ? DEFAULT_HINTS[error.code] : CLI_HINTS[error.code]) ??
    'The message says what failed; run "better-compute help COMMAND" for the command\'s flags and examples.';
  return commandName ? hint.replace('COMMAND', commandName) : hint;
}

/** What the hint may depend on besides the error. */
export interface FailureSituation {
  /** BETTER_COMPUTE_DEBUG is on, so the stack is printed under the hint. */
  debug?: boolean;
}

/** One line for the terminal: line breaks and other controls become spaces. */
function oneLine(text: string): string {
  return safeCell(text.replace(/[ \t]*(\r\n|[\r\n\u2028\u2029])+[ \t]*/g, ' '));
}

// Failures already printed (by compute's commands inside another CLI), with their exit status.
const reported = new WeakMap<object, number>();

/** Marks a failure as printed, so a `main` it reaches does not print it twice. */
export function markReported<E>(error: E, exitStatus: number): E {
  if (typeof error === 'object' && error !== null) reported.set(error, exitStatus);
  return error;
}

/**
 * Prints a failure: `CODE: message`, the hint, the retry line of a create worth retrying with its
 * --key, the request id of a server error, and the stack under BETTER_COMPUTE_DEBUG=1.
 */
export function printFailure(
  error: unknown,
  io: { err?(message: string): void; out(message: string): void; env: Record<string, string | undefined> },
): void {
  if (typeof error === 'object' && error !== null && reported.has(error)) return;
  const write = io.err ?? io.out;
  const failure = toFailure(error);
  const noted = commandOf(failure);
  const debugValue = io.env.BETTER_COMPUTE_DEBUG;
  const debug = !!debugValue && debugValue !== '0' && debugValue !== 'false';
  // The code, the message and the hint are one line each, whatever the server or a file put in them.
  // Nor a credential quoted in them (hideSecrets): the server hides them too, this CLI's own messages here.
  write(`${oneLine(failure.code)}: ${oneLine(hideSecrets(failure.message))}`);
  write(`hint: ${oneLine(hideSecrets(hintFor(failure, noted, { debug })))}`);
  // Looked up on the thrown value: toFailure makes a new error of anything that is not a ComputeError.
  const retryKey = typeof error === 'object' && error !== null ? retryKeys.get(error) : undefined;
  if (retryKey !== undefined) write(oneLine(`repeat with --key ${retryKey} to retry without creating twice`));
  const requestId = (failure as { requestId?: unknown }).requestId;
  if (typeof requestId === 'string') write(`request id: ${oneLine(requestId)}`);
  if (debug) {
    write(safeText(failure.stack ?? String(failure)));
    let cause: unknown = failure.cause;
    while (cause instanceof Error) {
      write(`caused by: ${safeText(cause.stack ?? cause.message)}`);
      cause = cause.cause;
    }
  }
}

// The idempotency key of a create that failed where a retry with that key can help (no answer,
// UNAVAILABLE, …): the retry line is printed under the hint, after the failure it answers, and
// never under a refusal that the same key would only repeat.
const retryKeys = new WeakMap<object, string>();

/** Notes that `error` is worth a retry with the idempotency key `key`; printFailure says how. */
export function noteRetryKey(error: unknown, key: string): void {
  if (typeof error === 'object' && error !== null) retryKeys.set(error, key);
}

// The command a failure happened in, so the hint can name `help COMMAND` exactly.
const failedCommands = new WeakMap<object, string>();

export function noteCommand(error: unknown, commandName: string): void {
  if (typeof error === 'object' && error !== null && !failedCommands.has(error))
    failedCommands.set(error, commandName);
}

function commandOf(error: object): string | undefined {
  return failedCommands.get(error);
}
