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
