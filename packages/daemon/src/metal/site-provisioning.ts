/**
 * A site agent's provisioning network under `bcd run --pxe-dir DIR` (docs/metal-drivers.md): the
 * service of provisioning-network.ts, started with the daemon and stopped with it, whose PXE
 * requests from MACs without a boot entry go to the gateway as `pxe.discovered` (the MAC and the
 * option-97 UUID only; the gateway records them for this agent's own site). A report made while
 * the session is down waits, one per MAC and at most MAX_PENDING of them, and is sent once the
 * session is back. Nothing here binds a MAC: that is metal confirm-mac, a person's decision; the
 * control plane then sends the site's bound MACs as a metal.boot-entries command (applyBootEntries).
 *
 * A bound MAC whose machine is being inspected boots the deploy ramdisk (`--ramdisk-dir`) with a
 * one-time token of this agent's on its kernel command line. The ramdisk POSTs its report to the
 * network's web server; a report whose token is that MAC's is sent to the gateway as
 * `metal.report`, and any other is dropped here: the control plane never sees the token, and a
 * machine on the network cannot report for another MAC (docs/decisions/metal-inspection.md).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import {
  ComputeError,
  isBootEntriesPayload,
  normalizeMac,
  RAMDISK_FINDINGS,
  RAMDISK_PURPOSES,
  type RamdiskPurpose,
} from '@better-compute/core';
import type { BootEntry, NetworkBoot } from './boot-entries.js';
import {
  type DiscoveryEvent,
  ProvisioningNetwork,
  type ProvisioningNetworkOptions,
} from './provisioning-network.js';

/** What `bcd run` names of the provisioning network: its directory, subnet, uplinks and ramdisk. */
export interface SiteProvisioningOptions {
  dir: string;
  subnet?: string | undefined;
  uplinks?: string[] | undefined;
  /**
   * The deploy ramdisk (`--ramdisk-dir`, what scripts/build-deploy-ramdisk.sh makes): its kernel
   * and initramfs. Without it, entries that boot the ramdisk are refused.
   */
  ramdisk?: { kernel: string; initrd: string } | undefined;
}

/**
 * What a ramdisk POSTs: the MAC it booted from, the token of that MAC's entry, the purpose, and its
 * findings in its purpose's field (the gateway checks what they hold).
 */
interface RamdiskReport {
  mac: string;
  token: string;
  purpose: RamdiskPurpose;
  findings: Record<string, unknown>;
}

function parseReport(body: string): RamdiskReport | null {
  try {
    const value = JSON.parse(body) as Record<string, unknown>;
    const { mac, token, purpose } = value ?? {};
    if (
      typeof mac !== 'string' ||
      typeof token !== 'string' ||
      !(RAMDISK_PURPOSES as readonly unknown[]).includes(purpose)
    )
      return null;
    const findings = value[RAMDISK_FINDINGS[purpose as RamdiskPurpose]];
    if (typeof findings !== 'object' || findings === null || Array.isArray(findings)) return null;
    return { mac, token, purpose: purpose as RamdiskPurpose, findings: findings as Record<string, unknown> };
  } catch {
    return null;
  }
}

const sameToken = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** Reports kept while the session is down; a machine beyond them is reported when it asks again. */
export const MAX_PENDING = 256;
const RETRY_MS = 2_000;

export interface SiteProvisioning {
  readonly network: ProvisioningNetwork;
  /**
   * The network boot of the deploy ramdisk for `mac`, booted for `purpose`, with the one-time
   * token its report must carry on the kernel command line; the same entry keeps its token, so a
   * repeated metal.boot-entries does not strand a ramdisk already booting. Null: no ramdisk here.
   */
  ramdiskBoot(mac: string, purpose: RamdiskPurpose): NetworkBoot | null;
  /** Forgets the tokens of MACs that no longer boot the ramdisk. */
  keepTokens(macs: ReadonlySet<string>): void;
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
  // One token per MAC booting the ramdisk, for the purpose it was given for; taken by its report.
  const tokens = new Map<string, { purpose: RamdiskPurpose; token: string }>();
  const reports: Record<string, unknown>[] = [];
  const flushReports = () => {
    while (reports.length > 0) {
      if (!io.send(reports[0]!)) return;
      reports.shift();
    }
  };
  const onReport = (body: string) => {
    const report = parseReport(body);
    const mac = report ? normalizeMac(report.mac) : null;
    const held = mac ? tokens.get(mac) : undefined;
    if (!report || !mac || !held || held.purpose !== report.purpose || !sameToken(held.token, report.token)) {
      io.log('bcd: a ramdisk report without a valid token for its MAC was dropped');
      return;
    }
    tokens.delete(mac);
    if (reports.length >= MAX_PENDING) reports.shift();
    reports.push({
      t: 'metal.report',
      mac,
      purpose: report.purpose,
      [RAMDISK_FINDINGS[report.purpose]]: report.findings,
    });
    io.log(`bcd: the ramdisk on ${mac} reported (${report.purpose})`);
    flushReports();
  };
  const network = await start({
    dir: options.dir,
    ...(options.subnet ? { subnet: options.subnet } : {}),
    ...(options.uplinks?.length ? { uplinks: options.uplinks } : {}),
    onDiscovery,
    onReport,
    log: (line) => io.log(`bcd: ${line}`),
  });
  const retry = setInterval(() => {
    if (waiting.size > 0) flush();
    if (waiting.size === 0) dropped = 0;
    flushReports();
  }, RETRY_MS);
  retry.unref();
  const ramdisk = options.ramdisk;
  return {
    network,
    ramdiskBoot(mac, purpose) {
      if (!ramdisk) return null;
      let held = tokens.get(mac);
      if (held?.purpose !== purpose) {
        held = { purpose, token: randomBytes(16).toString('hex') };
        tokens.set(mac, held);
      }
      const report = `http://${network.serverAddress}/cgi-bin/report`;
      return {
        kernel: ramdisk.kernel,
        initrd: ramdisk.initrd,
        cmdline: `console=tty0 console=ttyS0 bc.purpose=${purpose} bc.report=${report} bc.token=${held.token}`,
      };
    },
    keepTokens(macs) {
      for (const mac of tokens.keys()) if (!macs.has(mac)) tokens.delete(mac);
    },
    pending: () => waiting.size + reports.length,
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
  const wanted = new Map<string, BootEntry>();
  for (const entry of payload.entries) {
    if (entry.boot === 'local-disk') {
      wanted.set(entry.mac, 'local-disk');
      continue;
    }
    const boot = pxe.ramdiskBoot(entry.mac, entry.purpose);
    if (!boot)
      return outcome(
        null,
        `${entry.mac} is to boot the deploy ramdisk (${entry.purpose}), and this agent has none: run bcd with --ramdisk-dir DIR (scripts/build-deploy-ramdisk.sh makes it)`,
      );
    wanted.set(entry.mac, boot);
  }
  pxe.keepTokens(new Set(payload.entries.filter((e) => e.boot === 'ramdisk').map((e) => e.mac)));
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
  const ramdisks = payload.entries.filter((e) => e.boot === 'ramdisk').length;
  return outcome({ entries: wanted.size, ramdisks, removed });
}
