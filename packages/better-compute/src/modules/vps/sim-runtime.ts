/**
 * The `sim` runtime: simulated nodes (driver `sim`: `dev --sim`, the simulator) run no daemon, so
 * the runtime commands queued for them are completed here, in process, after a delay like a real
 * node's, with the result a real node reports. Node labels steer it for simulations and tests:
 *
 *   sim.better-compute.dev/fail=KIND       every KIND command on the node fails (instance.start, …)
 *   sim.better-compute.dev/delay-ms=N      every command takes N ms instead of its kind's usual time
 *   sim.better-compute.dev/keep-identity=true  a memory restore keeps its source's SSH identity
 *                                          (`identityRebound: false`), as a guest whose agent never
 *                                          answered the rebind would
 */
import { generateKeyPairSync } from 'node:crypto';
import {
  isRuntimeCommandKind,
  isSandboxCommandKind,
  type RuntimeCommandKind,
  type SandboxCommandKind,
} from '@better-compute/core/runtime-commands';
import { sshPublicKeyLine } from '../../pki/ssh-ca.js';
import { enqueueJob } from '../../workers/jobs.js';
import type { JobContext } from '../define-module.js';
import { imageFetchedOn, lockCommand } from '../commands/queries.js';
import { advanceCommand } from '../commands/service.js';
import { nodeWithDriver } from '../fleet/queries.js';
import type { WorkflowHookContext } from '../workflows/hooks.js';

export const SIM_RUNTIME_JOB = 'vps.sim-runtime';
export const SIM_FAIL_LABEL = 'sim.better-compute.dev/fail';
export const SIM_DELAY_LABEL = 'sim.better-compute.dev/delay-ms';
export const SIM_KEEP_IDENTITY_LABEL = 'sim.better-compute.dev/keep-identity';

type SimKind = RuntimeCommandKind | SandboxCommandKind;
const isSimKind = (kind: string): kind is SimKind => isRuntimeCommandKind(kind) || isSandboxCommandKind(kind);

/**
 * How long each kind takes on a simulated node: of the order of a small guest under KVM, and of a
 * bubblewrap sandbox for the sandbox kinds.
 */
const SIM_DELAYS_MS: Record<SimKind, number> = {
  'image.fetch': 400,
  'instance.create': 200,
  'instance.start': 900,
  'instance.stop': 300,
  'instance.resize': 150,
  'instance.delete': 200,
  'sandbox.create': 150,
  'sandbox.certify': 20,
  'sandbox.delete': 50,
  'sandbox.snapshot': 100,
  'sandbox.snapshot-delete': 30,
  'volume.create': 80,
  'volume.resize': 40,
  'volume.delete': 60,
};

function delayOf(kind: SimKind, labels: Record<string, string>): number {
  const asked = labels[SIM_DELAY_LABEL];
  if (asked !== undefined && /^\d{1,6}$/.test(asked)) return Number(asked);
  return SIM_DELAYS_MS[kind];
}

/** The workflow hook: a runtime command queued for a simulated node is scheduled to complete. */
export async function scheduleSimulated(
  context: WorkflowHookContext,
  command: { id: string; kind: string },
): Promise<void> {
  if (!isSimKind(command.kind)) return;
  const node = await nodeWithDriver(context.db, context.workflow.node_id);
  if (node?.driver !== 'sim') return;
  await enqueueJob(context.db, {
    kind: SIM_RUNTIME_JOB,
    payload: { commandId: command.id },
    runAt: new Date(context.now.getTime() + delayOf(command.kind, node.labels)),
  });
}

/** The fields of the runtime payloads a simulated result repeats (checked when they were queued). */
interface SimPayload {
  image?: { imageId?: string; disk?: { sizeBytes?: number } };
  instanceId?: string;
  shape?: { diskGiB?: number };
  diskGiB?: number;
  sandboxId?: string;
  snapshotId?: string;
  volumeId?: string;
  memory?: boolean;
  sizeGiB?: number;
  hostCertificate?: string;
  fromSnapshot?: { memory?: boolean } | null;
}

/** The expiry of an OpenSSH certificate line, as the node reads it when it installs one. */
async function certificateExpiry(line: string | undefined): Promise<string> {
  const loaded = (await import('sshpk')) as typeof import('sshpk') & { default?: typeof import('sshpk') };
  const lib = loaded.default ?? loaded;
  return lib.parseCertificate(String(line), 'openssh').validUntil.toISOString();
}

