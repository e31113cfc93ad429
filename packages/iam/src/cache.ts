/**
 * The bridge's short cache and how IAM changes reach it (docs/decisions/iam-cache-invalidation.md).
 *
 * A warm authenticate or authorize reads only these maps. Every IAM change is applied here
 * synchronously right after its transaction commits, and is also sent with `pg_notify` inside that
 * transaction, so other processes on the same PostgreSQL drop the same entries when it commits.
 * A fill that began before an invalidation is discarded (the generation moved), so a slow read can
 * never put back what a revocation removed. Entries also age out, quickly whenever the change feed
 * is not known to be live.
 */
import type { CredentialKind, Identity, TenantState } from '@better-compute/core';
import type { PrincipalSnapshot } from './policy.js';

export type IamChange =
  | { type: 'credential'; id: string }
  | { type: 'principal'; id: string }
  | { type: 'tenant'; id: string }
  | { type: 'policy' }
  | { type: 'all' };

export const CHANGE_CHANNEL = 'better_iam_changes';

export interface TokenEntry {
  identity: Identity;
  principalId: string;
  tenantId: string;
  actingFor: string | null;
  credentialId: string;
  credentialKind: CredentialKind;
  /** Milliseconds since the epoch, or null when the credential does not expire. */
  expiresAtMs: number | null;
  storedAt: number;
}

interface Timed<T> {
  value: T;
  storedAt: number;
}

export class AuthCache {
  readonly #tokens = new Map<string, TokenEntry>();
  readonly #snapshots = new Map<string, Timed<PrincipalSnapshot>>();
  readonly #tenants = new Map<string, Timed<TenantState | null>>();
  #generation = 0;
  readonly #now: () => number;
  readonly #ttlMs: () => number;

  constructor(now: () => number, ttlMs: () => number) {
    this.#now = now;
    this.#ttlMs = ttlMs;
  }

  /** Read before a database fill; pass it back to the setter, which drops the fill if it moved. */
  get generation(): number {
    return this.#generation;
  }

  #fresh(storedAt: number): boolean {
    return this.#now() - storedAt < this.#ttlMs();
  }

  token(hash: string): TokenEntry | undefined {
    const entry = this.#tokens.get(hash);
    if (entry === undefined) return undefined;
    if (!this.#fresh(entry.storedAt)) {
      this.#tokens.delete(hash);
      return undefined;
    }
    return entry;
  }

  setToken(hash: string, entry: TokenEntry, generation: number): void {
    if (generation !== this.#generation) return;
    if (this.#tokens.size >= 100_000) this.#tokens.clear();
    this.#tokens.set(hash, entry);
  }

  dropToken(hash: string): void {
    this.#tokens.delete(hash);
  }

  snapshot(principalId: string): PrincipalSnapshot | undefined {
    const entry = this.#snapshots.get(principalId);
    if (entry === undefined || !this.#fresh(entry.storedAt)) return undefined;
    return entry.value;
  }

  setSnapshot(snapshot: PrincipalSnapshot, generation: number): void {
    if (generation !== this.#generation) return;
    if (this.#snapshots.size >= 50_000) this.#snapshots.clear();
    this.#snapshots.set(snapshot.id, { value: snapshot, storedAt: this.#now() });
  }

  /** undefined when not cached; null when cached as "no such tenant". */
  tenantState(tenantId: string): TenantState | null | undefined {
    const entry = this.#tenants.get(tenantId);
    if (entry === undefined || !this.#fresh(entry.storedAt)) return undefined;
    return entry.value;
  }

  setTenantState(tenantId: string, state: TenantState | null, generation: number): void {
    if (generation !== this.#generation) return;
    if (this.#tenants.size >= 50_000) this.#tenants.clear();
    this.#tenants.set(tenantId, { value: state, storedAt: this.#now() });
  }

  /** Drops whatever a change may have made stale. Synchronous: the next call sees it. */
  apply(change: IamChange): void {
    this.#generation++;
    switch (change.type) {
      case 'credential':
        for (const [hash, entry] of this.#tokens)
          if (entry.credentialId === change.id) this.#tokens.delete(hash);
        return;
      case 'principal':
        for (const [hash, entry] of this.#tokens) {
          if (entry.principalId === change.id || entry.actingFor === change.id) this.#tokens.delete(hash);
        }
        for (const [id, entry] of this.#snapshots) {
          if (id === change.id || entry.value.actingFor?.id === change.id) this.#snapshots.delete(id);
        }
        return;
      case 'tenant':
        this.#tenants.delete(change.id);
        for (const [hash, entry] of this.#tokens) if (entry.tenantId === change.id) this.#tokens.delete(hash);
        return;
      case 'policy':
        this.#snapshots.clear();
        return;
      case 'all':
        this.#tokens.clear();
        this.#snapshots.clear();
        this.#tenants.clear();
        return;
    }
  }
}

function parseChange(value: unknown): IamChange | null {
  if (typeof value !== 'object' || value === null) return null;
  const change = value as { type?: unknown; id?: unknown };
  if (change.type === 'policy' || change.type === 'all') return { type: change.type };
  if (
    (change.type === 'credential' || change.type === 'principal' || change.type === 'tenant') &&
    typeof change.id === 'string'
  ) {
    return { type: change.type, id: change.id };
  }
  return null;
}

export interface ChangeMessage {
  origin: string;
  nonce: string;
  changes: IamChange[];
}

export function formatChangePayload(message: ChangeMessage): string {
  return JSON.stringify({ o: message.origin, n: message.nonce, c: message.changes });
}

/** Parses a notification payload; null (treated as "drop everything") when it is malformed. */
export function parseChangePayload(payload: string | undefined): ChangeMessage | null {
  if (!payload) return null;
  try {
    const value = JSON.parse(payload) as { o?: unknown; n?: unknown; c?: unknown };
    if (typeof value.o !== 'string' || typeof value.n !== 'string' || !Array.isArray(value.c)) return null;
    const changes = value.c.map(parseChange);
    if (changes.some((change) => change === null)) return null;
    return { origin: value.o, nonce: value.n, changes: changes as IamChange[] };
  } catch {
    return null;
  }
}
