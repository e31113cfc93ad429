/**
 * What a runtime does for the control plane's instance commands. Each call is idempotent under
 * retry: a command the control plane sends again after a lost answer finds the work done and
 * answers as the first run did. `openConsole` and `dial` are the way in for tunnels.
 */
import type { Duplex } from 'node:stream';
import type {
  RuntimeCommandPayload,
  RuntimeCommandResults,
  RuntimeImage,
  SandboxCommandPayload,
  SandboxCommandResults,
} from '@better-compute/core/runtime-commands';

export interface RuntimeDriver {
  /** Fetches an image's files into the node's cache, verified by digest. */
  fetchImage(
    image: RuntimeImage,
    signal?: AbortSignal,
  ): Promise<Omit<RuntimeCommandResults['image.fetch'], 'imageId'>>;
  create(
    spec: RuntimeCommandPayload<'instance.create'>,
    signal?: AbortSignal,
  ): Promise<RuntimeCommandResults['instance.create']>;
  start(
    spec: RuntimeCommandPayload<'instance.start'>,
    signal?: AbortSignal,
  ): Promise<RuntimeCommandResults['instance.start']>;
  stop(instanceId: string, timeoutMs: number): Promise<RuntimeCommandResults['instance.stop']>;
  resize(instanceId: string, diskGiB: number): Promise<RuntimeCommandResults['instance.resize']>;
  delete(instanceId: string): Promise<RuntimeCommandResults['instance.delete']>;
  /** Whether the instance exists on this node and whether its VM runs. */
  status(instanceId: string): Promise<{ exists: boolean; running: boolean }>;
  /**
   * The instance's serial console: what the bounded ring holds, then what arrives; what is written
   * goes to the guest's serial port. Ending the duplex detaches; the VM runs on.
   */
  openConsole(instanceId: string): Promise<Duplex>;
  /** A TCP connection to a port of the running guest. */
  dial(instanceId: string, port: number): Promise<Duplex>;
  /** Lets go of the VMs' sockets without stopping the VMs (the daemon is stopping or restarting). */
  close(): void;
}

/** What a sandbox runtime (bwrap, qemu) does for the control plane's sandbox commands. */
export interface SandboxDriver {
  /** Whether the sandbox is this runtime's on this node (running or not). */
  has(sandboxId: string): boolean;
  create(
    spec: SandboxCommandPayload<'sandbox.create'>,
    signal?: AbortSignal,
  ): Promise<SandboxCommandResults['sandbox.create']>;
  certify(sandboxId: string, hostCertificate: string): Promise<SandboxCommandResults['sandbox.certify']>;
  delete(sandboxId: string): Promise<SandboxCommandResults['sandbox.delete']>;
  snapshot(
    sandboxId: string,
    snapshotId: string,
    memory: boolean,
  ): Promise<SandboxCommandResults['sandbox.snapshot']>;
  deleteSnapshot(snapshotId: string): Promise<SandboxCommandResults['sandbox.snapshot-delete']>;
  /** A connection to the sandbox's SSH server. */
  dialSsh(sandboxId: string): Promise<Duplex>;
  /** Finds the sandboxes that run on from before the daemon started; removes what is left of the rest. */
  adopt(): Promise<string[]>;
}
