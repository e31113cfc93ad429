/**
 * Advisory permission checks for buttons. Checks asked for in the same tick are batched, up to 50
 * per call of `authorize` (IAM's `can` takes at most 50), and the same check is asked once while it
 * is pending or known. A batch that fails rejects its checks and leaves them unanswered, never
 * "denied": the button stays disabled rather than lying, and the next ask tries again. The server
 * still decides every real call, so a stale "allowed" only ever ends in a clean ACCESS_DENIED.
 */
import { Subscribable } from './subscribable.js';
import type { ActionDescription, ActionResource } from './actions.js';

export interface PermissionCheck {
  action: string;
  resource: ActionResource;
}

/** IAM's answer to a check: a boolean, or a decision with `allowed`. */
export type PermissionAnswer = boolean | { allowed: boolean };

export interface PermissionsOptions {
  /** Decides up to 50 checks for the signed-in caller, in order (IAM's `can` behind a server endpoint). */
  authorize(checks: PermissionCheck[]): Promise<PermissionAnswer[]>;
  /** Checks per call; at most 50. */
  batchSize?: number | undefined;
  /** How long an answer is kept; default 60 s. */
  ttlMs?: number | undefined;
}

export interface Permissions {
  /** Whether the caller may do it: true or false, or a rejection when IAM could not answer. */
  can(action: ActionDescription | PermissionCheck): Promise<boolean>;
  /** The answer known now: true, false, or undefined while unknown. */
  peek(action: ActionDescription | PermissionCheck): boolean | undefined;
  /** Forgets every answer (after a change of roles or bindings). */
  clear(): void;
  /** Called after any answer arrives or is forgotten (for usePermission). */
  subscribe(listener: () => void): () => void;
  /** A counter that moves on every change, the snapshot `subscribe` goes with. */
  version(): number;
}

export const MAX_PERMISSION_BATCH = 50;

interface Entry {
  promise: Promise<boolean>;
  answer?: boolean;
  at: number;
}

interface Pending {
  key: string;
  check: PermissionCheck;
  resolve(allowed: boolean): void;
  reject(error: unknown): void;
}

/** The key a check is cached under. */
export function checkKey(check: PermissionCheck): string {
  return JSON.stringify([check.action, check.resource.type, check.resource.id ?? null]);
}

class PermissionCache extends Subscribable<number> implements Permissions {
  readonly #options: PermissionsOptions;
  readonly #batchSize: number;
  readonly #ttlMs: number;
  #entries = new Map<string, Entry>();
  #queue: Pending[] = [];
  #scheduled = false;

  constructor(options: PermissionsOptions) {
    super(0);
    this.#options = options;
    this.#batchSize = Math.max(1, Math.min(MAX_PERMISSION_BATCH, options.batchSize ?? MAX_PERMISSION_BATCH));
    this.#ttlMs = options.ttlMs ?? 60_000;
  }

  version = (): number => this.get();

  peek(action: ActionDescription | PermissionCheck): boolean | undefined {
    if (action.action === null) return true;
    const entry = this.#entries.get(checkKey(action as PermissionCheck));
    if (!entry || Date.now() - entry.at > this.#ttlMs) return undefined;
    return entry.answer;
  }

  can(action: ActionDescription | PermissionCheck): Promise<boolean> {
    if (action.action === null) return Promise.resolve(true);
    const check: PermissionCheck = { action: action.action, resource: action.resource };
    const key = checkKey(check);
    const entry = this.#entries.get(key);
    if (entry && (entry.answer === undefined || Date.now() - entry.at <= this.#ttlMs)) return entry.promise;
    const promise = new Promise<boolean>((resolve, reject) => {
      this.#queue.push({ key, check, resolve, reject });
    });
    const fresh: Entry = { promise, at: Date.now() };
    this.#entries.set(key, fresh);
    promise.then(
      (allowed) => {
        if (this.#entries.get(key) !== fresh) return;
        fresh.answer = allowed;
        fresh.at = Date.now();
        this.set(this.get() + 1);
      },
      () => {
        // Unanswered: forgotten, so the next ask tries again.
        if (this.#entries.get(key) === fresh) this.#entries.delete(key);
        this.set(this.get() + 1);
      },
    );
    this.#schedule();
    return promise;
  }

  clear(): void {
    this.#entries = new Map();
    this.set(this.get() + 1);
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // Every check asked in this tick (a table's rows rendering) goes in the same batches.
    setTimeout(() => {
      this.#scheduled = false;
      const queue = this.#queue.splice(0);
      for (let start = 0; start < queue.length; start += this.#batchSize)
        void this.#send(queue.slice(start, start + this.#batchSize));
    }, 0);
  }

  async #send(batch: Pending[]): Promise<void> {
    try {
      const answers = await this.#options.authorize(batch.map((pending) => pending.check));
      if (!Array.isArray(answers) || answers.length !== batch.length)
        throw new Error(
          `authorize answered ${Array.isArray(answers) ? answers.length : 'no'} decisions for ${batch.length} checks`,
        );
      batch.forEach((pending, index) => {
        const answer = answers[index];
        pending.resolve(typeof answer === 'boolean' ? answer : answer?.allowed === true);
      });
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    }
  }
}

/**
 * Permission checks over `authorize`.
 *
 * @example
 * const permissions = createPermissions({
 *   authorize: async (checks) => (await iam.can({ checks })).results,
 * });
 * const allowed = await permissions.can(describeAction('reservations', 'release', id));
 */
export function createPermissions(options: PermissionsOptions): Permissions {
  return new PermissionCache(options);
}