/** A sandbox kind's result: a fresh Ed25519 host key per sandbox, so its certificate is a real one. */
async function sandboxResultOf(
  kind: SandboxCommandKind,
  payload: SimPayload,
  labels: Record<string, string>,
) {
  switch (kind) {
    case 'sandbox.create': {
      const { publicKey } = generateKeyPairSync('ed25519');
      return {
        sandboxId: String(payload.sandboxId),
        hostPublicKey: await sshPublicKeyLine(publicKey, `${String(payload.sandboxId)}-host`),
        readyMs: SIM_DELAYS_MS[kind],
        identityRebound: !(
          payload.fromSnapshot?.memory === true && labels[SIM_KEEP_IDENTITY_LABEL] === 'true'
        ),
      };
    }
    case 'sandbox.certify':
      return {
        sandboxId: String(payload.sandboxId),
        expiresAt: await certificateExpiry(payload.hostCertificate),
      };
    case 'sandbox.delete':
      return { sandboxId: String(payload.sandboxId), removed: true };
    case 'sandbox.snapshot':
      return {
        sandboxId: String(payload.sandboxId),
        snapshotId: String(payload.snapshotId),
        sizeBytes: payload.memory ? 96 * 2 ** 20 : 24 * 2 ** 20,
        memory: payload.memory === true,
      };
    case 'sandbox.snapshot-delete':
      return { snapshotId: String(payload.snapshotId), removed: true };
    case 'volume.create':
    case 'volume.resize':
      return { volumeId: String(payload.volumeId), sizeBytes: Number(payload.sizeGiB ?? 0) * 2 ** 30 };
    case 'volume.delete':
      return { volumeId: String(payload.volumeId), removed: true };
  }
}

function resultOf(kind: RuntimeCommandKind, payload: SimPayload, cached: boolean, address: string) {
  switch (kind) {
    case 'image.fetch': {
      const bytes = Number(payload.image?.disk?.sizeBytes ?? 0);
      return { imageId: String(payload.image?.imageId), cached, bytes, cacheBytes: bytes };
    }
    case 'instance.create':
      return {
        instanceId: String(payload.instanceId),
        diskBytes: Number(payload.shape?.diskGiB ?? 0) * 2 ** 30,
      };
    case 'instance.start':
      return { instanceId: String(payload.instanceId), address, sshPort: null, bootMs: SIM_DELAYS_MS[kind] };
    case 'instance.stop':
      return { instanceId: String(payload.instanceId), forced: false };
    case 'instance.resize':
      return { instanceId: String(payload.instanceId), diskGiB: Number(payload.diskGiB) };
    case 'instance.delete':
      return { instanceId: String(payload.instanceId), removed: true };
  }
}

/** A private address for a simulated guest, the same for an instance on every boot. */
function simulatedAddress(instanceId: string): string {
  let hash = 0;
  for (const char of instanceId) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return `10.${(hash >>> 16) & 255}.${(hash >>> 8) & 255}.${Math.max(2, hash & 255)}`;
}

/** The job: completes the command as the node would have (which wakes its workflow). */
export async function simRuntimeJob(context: JobContext): Promise<void> {
  const commandId = String(context.payload.commandId ?? '');
  await context.db.transaction().execute(async (trx) => {
    const command = await lockCommand(trx, commandId);
    if (!command || command.state !== 'queued' || !isSimKind(command.kind)) return;
    const node = await nodeWithDriver(trx, command.node_id);
    if (!node) return;
    const now = context.now();
    const payload = command.payload as SimPayload;
    const failing = node.labels[SIM_FAIL_LABEL] === command.kind;
    // The image is in the node's cache when a fetch of it succeeded there before.
    const cached =
      command.kind === 'image.fetch' &&
      (await imageFetchedOn(trx, command.node_id, String(payload.image?.imageId ?? '')));
    await advanceCommand(trx, command.node_id, command.id, {
      state: failing ? 'failed' : 'succeeded',
      at: now,
      exitCode: failing ? 1 : 0,
      stdout: '',
      stderr: failing ? `simulated failure of ${command.kind}` : '',
      result: failing
        ? null
        : isSandboxCommandKind(command.kind)
          ? await sandboxResultOf(command.kind, payload, node.labels)
          : resultOf(command.kind, payload, cached, simulatedAddress(String(payload.instanceId ?? ''))),
      error: failing ? `simulated failure of ${command.kind} (node label ${SIM_FAIL_LABEL})` : null,
    });
  });
}
