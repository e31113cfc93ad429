/**
 * A site agent's provisioning network under `bcd run --pxe-dir DIR` (docs/metal-drivers.md): the
 * service of provisioning-network.ts, started with the daemon and stopped with it, whose PXE
 * requests from MACs without a boot entry go to the gateway as `pxe.discovered` (the MAC and the
 * option-97 UUID only; the gateway records them for this agent's own site). A report made while
 * the session is down waits, one per MAC and at most MAX_PENDING of them, and is sent once the
 * session is back. Nothing here binds a MAC: that is metal confirm-mac, a person's decision; the
 * control plane then sends the site's bound MACs as a metal.boot-entries command (applyBootEntries).
 */
import { ComputeError, isBootEntriesPayload } from '@better-compute/core';
import {
  type DiscoveryEvent,
  ProvisioningNetwork,
  type ProvisioningNetworkOptions,
} from './provisioning-network.js';

/** What `bcd run` names of the provisioning network: its directory, subnet and uplinks. */
export interface SiteProvisioningOptions {
  dir: string;
  subnet?: string | undefined;
  uplinks?: string[] | undefined;
}

/** Reports kept while the session is down; a machine beyond them is reported when it asks again. */
export const MAX_PENDING = 256;
const RETRY_MS = 2_000;

export interface SiteProvisioning {
  readonly network: ProvisioningNetwork;
  /** Reports waiting for the session. */
  pending(): number;
  /** Stops the network; a failure is logged, never thrown, so the daemon's own stop goes on. */
  stop(): Promise<void>;
}

/** Starts the network when `bcd run` names one (null otherwise); refused on a node that is not a site agent. */
export async function startSiteProvisioning(
  options: SiteProvisioningOptions | undefined,
  io: {
    /** Whether this node joined with a site token: only a site agent serves a site's PXE. */
    siteAgent: boolean;
    /** Sends a message on the session; false when the session is down. */
    send: (message: Record<string, unknown>) => boolean;
    log: (line: string) => void;
  },
  start: (options: ProvisioningNetworkOptions) => Promise<ProvisioningNetwork> = (o) =>
    ProvisioningNetwork.start(o),
): Promise<SiteProvisioning | null> {
  if (!options) return null;
  if (!io.siteAgent)
    throw new ComputeError(
      'INVALID_STATE',
      'bcd run --pxe-dir runs a site’s provisioning network, and this node is not a site agent',
      {
        hint: 'Join the machine that serves the provisioning network with a site token (better-compute site-tokens create), or drop --pxe-dir.',
      },
    );
  const waiting = new Map<string, { mac: string; uuid?: string }>();
  let dropped = 0;
  const flush = () => {
    for (const [mac, report] of waiting) {
      if (!io.send({ t: 'pxe.discovered', ...report })) return;
      waiting.delete(mac);
    }
  };
  const onDiscovery = (event: DiscoveryEvent) => {
    if (!waiting.has(event.mac) && waiting.size >= MAX_PENDING) {
      if (dropped++ === 0)
        io.log(`bcd: over ${MAX_PENDING} PXE discoveries wait for the session; newer ones are dropped`);
      return;
    }
    waiting.set(event.mac, { mac: event.mac, ...(event.uuid ? { uuid: event.uuid } : {}) });
    flush();
  };
  const network = await start({
    dir: options.dir,
    ...(options.subnet ? { subnet: options.subnet } : {}),
    ...(options.uplinks?.length ? { uplinks: options.uplinks } : {}),
    onDiscovery,
    log: (line) => io.log(`bcd: ${line}`),
  });
  const retry = setInterval(() => {
    if (waiting.size > 0) flush();
    if (waiting.size === 0) dropped = 0;
  }, RETRY_MS);
  retry.unref();
  return {
    network,
    pending: () => waiting.size,
    async stop() {
      clearInterval(retry);
      await network
        .stop()
        .catch((error: Error) => io.log(`bcd: stopping the provisioning network failed: ${error.message}`));
    },
  };
}

/** A command's outcome as the daemon's ledger records it (state.ts's CommandOutcome). */
interface Outcome {
  state: 'succeeded' | 'failed';
  exitCode: null;
  stdout: string;
  stderr: string;
  result: Record<string, unknown> | null;
  error: string | null;
}
const outcome = (result: Record<string, unknown> | null, error: string | null = null): Outcome => ({
  state: error ? 'failed' : 'succeeded',
  exitCode: null,
  stdout: '',
  stderr: '',
  result,
  error,
});

/**
 * metal.boot-entries: the site's bound MACs, whole. Each listed MAC gets its entry, and an entry
 * for a MAC not listed is removed (treated as unknown again), so the network answers exactly what
 * the control plane bound. Without a network or with a malformed payload it fails and changes
 * nothing; a failure while setting stops there, and the next command (each hello sends one) mends it.
 */
export async function applyBootEntries(pxe: SiteProvisioning | null, payload: unknown): Promise<Outcome> {
  if (!pxe) return outcome(null, 'this agent runs no provisioning network (bcd run --pxe-dir)');
  if (!isBootEntriesPayload(payload)) return outcome(null, 'the boot entries are malformed');
  const wanted = new Map(payload.entries.map((entry) => [entry.mac, entry.boot]));
  let removed = 0;
  try {
    for (const mac of pxe.network.bootEntries().keys())
      if (!wanted.has(mac)) {
        await pxe.network.setBootEntry(mac, null);
        removed += 1;
      }
    for (const [mac, boot] of wanted) await pxe.network.setBootEntry(mac, boot);
  } catch (error) {
    return outcome(null, `setting the boot entries failed: ${(error as Error).message.slice(0, 300)}`);
  }
  return outcome({ entries: wanted.size, removed });
}
