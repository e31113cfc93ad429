/** The client's failure: a ComputeError that also says which call failed and how it travelled. */
import { ComputeError, type ComputeErrorOptions } from '@better-compute/core';

export interface ComputeClientErrorOptions extends ComputeErrorOptions {
  /** The HTTP status the server answered with (0 when no answer arrived). */
  status?: number;
  /** The request id of the call, as the server reported it (or as the client sent it). */
  requestId?: string;
  /** `group.method` of the call. */
  method?: string;
}

/**
 * A failed call. `code` is the server's own code (`ACCESS_DENIED`, `RATE_LIMITED`, …), or
 * `UNAVAILABLE` when the server could not be reached and `INVALID_RESPONSE` when it answered
 * without the API's envelope.
 */
export class ComputeClientError extends ComputeError {
  readonly requestId: string | undefined;
  readonly method: string | undefined;
  readonly #status: number | undefined;

  constructor(code: string, message: string, options: ComputeClientErrorOptions = {}) {
    super(code, message, options);
    this.requestId = options.requestId;
    this.method = options.method;
    this.#status = options.status;
  }

  /** The HTTP status the server answered with, else the status the code travels as. */
  override get status(): number {
    return this.#status ?? super.status;
  }
}

/** The hint of INVALID_RESPONSE: an answer that is not the API's (or not the shape a method answers). */
export const INVALID_RESPONSE_HINT =
  'Check that the URL points at a better-compute API (an origin, or the full endpoint such as https://host/api/compute).';

export function isComputeClientError(value: unknown): value is ComputeClientError {
  return value instanceof ComputeClientError;
}
