/**
 * Where the qemu runtime (qemu.ts) keeps each instance, and its records there. The instance's
 * directory, `<state-dir>/instances/<id>`, holds its definition (`spec.json`, with its network:
 * see vm-network.ts), its disk, its NoCloud seed, and while it runs the pidfile and `run.json`
 * (address, egress, boot time). Its QMP and console sockets are in `<runtime-dir>/<12 hex digits of
 * the id's digest>` (runtime-dir.ts), whose path is short whatever the state directory's; a VM an
 * older daemon started has them in the instance's directory, and is found there.
 */
import { createHash } from 'node:crypto';
import { existsSync, rmdirSync } from 'node:fs';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RuntimeCommandPayload } from '@better-compute/core/runtime-commands';
import { RuntimeError } from './image-cache.js';
import type { InstanceNetwork } from './instance-network.js';
import type { Ledger } from './ledger.js';
import { qemuPid } from './qemu-process.js';
import { shortName } from './runtime-dir.js';

export const INSTANCE_ID = /^inst_[A-Za-z0-9]{1,64}$/;

/** What create recorded (`spec.json`): enough to start the instance and to recognise a retried create. */
export interface InstanceSpec {
  instanceId: string;
  hostname: string;
  definition: string;
  diskGiB: number;
  createdAt: string;
  /** Its slot, names and addresses; absent for an instance created before instances had one. */
  network?: InstanceNetwork;
}

/** What start recorded about the running VM (`run.json`). */
export interface InstanceRun {
  pid: number;
  /** The address the guest reported in its ready line. */
  address: string | null;
  bootMs: number | null;
  /** Whether this boot's guest may open connections beyond the node (restored into nftables). */
  egress: boolean;
  /** Stopped by a daemon that stops its VMs with it (`bcd run --ephemeral`): told as a clean stop. */
  stoppedWithDaemon?: boolean;
}

/** A definition's digest: a retried create with the same payload matches it. */
export function definitionOf(spec: RuntimeCommandPayload<'instance.create'>): string {
  const { instanceId, hostname, image, shape, sshKeys, userData } = spec;
  return createHash('sha256')
    .update(JSON.stringify({ instanceId, hostname, image, shape, sshKeys, userData }))
    .digest('hex');
}

export class InstanceFiles {
  constructor(
    /** `<state-dir>/instances`. */
    readonly root: string,
    /** Where the VMs' sockets go (runtime-dir.ts). */
    readonly runtimeDir: string,
    private readonly ledger: Ledger,
  ) {}

  /** The ids of the instances with a directory on this node. */
  async ids(): Promise<string[]> {
    return (await readdir(this.root).catch(() => [] as string[])).filter((name) => INSTANCE_ID.test(name));
  }

  dir(id: string): string {
    if (!INSTANCE_ID.test(id)) throw new RuntimeError('the instance id is malformed');
    return join(this.root, id);
  }
  path(id: string, name: string): string {
    return join(this.dir(id), name);
  }
  /**
   * The directory of the VM's sockets: its own in the runtime directory, or the instance's directory
   * for a VM an older daemon started with its sockets there (found by its QMP socket).
   */
  sockets(id: string): string {
    const dir = this.dir(id);
    return existsSync(join(dir, 'qmp.sock')) ? dir : join(this.runtimeDir, shortName(id));
  }
  socket(id: string, name: 'qmp.sock' | 'console.sock'): string {
    return join(this.sockets(id), name);
  }

  /** What a VM that is gone leaves: its socket directory and its process in the ledger. */
  async forgetVm(id: string): Promise<void> {
    await rm(join(this.runtimeDir, shortName(id)), { recursive: true, force: true });
    // The runtime directory itself goes with its last VM (made again for the next). Synchronous,
    // so it never falls between another VM's making of the directory and of its own in it.
    try {
      rmdirSync(this.runtimeDir);
    } catch {
      // Another VM's sockets are in it, or it is gone.
    }
    this.ledger.forget((entry) => entry.kind === 'process' && entry.what === `QEMU of ${id}`);
  }

  async spec(id: string): Promise<InstanceSpec | null> {
    try {
      return JSON.parse(await readFile(this.path(id, 'spec.json'), 'utf8')) as InstanceSpec;
    } catch {
      return null;
    }
  }
  async mustSpec(id: string): Promise<InstanceSpec> {
    const spec = await this.spec(id);
    if (!spec) throw new RuntimeError(`instance ${id} does not exist on this node; create it first`);
    return spec;
  }
  async runInfo(id: string): Promise<InstanceRun | null> {
    try {
      return JSON.parse(await readFile(this.path(id, 'run.json'), 'utf8')) as InstanceRun;
    } catch {
      return null;
    }
  }
  /** Writes one of the instance's records whole: beside it, then renamed over it. */
  async save(id: string, name: 'spec.json' | 'run.json', value: unknown): Promise<void> {
    const path = this.path(id, name);
    await writeFile(`${path}.tmp`, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
    await rename(`${path}.tmp`, path);
  }

  /** The pid of the instance's QEMU while it runs (qemu-process.ts checks it is that VM's). */
  pid(id: string): number | null {
    return qemuPid(this.dir(id));
  }
}
