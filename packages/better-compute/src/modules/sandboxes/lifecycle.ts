/**
 * How sandboxes, snapshots and volumes move when their workflows end, in the transaction that
 * ends them. A sandbox's start is two workflows: `sandbox.create` (fetch the image, start it; the
 * node answers the sandbox's host public key), then, once the control plane signed a host
 * certificate for that key, `sandbox.certify`; only then is it ready (running, or warm for its
 * template's pool).
 */
import type { SandboxCommandResults } from '@better-compute/core/runtime-commands';
import type { CatalogEventDraft } from '@better-compute/events';
import { commandResult as resultOfCommand } from '../commands/queries.js';
import type { WorkflowHookContext, WorkflowHooks } from '../workflows/hooks.js';
import { signSandboxCertificate } from './keys.js';
import { type Env, removeSandbox } from './launch.js';
import { moveSandbox, startWorkflow } from './rows.js';
import { commandStep } from '../workflows/service.js';
import type { SandboxDeps } from './settings.js';
import { sandboxDb, type SandboxRow } from './tables.js';
import { volumeEvent } from './volumes.js';

/** A host certificate lives eight days: longer than any sandbox, so a live one is always certified. */
export const HOST_CERT_SECONDS = 8 * 24 * 3600;

export const SANDBOX_WORKFLOW_KINDS = [
  'sandbox.create',
  'sandbox.certify',
  'sandbox.delete',
  'sandbox.snapshot',
  'sandbox.snapshot-delete',
  'volume.create',
  'volume.resize',
  'volume.delete',
] as const;

const envOf = (context: WorkflowHookContext): Env => ({
  db: context.db,
  now: context.now,
  emit: (event: CatalogEventDraft) => context.emit(event),
});

const subjectOf = (context: WorkflowHookContext, key: string) => {
  const value = (context.workflow.input as Record<string, unknown>)[key];
  return typeof value === 'string' ? value : undefined;
};

/** The sandbox the workflow changes, locked; undefined when the workflow is no longer its own. */
async function lockedSandbox(context: WorkflowHookContext): Promise<SandboxRow | undefined> {
  const id = subjectOf(context, 'sandboxId');
  if (!id) return undefined;
  const row = await sandboxDb(context.db)
    .selectFrom('compute.sandboxes')
    .selectAll()
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
  if (!row || row.workflow_id !== context.workflow.id || row.state === 'deleted') return undefined;
  return row;
}

async function commandResult<K extends keyof SandboxCommandResults>(context: WorkflowHookContext, kind: K) {
  const done = [...context.steps].reverse().find((s) => s.commandKind === kind && s.commandId);
  if (!done?.commandId) return null;
  return (await resultOfCommand(context.db, done.commandId)) as Partial<SandboxCommandResults[K]> | null;
}

const reasonOf = (kind: string, error: string) => `${kind} failed: ${error}`.slice(0, 2000);

