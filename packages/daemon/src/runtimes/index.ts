/**
 * Runs the control plane's runtime commands (`image.fetch`, `instance.*`) on this node's runtime:
 * the payload is checked with the shared schema first, then the driver does the work, and the
 * outcome is reported like any command's (a result object on success, the reason on failure).
 */
import {
  isRuntimeCommandKind,
  isSandboxCommandKind,
  type RuntimeCommandKind,
  runtimeCommandPayloads,
  type SandboxCommandKind,
  sandboxCommandPayloads,
} from '@better-compute/core/runtime-commands';
import { BwrapDriver, bwrapAvailable } from './bwrap.js';
import { type CommandOutcome, outcomeOf } from '../state.js';
import type { RuntimeDriver, SandboxDriver } from './driver.js';
import { RuntimeError } from './image-cache.js';
import { QemuDriver, type VmExit } from './qemu.js';
import { QemuSandboxDriver } from './qemu-sandbox.js';
import { runtimeDirFor } from './runtime-dir.js';
import { sweep, type SweepReport } from './teardown.js';

/** How often the VMs are checked for an exit no command asked for. */
const EXIT_CHECK_MS = 1_000;
/** An exit not acknowledged by then (the instance was still being booted, say) is told again. */
const EXIT_RETELL_MS = 5_000;

export { type SandboxDriver } from './driver.js';
export { ImageCache } from './image-cache.js';
export { QemuDriver, type VmExit } from './qemu.js';
export { isRuntimeCommandKind, isSandboxCommandKind };
export { BwrapDriver, bwrapAvailable, QemuSandboxDriver };

export interface RunningCommand {
  outcome: Promise<CommandOutcome>;
  stop(reason: 'cancelled' | 'handed-back'): void;
}

async function dispatch(
  driver: RuntimeDriver,
  kind: RuntimeCommandKind,
  payload: unknown,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  switch (kind) {
    case 'image.fetch': {
      const { image } = runtimeCommandPayloads[kind].parse(payload);
      return { imageId: image.imageId, ...(await driver.fetchImage(image, signal)) };
    }
    case 'instance.create':
      return { ...(await driver.create(runtimeCommandPayloads[kind].parse(payload), signal)) };
    case 'instance.start':
      return { ...(await driver.start(runtimeCommandPayloads[kind].parse(payload), signal)) };
    case 'instance.stop': {
      const { instanceId, timeoutMs } = runtimeCommandPayloads[kind].parse(payload);
      return { ...(await driver.stop(instanceId, timeoutMs)) };
    }
    case 'instance.resize': {
      const { instanceId, diskGiB } = runtimeCommandPayloads[kind].parse(payload);
      return { ...(await driver.resize(instanceId, diskGiB)) };
    }
    case 'instance.delete':
      return { ...(await driver.delete(runtimeCommandPayloads[kind].parse(payload).instanceId)) };
  }
}

const NO_BWRAP =
  'this node cannot run bwrap sandboxes or volumes: it needs bubblewrap, sshd and nsenter, as root';

/** The sandbox runtimes of a node: qemu wherever QEMU is, bwrap where it can run. */
export class SandboxRuntimes {
  constructor(
    readonly qemu: QemuSandboxDriver,
    readonly bwrap: BwrapDriver | null,
  ) {}

  /** The runtime that has the sandbox; bwrap for one neither has (its answers say so). */
  of(sandboxId: string): SandboxDriver {
    if (this.qemu.has(sandboxId) || !this.bwrap) return this.qemu;
    return this.bwrap;
  }

  private needBwrap(): BwrapDriver {
    if (!this.bwrap) throw new RuntimeError(NO_BWRAP);
    return this.bwrap;
  }

  dialSsh(sandboxId: string) {
    return this.of(sandboxId).dialSsh(sandboxId);
  }

  async run(
    kind: SandboxCommandKind,
    payload: unknown,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    switch (kind) {
      case 'sandbox.create': {
        const spec = sandboxCommandPayloads[kind].parse(payload);
        const driver = spec.runtime === 'qemu' ? this.qemu : this.needBwrap();
        return { ...(await driver.create(spec, signal)) };
      }
      case 'sandbox.certify': {
        const { sandboxId, hostCertificate } = sandboxCommandPayloads[kind].parse(payload);
        return { ...(await this.of(sandboxId).certify(sandboxId, hostCertificate)) };
      }
      case 'sandbox.delete': {
        const { sandboxId } = sandboxCommandPayloads[kind].parse(payload);
        return { ...(await this.of(sandboxId).delete(sandboxId)) };
      }
      case 'sandbox.snapshot': {
        const { sandboxId, snapshotId, memory } = sandboxCommandPayloads[kind].parse(payload);
        return { ...(await this.of(sandboxId).snapshot(sandboxId, snapshotId, memory)) };
      }
      case 'sandbox.snapshot-delete': {
        const { snapshotId } = sandboxCommandPayloads[kind].parse(payload);
        const vm = await this.qemu.deleteSnapshot(snapshotId);
        const layer = this.bwrap ? await this.bwrap.deleteSnapshot(snapshotId) : null;
        return { snapshotId, removed: vm.removed || layer?.removed === true };
      }
      case 'volume.create': {
        const { volumeId, sizeGiB } = sandboxCommandPayloads[kind].parse(payload);
        return { ...(await this.needBwrap().createVolume(volumeId, sizeGiB)) };
      }
      case 'volume.resize': {
        const { volumeId, sizeGiB } = sandboxCommandPayloads[kind].parse(payload);
        return { ...(await this.needBwrap().resizeVolume(volumeId, sizeGiB)) };
      }
      case 'volume.delete':
        return {
          ...(await this.needBwrap().deleteVolume(sandboxCommandPayloads[kind].parse(payload).volumeId)),
        };
    }
  }
}

