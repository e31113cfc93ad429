/**
 * The one error type that crosses the server, the client and the CLI.
 * Codes are UPPER_SNAKE; `httpStatusOf` is the single table from code to HTTP status.
 */

/** Every code the API and the CLI may answer with, and the HTTP status each travels as. */
export const ERROR_STATUS = {
  INVALID_ARGUMENT: 400,
  INVALID_COMMAND: 400,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  CONFLICT: 409,
  INVALID_STATE: 409,
  ACCESS_DENIED: 403,
  UNAUTHENTICATED: 401,
  CONFIRMATION_REQUIRED: 403,
  RATE_LIMITED: 429,
  UNSUPPORTED: 501,
  INVALID_CONFIG: 500,
  TENANT_SUSPENDED: 403,
  MISSING_ENV: 400,
  CONFIG_NOT_FOUND: 400,
  PAYLOAD_TOO_LARGE: 413,
  DOCTOR_FINDINGS: 500,
  INVALID_RESPONSE: 502,
  QUOTA_EXCEEDED: 409,
  // The destructive-batch quorum's refusals (the guide's code list): what was asked to be signed or
  // approved is not what was reviewed. 409 so a server that answers one is never a 5xx.
  SCOPE_MISMATCH: 409,
  SCOPE_CHANGED: 409,
  SCOPE_UNEXPECTED: 409,
  UNBOUND_SCOPE: 409,
  // Release manifests' refusals (docs/releases.md): too few pinned keys signed it, the artifact's
  // bytes are not the ones it names, the move from the running version is not one it allows.
  RELEASE_UNVERIFIED: 409,
  DIGEST_MISMATCH: 409,
  DOWNGRADE_REFUSED: 409,
  // Fleet configuration's outcomes (the guide's code list): the fleet changed since the plan
  // (CONFIG_DRIFT), a plan holds a change that cannot be made (PLAN_BLOCKED), and the live fleet
  // differs from the document or the last apply (FLEET_DRIFTED, for CI). 409: never a 5xx.
  CONFIG_DRIFT: 409,
  PLAN_BLOCKED: 409,
  FLEET_DRIFTED: 409,
  UNAVAILABLE: 503,
  INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_STATUS, value);
}

/** The HTTP status an error code travels as; unknown codes are 500. */
export function httpStatusOf(code: string): number {
  return isErrorCode(code) ? ERROR_STATUS[code] : 500;
}

export interface ComputeErrorOptions {
  details?: Record<string, unknown>;
  /** A line telling the user what to run or set next; the CLI prints it under the message. */
  hint?: string;
  cause?: unknown;
  /**
   * The message names the deployment's own parts (a database's address): the operator running a
   * command sees it, an API answer keeps only the code (see toComputeError).
   */
  operatorOnly?: boolean;
}

/** A ComputeError as JSON: what the envelope's `error` carries besides the request id. */
export interface ComputeErrorJSON {
  code: string;
  message: string;
  details?: Record<string, unknown>;
  hint?: string;
}

// A brand shared by every copy of this class: the CLI's bundle carries its own copy of core, and
// an error thrown by a package that imports core separately must still be a ComputeError to it.
const BRAND = Symbol.for('better-compute.ComputeError');

/** A failure with a stable code, a message for people and structured details for programs. */
export class ComputeError extends Error {
  override readonly name = 'ComputeError';
  readonly [BRAND] = true;

  /** `instanceof ComputeError` holds for any copy's errors; subclasses keep the prototype check. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== ComputeError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true;
  }

  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  readonly hint: string | undefined;
  readonly operatorOnly: boolean;

  constructor(code: ErrorCode | (string & {}), message: string, options: ComputeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details;
    this.hint = options.hint;
    this.operatorOnly = options.operatorOnly === true;
  }

  get status(): number {
    return httpStatusOf(this.code);
  }

  /**
   * The `error` member of the envelope: never the cause, never a stack. The hint travels with it,
   * so a client (the CLI over --url) can print the server's advice rather than a generic one.
   */
  toJSON(): ComputeErrorJSON {
    const json: ComputeErrorJSON = { code: this.code, message: this.message };
    if (this.details !== undefined) json.details = this.details;
    if (this.hint !== undefined) json.hint = this.hint;
    return json;
  }
}

export function isComputeError(value: unknown): value is ComputeError {
  return value instanceof ComputeError;
}
