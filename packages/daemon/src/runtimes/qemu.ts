/**
 * The qemu runtime. Each instance has a directory under `<state-dir>/instances/<id>` with its
 * definition, its disk (a qcow2 overlay over the cached image), its NoCloud seed and while it runs
 * its pidfile and `run.json`; its QMP and console sockets are in the daemon's short runtime
 * directory (instance-files.ts says where each is). QEMU daemonizes itself inside the instance's
 * network namespace, so the VM outlives the daemon; a restarted daemon finds it again by its pidfile
 * (checked against the process's command line) and reconnects to its sockets and console
 * (vm-console.ts). The daemon reaches the guest at its private address, routed through the namespace.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { RuntimeCommandPayload, RuntimeImage } from '@better-compute/core/runtime-commands';
import { limitProcess, removeCgroup } from './cgroups.js';
import type { RuntimeDriver } from './driver.js';
import { ImageCache, RuntimeError } from './image-cache.js';
import {
  definitionOf,
  INSTANCE_ID,
  InstanceFiles,
  type InstanceRun,
  type InstanceSpec,
} from './instance-files.js';
import type { InstanceNetwork } from './instance-network.js';
import { baseVirtualSize, GiB, growDisk, makeOverlay, virtualSize, writeSeed } from './qemu-disk.js';
import { Ledger } from './ledger.js';
import { qmpOnce } from './qmp.js';
import { makeSocketDir, runtimeDirFor } from './runtime-dir.js';
import {
  accelerator,
  endQemu,
  launch,
  machineArgs,
  qemuExited,
  passthroughArgs,
  qemuOverheadMiB,
  sshBanner,
  tail,
} from './qemu-process.js';
import { VmConsoles } from './vm-console.js';
import { guestNameservers, networkConfig, pickNetwork, VmNetwork } from './vm-network.js';

/** A VM that stopped without the daemon asking: what the control plane is told. */
export interface VmExit {
  instanceId: string;
  reason: string;
  /** The guest powered itself off (its kernel said so on the console), rather than QEMU dying. */
  clean: boolean;
}

/** What a Linux guest prints on its serial console as it powers the machine off. */
const POWER_DOWN = /reboot: Power down/;

const READY = /better-compute-guest: ready ([^\r\n]*)\r?\n/;