/**
 * The daemon's runtimes: QEMU, and bwrap for sandboxes where it can run. Created once per `bcd
 * run`; VMs and sandboxes outlive it, unless it stops with them (`stopWorkloads`).
 */
export class Runtimes {
  readonly qemu: QemuDriver;
  readonly sandboxes: SandboxRuntimes;
  /** Settled once the VMs and sandboxes that run on from before (or start again) are found. */
  readonly adopted: Promise<void>;
  private readonly exitTimer: NodeJS.Timeout;
  /** Exits told and not yet acknowledged, with when: told again after a while, and on a new session. */
  private readonly told = new Map<string, number>();

  /** `onExit` hears of each VM that stopped unasked, until `exitAcknowledged` is called for it. */
  constructor(
    stateDir: string,
    log: (line: string) => void,
    onExit: (exit: VmExit) => void = () => {},
    instanceRange?: string,
    /** Where the VMs' sockets go (runtime-dir.ts); from the state directory when not given. */
    private readonly runtimeDir: string = runtimeDirFor(stateDir),
  ) {
    this.qemu = new QemuDriver(stateDir, log, instanceRange, runtimeDir);
    this.sandboxes = new SandboxRuntimes(
      new QemuSandboxDriver(stateDir, this.qemu.images, log, runtimeDir),
      bwrapAvailable() ? new BwrapDriver(stateDir, this.qemu.images, log) : null,
    );
    const sandboxesFound = [this.sandboxes.qemu, this.sandboxes.bwrap].map((driver) =>
      driver?.adopt().catch((error: Error) => log(`bcd: finding running sandboxes failed: ${error.message}`)),
    );
    const adopted = this.qemu
      .adopt()
      .catch((error: Error) => log(`bcd: finding running VMs failed: ${error.message}`));
    this.adopted = Promise.all([adopted, ...sandboxesFound]).then(() => undefined);
    let checking = false;
    this.exitTimer = setInterval(() => {
      if (checking) return;
      checking = true;
      void adopted
        .then(() => this.qemu.exits())
        .then((exits) => {
          const due = Date.now() - EXIT_RETELL_MS;
          for (const exit of exits.filter((e) => (this.told.get(e.instanceId) ?? 0) < due)) {
            this.told.set(exit.instanceId, Date.now());
            log(`bcd: ${exit.instanceId} stopped unasked: ${exit.reason}`);
            onExit(exit);
          }
        })
        .catch((error: Error) => log(`bcd: checking the VMs failed: ${error.message}`))
        .finally(() => (checking = false));
    }, EXIT_CHECK_MS);
    this.exitTimer.unref();
  }

  /** A new session: exits told on the last one and not acknowledged are told again. */
  sessionStarted(): void {
    this.told.clear();
  }

  /** The control plane recorded the exit; its record on this node goes. */
  async exitAcknowledged(instanceId: string): Promise<void> {
    if (!/^inst_[A-Za-z0-9]{1,64}$/.test(instanceId)) return;
    await this.qemu.exitReported(instanceId);
    this.told.delete(instanceId);
  }

  run(kind: RuntimeCommandKind | SandboxCommandKind, payload: unknown): RunningCommand {
    const controller = new AbortController();
    let stopped: 'cancelled' | 'handed-back' | null = null;
    const sandboxes = this.sandboxes;
    const done = (async (): Promise<CommandOutcome> => {
      const check = (
        isSandboxCommandKind(kind) ? sandboxCommandPayloads[kind] : runtimeCommandPayloads[kind]
      ).safeParse(payload);
      if (!check.success) {
        const issue = check.error.issues[0];
        return outcomeOf(
          'failed',
          null,
          `the ${kind} payload is invalid: ${issue ? `${issue.path.join('.') || 'payload'}: ${issue.message}` : 'malformed'}`,
        );
      }
      try {
        if (isSandboxCommandKind(kind))
          return outcomeOf('succeeded', await sandboxes.run(kind, payload, controller.signal), null);
        return outcomeOf('succeeded', await dispatch(this.qemu, kind, payload, controller.signal), null);
      } catch (error) {
        if (stopped === 'cancelled') return outcomeOf('cancelled', null, 'cancelled while it ran');
        if (stopped === 'handed-back')
          return outcomeOf('failed', null, 'the daemon stopped while it ran; it was not finished');
        const message =
          error instanceof RuntimeError ? error.message : `the runtime failed: ${(error as Error).message}`;
        return outcomeOf('failed', null, message.slice(0, 3900));
      }
    })();
    return {
      outcome: done,
      stop(reason) {
        if (stopped) return;
        stopped = reason;
        controller.abort();
      },
    };
  }

  /**
   * Stops every VM and sandbox with the daemon and removes all they made on the machine (teardown.ts),
   * once what was found at start is settled; the files they need to start again stay.
   */
  async stopWorkloads(stateDir: string, log: (line: string) => void, graceMs: number): Promise<SweepReport> {
    await this.adopted;
    return sweep({
      stateDir,
      runtimeDir: this.runtimeDir,
      log,
      graceMs,
      drivers: { qemu: this.qemu, qemuSandboxes: this.sandboxes.qemu, bwrap: this.sandboxes.bwrap },
    });
  }

  close(): void {
    clearInterval(this.exitTimer);
    this.qemu.close();
  }
}
