/** A deployment's webhook settings with their defaults filled in, and the sealer of secrets. */
import { createSealer, type Sealer } from '@better-compute/core/sealing';
import { lookup as dnsLookup } from 'node:dns/promises';
import type { ResolvedAddress, WebhookSettings } from '../../config/define-config.js';
import { LEASE_TTL_MS } from '../../workers/leases.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** The published retry schedule: the wait before each retry after a failed attempt. */
const DEFAULT_RETRY_SCHEDULE = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR,
] as const;

/** After a rotation, the previous secret signs as well for this long. */
export const ROTATION_OVERLAP_MS = 24 * HOUR;

export interface WebhookRuntime {
  allowPrivateAddresses: boolean;
  allowLoopback: boolean;
  maxPerTenant: number;
  retrySchedule: readonly number[];
  jitter: number;
  disableAfterMs: number;
  requestTimeoutMs: number;
  /**
   * How long a claim holds a delivery unrenewed (LEASE_TTL_MS, as jobs): the loop renews the claims
   * of attempts in flight at a third of it, so a replica killed mid-way holds nothing longer.
   */
  leaseMs: number;
  pollMs: number;
  /** Finished deliveries older than this are deleted with their attempts. */
  retentionMs: number;
  lookup(hostname: string): Promise<ResolvedAddress[]>;
  sealer: Sealer;
}

async function systemLookup(hostname: string): Promise<ResolvedAddress[]> {
  const answers = await dnsLookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
}

export function webhookRuntime(settings: WebhookSettings = {}, secret?: string): WebhookRuntime {
  const requestTimeoutMs = Math.max(100, settings.requestTimeoutMs ?? 10 * SECOND);
  return {
    allowPrivateAddresses: settings.allowPrivateAddresses ?? false,
    allowLoopback: settings.allowLoopback ?? true,
    maxPerTenant: settings.maxPerTenant ?? 25,
    retrySchedule: settings.retrySchedule ?? DEFAULT_RETRY_SCHEDULE,
    jitter: Math.min(Math.max(settings.jitter ?? 0.2, 0), 0.9),
    disableAfterMs: settings.disableAfterMs ?? 5 * 24 * HOUR,
    requestTimeoutMs,
    leaseMs: LEASE_TTL_MS,
    pollMs: settings.pollMs ?? 250,
    retentionMs: settings.deliveryRetentionMs ?? 30 * 24 * HOUR,
    lookup: settings.lookup ?? systemLookup,
    sealer: createSealer(secret, 'webhook secrets'),
  };
}

/** The wait before retry `step` (0 for the first retry), spread by the jitter; null when none is left. */
export function retryDelay(runtime: WebhookRuntime, step: number, random = Math.random): number | null {
  const base = runtime.retrySchedule[step];
  if (base === undefined) return null;
  return Math.round(base * (1 + runtime.jitter * (2 * random() - 1)));
}