export function sandboxWorkflowHooks(deps: SandboxDeps): WorkflowHooks {
  async function succeeded(context: WorkflowHookContext): Promise<void> {
    const env = envOf(context);
    const db = sandboxDb(context.db);
    switch (context.workflow.kind) {
      case 'sandbox.create': {
        const row = await lockedSandbox(context);
        if (!row) return;
        // Deleted while it started: the node has it now, so the removal can follow.
        if (row.state === 'deleting') return void (await removeSandbox(env, { ...row, state: 'running' }));
        const result = await commandResult(context, 'sandbox.create');
        if (typeof result?.hostPublicKey !== 'string')
          return void (await moveSandbox(context.db, row, 'failed', context.now, env.emit, {
            reason: 'the node answered no host public key for the sandbox',
          }));
        let certificate: string;
        try {
          certificate = await signSandboxCertificate({
            ca: await deps.ca.get(),
            kind: 'host',
            publicKey: result.hostPublicKey,
            principal: row.id,
            keyId: `host:${row.id}`,
            validAfter: new Date(context.now.getTime() - 60_000),
            validBefore: new Date(context.now.getTime() + HOST_CERT_SECONDS * 1000),
          });
        } catch (error) {
          return void (await moveSandbox(context.db, row, 'failed', context.now, env.emit, {
            reason: reasonOf('host certificate', error instanceof Error ? error.message : String(error)),
          }));
        }
        const workflowId = await startWorkflow(
          env,
          row.node_id!,
          'sandbox.certify',
          { sandboxId: row.id },
          [
            commandStep('install the host certificate', 'sandbox.certify', {
              sandboxId: row.id,
              hostCertificate: certificate,
            }),
          ],
          `certify sandbox ${row.id}`,
        );
        await db
          .updateTable('compute.sandboxes')
          .set({
            host_public_key: result.hostPublicKey,
            identity_rebound: result.identityRebound !== false,
            workflow_id: workflowId,
            updated_at: context.now,
          })
          .where('id', '=', row.id)
          .execute();
        return;
      }
      case 'sandbox.certify': {
        const row = await lockedSandbox(context);
        if (!row) return;
        if (row.state === 'deleting') return void (await removeSandbox(env, { ...row, state: 'running' }));
        const result = await commandResult(context, 'sandbox.certify');
        const certified = result?.expiresAt
          ? new Date(result.expiresAt)
          : new Date(context.now.getTime() + HOST_CERT_SECONDS * 1000);
        const warm = row.owner_id === null;
        await moveSandbox(
          context.db,
          row,
          warm ? 'warm' : 'running',
          context.now,
          env.emit,
          {
            ready_at: context.now,
            host_certificate_expires_at: Number.isNaN(certified.getTime()) ? null : certified,
          },
          'sandbox.ready',
        );
        return;
      }
      case 'sandbox.delete': {
        const row = await lockedSandbox(context);
        if (!row) return;
        await db
          .updateTable('compute.sandbox_snapshots')
          .set({ state: 'deleted', deleted_at: context.now, updated_at: context.now })
          .where('sandbox_id', '=', row.id)
          .where('state', '=', 'deleting')
          .where('keep', '=', false)
          .execute();
        await moveSandbox(context.db, row, 'deleted', context.now, env.emit, {
          deleted_at: context.now,
          host_certificate_expires_at: null,
        });
        return;
      }
      case 'sandbox.snapshot':
      case 'sandbox.snapshot-delete': {
        const id = subjectOf(context, 'snapshotId');
        if (!id) return;
        const snapshot = await db
          .selectFrom('compute.sandbox_snapshots')
          .selectAll()
          .where('id', '=', id)
          .forUpdate()
          .executeTakeFirst();
        if (!snapshot || snapshot.workflow_id !== context.workflow.id) return;
        const taken = context.workflow.kind === 'sandbox.snapshot';
        const result = taken ? await commandResult(context, 'sandbox.snapshot') : null;
        const updated = await db
          .updateTable('compute.sandbox_snapshots')
          .set(
            taken
              ? {
                  state: 'ready',
                  size_bytes: typeof result?.sizeBytes === 'number' ? result.sizeBytes : null,
                  updated_at: context.now,
                }
              : { state: 'deleted', deleted_at: context.now, updated_at: context.now },
          )
          .where('id', '=', id)
          .returningAll()
          .executeTakeFirstOrThrow();
        context.emit({
          type: taken ? 'sandbox-snapshot.ready' : 'sandbox-snapshot.deleted',
          tenantId: updated.tenant_id,
          subject: { type: 'sandboxSnapshot', id },
          data: {
            state: updated.state,
            sandboxId: updated.sandbox_id,
            nodeId: updated.node_id,
            memory: updated.memory,
            keep: updated.keep,
          },
        });
        return;
      }
      case 'volume.create':
      case 'volume.resize':
      case 'volume.delete': {
        const id = subjectOf(context, 'volumeId');
        if (!id) return;
        const volume = await db
          .selectFrom('compute.sandbox_volumes')
          .selectAll()
          .where('id', '=', id)
          .forUpdate()
          .executeTakeFirst();
        if (!volume || volume.workflow_id !== context.workflow.id) return;
        const kind = context.workflow.kind;
        const size = Number(subjectOf(context, 'sizeGiB') ?? volume.size_gib);
        const updated = await db
          .updateTable('compute.sandbox_volumes')
          .set(
            kind === 'volume.delete'
              ? {
                  state: 'deleted',
                  deleted_at: context.now,
                  version: volume.version + 1,
                  updated_at: context.now,
                }
              : { state: 'ready', size_gib: size, version: volume.version + 1, updated_at: context.now },
          )
          .where('id', '=', id)
          .returningAll()
          .executeTakeFirstOrThrow();
        context.emit(
          volumeEvent(
            kind === 'volume.create'
              ? 'sandbox-volume.ready'
              : kind === 'volume.resize'
                ? 'sandbox-volume.resized'
                : 'sandbox-volume.deleted',
            updated,
          ),
        );
        return;
      }
      default:
        return;
    }
  }

  async function failed(context: WorkflowHookContext, error: string): Promise<void> {
    const env = envOf(context);
    const db = sandboxDb(context.db);
    const kind = context.workflow.kind;
    if (kind.startsWith('sandbox.') && kind !== 'sandbox.snapshot' && kind !== 'sandbox.snapshot-delete') {
      const row = await lockedSandbox(context);
      if (!row) return;
      await moveSandbox(context.db, row, 'failed', context.now, env.emit, {
        reason: reasonOf(kind.slice('sandbox.'.length), error),
        host_certificate_expires_at: null,
      });
      return;
    }
    if (kind === 'sandbox.snapshot' || kind === 'sandbox.snapshot-delete') {
      const id = subjectOf(context, 'snapshotId');
      if (!id) return;
      const updated = await db
        .updateTable('compute.sandbox_snapshots')
        .set({
          state: 'failed',
          reason: reasonOf(kind.slice('sandbox.'.length), error),
          updated_at: context.now,
        })
        .where('id', '=', id)
        .where('workflow_id', '=', context.workflow.id)
        .returningAll()
        .executeTakeFirst();
      if (updated)
        context.emit({
          type: 'sandbox-snapshot.failed',
          tenantId: updated.tenant_id,
          subject: { type: 'sandboxSnapshot', id },
          data: {
            state: 'failed',
            sandboxId: updated.sandbox_id,
            nodeId: updated.node_id,
            memory: updated.memory,
            keep: updated.keep,
            reason: updated.reason ?? '',
          },
        });
      return;
    }
    const id = subjectOf(context, 'volumeId');
    if (!id) return;
    // A failed resize leaves the volume as it was; a failed create or delete leaves it failed.
    const updated = await db
      .updateTable('compute.sandbox_volumes')
      .set(
        kind === 'volume.resize'
          ? { state: 'ready', reason: reasonOf('resize', error), updated_at: context.now }
          : {
              state: 'failed',
              reason: reasonOf(kind.slice('volume.'.length), error),
              updated_at: context.now,
            },
      )
      .where('id', '=', id)
      .where('workflow_id', '=', context.workflow.id)
      .returningAll()
      .executeTakeFirst();
    if (updated) context.emit(volumeEvent('sandbox-volume.failed', updated));
  }

  return { succeeded, failed };
}