export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export class QemuDriver implements RuntimeDriver {
  readonly images: ImageCache;
  /** Each instance's directory, records and sockets. */
  private readonly files: InstanceFiles;
  private readonly consoles: VmConsoles;
  /** Instances a command is starting, stopping or deleting: their QEMU exiting is asked for. */
  private readonly busy = new Set<string>();
  /** Slots being given to instances whose spec.json is not written yet. */
  private readonly reserved = new Set<number>();
  private allocating: Promise<unknown> = Promise.resolve();
  readonly network: VmNetwork;
  readonly ledger: Ledger;

  constructor(
    stateDir: string,
    private readonly log: (line: string) => void = () => {},
    instanceRange?: string,
    /** Where the VMs' sockets go (runtime-dir.ts): short, whatever the state directory's length. */
    readonly runtimeDir: string = runtimeDirFor(stateDir),
  ) {
    this.images = new ImageCache(join(stateDir, 'images'));
    this.ledger = new Ledger(stateDir);
    this.files = new InstanceFiles(join(stateDir, 'instances'), runtimeDir, this.ledger);
    this.consoles = new VmConsoles((id) => this.files.socket(id, 'console.sock'));
    this.network = new VmNetwork(instanceRange, log, this.ledger);
  }

  /**
   * Reconnects to the consoles of the VMs that run on from before the daemon started. Called once
   * as the daemon starts, before it runs any command.
   */
  async adopt(): Promise<string[]> {
    const names = await readdir(this.files.root).catch(() => [] as string[]);
    // What a crash left half made (instances being created, image files being fetched) goes.
    for (const name of names.filter((n) => n.startsWith('.making-')))
      await rm(join(this.files.root, name), { recursive: true, force: true });
    for (const name of await readdir(this.images.dir).catch(() => [] as string[]))
      if (name.startsWith('.partial-')) await rm(join(this.images.dir, name), { force: true });
    const found: string[] = [];
    for (const id of names.filter((name) => INSTANCE_ID.test(name))) {
      if (this.files.pid(id) === null) continue;
      this.consoles.attach(id);
      found.push(id);
    }
    if (found.length) this.log(`bcd: found ${found.length} running VM(s) again: ${found.join(', ')}`);
    // The rules match the VMs found: their namespaces and routes outlived the daemon, and the
    // egress of each comes back from its run.json. Without nftables no VM has a network to keep.
    const egress: string[] = [];
    for (const id of found) {
      const [spec, info] = [await this.files.spec(id), await this.files.runInfo(id)];
      if (spec?.network && info?.egress) egress.push(spec.network.address);
    }
    await this.network
      .restore(egress)
      .catch((error: Error) => this.log(`bcd: the instances' network rules: ${error.message}`));
    return found;
  }

  fetchImage(image: RuntimeImage, signal?: AbortSignal) {
    return this.images.fetchImage(image, signal);
  }

  async status(id: string) {
    return { exists: (await this.files.spec(id)) !== null, running: this.files.pid(id) !== null };
  }

  /**
   * The VMs that were running (booted and ready, `run.json` kept) and are gone without a command
   * stopping them: a guest that powered itself off, a QEMU that crashed or was killed, also while
   * the daemon was down. Each stays on this list until `exitReported` clears its record.
   */
  async exits(): Promise<VmExit[]> {
    const found: VmExit[] = [];
    for (const id of await this.files.ids()) {
      if (this.busy.has(id) || this.files.pid(id) !== null) continue;
      const info = await this.files.runInfo(id);
      if (info?.bootMs == null || this.busy.has(id) || this.files.pid(id) !== null) continue;
      const vm = this.consoles.get(id);
      if (info.stoppedWithDaemon) {
        found.push({
          instanceId: id,
          reason: 'its node’s daemon stopped, and stopped its VMs with it (bcd run --ephemeral)',
          clean: true,
        });
        continue;
      }
      if (!vm) {
        found.push({ instanceId: id, reason: 'the VM was gone when the daemon started again', clean: false });
        continue;
      }
      const clean = POWER_DOWN.test(vm.ring.contents().toString('latin1'));
      found.push({
        instanceId: id,
        clean,
        reason: clean
          ? 'the guest powered itself off'
          : 'QEMU exited without being asked to stop (it crashed or was killed)',
      });
    }
    return found;
  }

  /** The control plane has the exit: its record goes, so it is reported once, and its network. */
  async exitReported(id: string): Promise<void> {
    if (this.busy.has(id) || this.files.pid(id) !== null) return;
    await rm(this.files.path(id, 'run.json'), { force: true });
    await this.networkDown(id);
    await this.files.forgetVm(id);
  }

  /** Removes the instance's namespace, veth, route and egress, if it has them. */
  private async networkDown(id: string): Promise<void> {
    const net = (await this.files.spec(id))?.network;
    if (net) await this.network.down(net);
  }

  /**
   * A network for a new instance: a slot none of this node's instances holds (their spec.json, so
   * it survives restarts) nor a create under way. One at a time, so two creates never pick alike.
   */
  private allocate(id: string): Promise<InstanceNetwork> {
    const next = this.allocating.then(async () => {
      const held: InstanceNetwork[] = [];
      for (const other of await this.files.ids())
        if (other !== id) {
          const net = (await this.files.spec(other))?.network;
          if (net) held.push(net);
        }
      const net = pickNetwork(id, this.network.range, held, this.reserved);
      this.reserved.add(net.slot);
      return net;
    });
    this.allocating = next.catch(() => undefined);
    return next;
  }

  /** Runs a command's work on an instance with its QEMU's exit expected meanwhile. */
  private async owned<T>(id: string, work: () => Promise<T>): Promise<T> {
    this.busy.add(id);
    try {
      return await work();
    } finally {
      this.busy.delete(id);
    }
  }

  async create(spec: RuntimeCommandPayload<'instance.create'>, signal?: AbortSignal) {
    const { instanceId, image, shape } = spec;
    const definition = definitionOf(spec);
    const existing = await this.files.spec(instanceId);
    if (existing) {
      if (existing.definition !== definition)
        throw new RuntimeError(
          `instance ${instanceId} exists on this node with a different definition; delete it first`,
        );
      return { instanceId, diskBytes: existing.diskGiB * GiB };
    }
    await this.images.fetchImage(image, signal);
    const base = this.images.pathOf(image.disk.sha256);
    const baseBytes = await baseVirtualSize(base, image.diskFormat);
    if (shape.diskGiB * GiB < baseBytes)
      throw new RuntimeError(
        `the image's disk is ${(baseBytes / GiB).toFixed(1)} GiB; a ${shape.diskGiB} GiB disk cannot hold it`,
      );
    // Made beside its final place and renamed in, so a crash never leaves half an instance.
    await mkdir(this.files.root, { recursive: true, mode: 0o700 });
    const making = join(this.files.root, `.making-${instanceId}-${randomBytes(4).toString('hex')}`);
    const network = await this.allocate(instanceId);
    try {
      await mkdir(making, { mode: 0o700 });
      await makeOverlay(base, image.diskFormat, join(making, 'disk.qcow2'), shape.diskGiB * GiB);
      await writeSeed(
        join(making, 'seed.iso'),
        { ...spec, networkConfig: networkConfig(network, guestNameservers()) },
        making,
      );
      const record: InstanceSpec = {
        instanceId,
        hostname: spec.hostname,
        definition,
        diskGiB: shape.diskGiB,
        createdAt: new Date().toISOString(),
        network,
      };
      await writeFile(join(making, 'spec.json'), `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
      // A directory without spec.json is what a crash left before the rename: replaced.
      await rm(this.files.dir(instanceId), { recursive: true, force: true });
      await rename(making, this.files.dir(instanceId));
    } catch (error) {
      await rm(making, { recursive: true, force: true });
      throw error;
    } finally {
      this.reserved.delete(network.slot);
    }
    return { instanceId, diskBytes: shape.diskGiB * GiB };
  }

  start(spec: RuntimeCommandPayload<'instance.start'>, signal?: AbortSignal) {
    return this.owned(spec.instanceId, () => this.boot(spec, signal));
  }

  private async boot(spec: RuntimeCommandPayload<'instance.start'>, signal?: AbortSignal) {
    const { instanceId: id, image, shape } = spec;
    const net = (await this.files.mustSpec(id)).network;
    if (!net)
      throw new RuntimeError(
        `instance ${id} was made before instances had a network of their own; delete it and create it again`,
      );
    if (this.files.pid(id) !== null) {
      // Started already (a retried command): wait for the ready line if it has not come yet.
      const info = await this.files.runInfo(id);
      if (info?.bootMs != null)
        return { instanceId: id, address: info.address, sshPort: null, bootMs: info.bootMs };
      return this.awaitReady(id, Date.now(), spec.readyTimeoutMs, signal, true);
    }
    for (const file of [image.boot?.kernel, image.boot?.initrd])
      if (file) await this.images.fetchFile(file, signal);
    const gpuArgs = passthroughArgs(shape.gpus);
    const dir = this.files.dir(id);
    // A fresh console for a fresh boot: the last boot's ready line must not count for this one.
    this.consoles.drop(id);
    for (const name of ['qmp.sock', 'console.sock', 'qemu.pid', 'run.json'])
      await rm(join(dir, name), { force: true });
    // The sockets go in a directory of the runtime directory, made afresh for each boot.
    const sockets = makeSocketDir(this.runtimeDir, id);
    const accel = await accelerator(
      image.boot ? this.images.pathOf(image.boot.kernel.sha256) : null,
      this.log,
    );
    const args = machineArgs({
      name: id,
      dir,
      sockets,
      accel,
      vcpus: shape.vcpus,
      memoryMiB: shape.memoryMiB,
      boot: image.boot
        ? {
            kernel: this.images.pathOf(image.boot.kernel.sha256),
            initrd: image.boot.initrd ? this.images.pathOf(image.boot.initrd.sha256) : null,
            cmdline: image.boot.cmdline,
          }
        : null,
      network: { tap: { ifname: 'tap0', mac: net.mac } },
      console: 'socket',
      // Paused until the console is attached, so not a byte of the boot is missed.
      extra: [...gpuArgs, '-S'],
    });
    // Made afresh for each boot (what an earlier one left goes first), with this start's egress.
    await this.network.up(net, spec.egress);
    try {
      await launch(args, net.name);
    } catch (error) {
      await this.network.down(net);
      throw error;
    }
    const launchedAt = Date.now();
    const pid = this.files.pid(id);
    if (pid === null) {
      await this.network.down(net);
      throw new RuntimeError('QEMU started but its process is not found');
    }
    this.ledger.recordProcess(pid, `QEMU of ${id}`);
    // Limited while still paused: the guest's vCPUs plus half a core for QEMU's own threads, its
    // memory plus what QEMU needs beside it (TCG's translated code most of all).
    limitProcess(
      'bcd-instances',
      id,
      pid,
      { cpus: shape.vcpus + 0.5, memoryMiB: shape.memoryMiB + qemuOverheadMiB(accel) },
      this.log,
    );
    const info: InstanceRun = { pid, address: null, bootMs: null, egress: spec.egress };
    await this.files.save(id, 'run.json', info);
    const vm = this.consoles.attach(id);
    await new Promise<void>((resolve) => {
      if (vm.console?.readyState === 'open') return resolve();
      vm.console?.once('connect', () => resolve());
      vm.console?.once('close', () => resolve());
    });
    try {
      await qmpOnce(this.files.socket(id, 'qmp.sock'), 'cont');
    } catch (error) {
      await this.kill(id);
      throw new RuntimeError(`the VM did not start running: ${(error as Error).message}`);
    }
    this.log(`bcd: ${id} booting (${accel}, ${shape.vcpus} vCPU, ${shape.memoryMiB} MiB)`);
    return this.awaitReady(id, launchedAt, spec.readyTimeoutMs, signal);
  }

  /**
   * Waits for the guest's ready line; a VM that dies, times out or is cancelled is stopped. A VM
   * found again after a daemon restart may have printed its line while no one listened, so for it
   * an SSH banner at its address counts as ready too (the guest starts SSH last).
   */
  private async awaitReady(
    id: string,
    since: number,
    timeoutMs: number,
    signal?: AbortSignal,
    adopted = false,
  ) {
    const vm = this.consoles.attach(id);
    const info = (await this.files.runInfo(id))!;
    const guestAddress = (await this.files.spec(id))?.network?.address ?? '127.0.0.1';
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    // Cancelled while QEMU was launching: the abort event has fired already.
    if (signal?.aborted) controller.abort();
    let why = '';
    let bannerSeen = false;
    let probing = false;
    const watch = setInterval(() => {
      if (this.files.pid(id) === null) {
        why = 'QEMU exited';
        controller.abort();
      } else if (adopted && !probing) {
        probing = true;
        void sshBanner(22, guestAddress).then((seen) => {
          probing = false;
          if (seen && !controller.signal.aborted) {
            bannerSeen = true;
            controller.abort();
          }
        });
      }
    }, 250);
    let fields: Record<string, string | undefined> = {};
    try {
      const match = await vm.ring.waitFor(READY, timeoutMs, controller.signal);
      fields = Object.fromEntries(match[1]!.split(' ').map((pair) => pair.split('=', 2) as [string, string]));
    } catch (error) {
      if (!bannerSeen) {
        await this.kill(id);
        throw new RuntimeError(
          `the guest did not report ready (${why || (error as Error).message}); the VM was stopped. Console:\n${tail(vm.ring.contents().toString('latin1'))}`,
        );
      }
    } finally {
      clearInterval(watch);
      signal?.removeEventListener('abort', onAbort);
    }
    const address = fields.address && /^[0-9a-f.:/]{1,64}$/i.test(fields.address) ? fields.address : null;
    const ready = { ...info, address, bootMs: Date.now() - since };
    await this.files.save(id, 'run.json', ready);
    return { instanceId: id, address, sshPort: null, bootMs: ready.bootMs };
  }

  stop(id: string, timeoutMs: number) {
    return this.owned(id, () => this.powerOff(id, timeoutMs));
  }

  private async powerOff(id: string, timeoutMs: number) {
    await this.files.mustSpec(id);
    if (this.files.pid(id) === null) {
      // Stopped already (or it died): what its boot made of the network goes all the same.
      await this.networkDown(id);
      return { instanceId: id, forced: false };
    }
    if (timeoutMs > 0) {
      try {
        await qmpOnce(this.files.socket(id, 'qmp.sock'), 'system_powerdown');
        if (await qemuExited(this.files.dir(id), timeoutMs)) {
          await rm(this.files.path(id, 'run.json'), { force: true });
          await this.networkDown(id);
          await this.files.forgetVm(id);
          return { instanceId: id, forced: false };
        }
      } catch (error) {
        this.log(`bcd: ${id}: the ACPI power-down failed: ${(error as Error).message}`);
      }
    }
    await this.kill(id);
    return { instanceId: id, forced: true };
  }

  /** QMP quit, then SIGKILL: the VM and its network are gone when this returns. */
  private async kill(id: string): Promise<void> {
    await endQemu(this.files.dir(id), id, this.files.sockets(id));
    this.consoles.disconnect(id);
    await rm(this.files.path(id, 'run.json'), { force: true });
    await this.networkDown(id);
    await this.files.forgetVm(id);
  }

  /**
   * Stops every VM of this node as its daemon stops with them (`bcd run --ephemeral`, `bcd
   * sweep`): the ACPI power button, QMP quit after `graceMs`, then SIGKILL; each VM's network,
   * sockets and cgroup go. A VM that was up keeps its `run.json`, marked, so the next daemon tells
   * the control plane it stopped (cleanly); the disks stay. Answers how many VMs were stopped.
   */
  async stopAll(graceMs: number): Promise<number> {
    const ids = await this.files.ids();
    let stopped = 0;
    await Promise.all(
      ids.map(async (id) => {
        this.busy.add(id);
        try {
          if (this.files.pid(id) !== null) {
            stopped += 1;
            const info = await this.files.runInfo(id);
            if (info?.bootMs != null)
              await this.files.save(id, 'run.json', { ...info, stoppedWithDaemon: true });
            else await rm(this.files.path(id, 'run.json'), { force: true });
            if (graceMs > 0) {
              await qmpOnce(this.files.socket(id, 'qmp.sock'), 'system_powerdown').catch(() => undefined);
              await qemuExited(this.files.dir(id), graceMs);
            }
            if (this.files.pid(id) !== null) await endQemu(this.files.dir(id), id, this.files.sockets(id));
            this.consoles.drop(id);
          }
          // A network left by a VM that exited unasked goes too: nothing of an instance's
          // network outlives a daemon that stops with its VMs.
          const net = (await this.files.spec(id))?.network;
          if (net && (existsSync(`/run/netns/${net.name}`) || existsSync(`/sys/class/net/${net.name}`)))
            await this.network.down(net);
          await removeCgroup('bcd-instances', id, this.log);
          await this.files.forgetVm(id);
        } finally {
          this.busy.delete(id);
        }
      }),
    );
    return stopped;
  }

  async resize(id: string, diskGiB: number) {
    const spec = await this.files.mustSpec(id);
    if (this.files.pid(id) !== null)
      throw new RuntimeError(`instance ${id} is running; stop it before resizing its disk`);
    const current = await virtualSize(this.files.path(id, 'disk.qcow2'));
    if (diskGiB * GiB < current)
      throw new RuntimeError(`the disk is ${current / GiB} GiB; it only grows, so ${diskGiB} GiB is refused`);
    if (diskGiB * GiB > current) await growDisk(this.files.path(id, 'disk.qcow2'), diskGiB * GiB);
    await this.files.save(id, 'spec.json', { ...spec, diskGiB });
    return { instanceId: id, diskGiB };
  }

  delete(id: string) {
    return this.owned(id, () => this.remove(id));
  }

  private async remove(id: string) {
    const dir = this.files.dir(id);
    if (!existsSync(dir)) return { instanceId: id, removed: false };
    if (this.files.pid(id) !== null) await this.kill(id);
    this.consoles.drop(id);
    await this.networkDown(id);
    await removeCgroup('bcd-instances', id, this.log);
    await rm(dir, { recursive: true, force: true });
    await this.files.forgetVm(id);
    return { instanceId: id, removed: true };
  }

  async openConsole(id: string): Promise<Duplex> {
    if (this.files.pid(id) === null) throw new RuntimeError(`instance ${id} is not running`);
    return this.consoles.open(id);
  }

  async dial(id: string, port: number): Promise<Duplex> {
    if (!Number.isInteger(port) || port < 1 || port > 65_535)
      throw new RuntimeError('the port must be a whole number from 1 to 65535');
    const info = this.files.pid(id) !== null ? await this.files.runInfo(id) : null;
    const net = info ? (await this.files.spec(id))?.network : undefined;
    if (!info || !net) throw new RuntimeError(`instance ${id} is not running`);
    // Straight to the guest's private address: the node routes it through the instance's veth.
    return new Promise((resolve, reject) => {
      const socket = connect(port, net.address, () => resolve(socket));
      socket.once('error', reject);
    });
  }

  close(): void {
    this.consoles.close();
  }
}
