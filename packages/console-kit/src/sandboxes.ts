/**
 * The Sandboxes page's view model (the console guide's "Sandboxes"): the session tenant's sandboxes,
 * the person's own or (Everyone's sandboxes) the tenant's, each as a `SandboxRow` with its template's
 * name, whether it came from the warm pool, the snapshot it was restored from and whether it still
 * answers to that snapshot's SSH identity; the templates to create from; and the calls the page
 * makes: create (a fresh `console-…` idempotency key, waiting up to 20 s for the sandbox to leave
 * starting), +30 min, snapshot and delete. A deployment without a snapshot store answers snapshot
 * with INVALID_CONFIG once; the view remembers it, so the page stops offering the button.
 * Every string from the server a person reads passes through `safeCell`.
 */
import { isComputeClientError, type CallOutput, type ComputeClient } from '@better-compute/client';
import { safeCell } from '@better-compute/core';
import { countdownText } from './batches.js';
import type { LiveConsole, TrackedStore } from './live.js';
import { ListStore } from './stores.js';
import { ValueStore } from './subscribable.js';

/** A sandbox as list, create and the other calls answer it (`sandboxes.get` adds its snapshots). */
export type Sandbox = CallOutput<'sandboxes.create'>;
export type SandboxTemplate = CallOutput<'sandboxTemplates.get'>;
export type SandboxSnapshot = CallOutput<'sandboxes.snapshot'>;
/** The person's own sandboxes, or every sandbox of the tenant. */
export type SandboxScope = 'mine' | 'all';

/** How long +30 min extends a sandbox by. */
export const SANDBOX_EXTEND_SECONDS = 1800;
/** How long create waits for the sandbox to leave `starting` before it answers. */
export const SANDBOX_CREATE_WAIT_SECONDS = 20;

/** What a row of the Sandboxes page shows of a sandbox. */
export interface SandboxRow {
  id: string;
  state: Sandbox['state'];
  /** Why it is failed or stopped, as the server says it; null when there is none. */
  reason: string | null;
  templateId: string;
  /** The template's name, or its id while the name is unknown. */
  templateName: string;
  /** Taken from the warm pool (true) or started cold. */
  warm: boolean;
  fromSnapshotId: string | null;
  /**
   * False for a memory restore that still answers to its source's SSH identity: exec waits until
   * the source and sibling restores are gone or the node gives it its own.
   */
  identityRebound: boolean;
  expiresAt: string | null;
  /** Starting or running: +30 min and Delete apply. */
  live: boolean;
  /** The shell command a person runs (OpenSSH through a tunnel, never in the browser); null unless running. */
  execCommand: string | null;
}

/**
 * A sandbox as its row shows it; `templateNames` maps template ids to names.
 *
 * @example
 * sandboxRow(sandbox, new Map([[sandbox.templateId, 'agent']])).templateName; // 'agent'
 */
export function sandboxRow(sandbox: Sandbox, templateNames: ReadonlyMap<string, string>): SandboxRow {
  return {
    id: sandbox.id,
    state: sandbox.state,
    reason: sandbox.reason ? safeCell(sandbox.reason) : null,
    templateId: sandbox.templateId,
    templateName: safeCell(templateNames.get(sandbox.templateId) ?? sandbox.templateId),
    warm: sandbox.warm,
    fromSnapshotId: sandbox.fromSnapshotId,
    identityRebound: sandbox.identityRebound,
    expiresAt: sandbox.expiresAt,
    live: sandbox.state === 'running' || sandbox.state === 'starting',
    execCommand: sandbox.state === 'running' ? `better-compute sandbox exec ${sandbox.id}` : null,
  };
}

/**
 * Whole seconds until `expiresAt` at `now` (0 once passed); null for a sandbox without an end.
 *
 * @example sandboxSecondsLeft('2026-12-07T10:00:30Z', Date.parse('2026-12-07T10:00:00Z')); // 30
 */
export function sandboxSecondsLeft(expiresAt: string | null, now: number): number | null {
  if (!expiresAt) return null;
  const end = Date.parse(expiresAt);
  return Number.isNaN(end) ? 0 : Math.max(0, Math.floor((end - now) / 1000));
}

/**
 * A sandbox's lifetime in words: "1 h 29 min 58 s left", "4 min 07 s left", or "expired" at zero.
 *
 * @example sandboxCountdown(3725); // '1 h 2 min 05 s left'
 */
export function sandboxCountdown(seconds: number): string {
  return seconds <= 0 ? 'expired' : countdownText(seconds);
}

export interface SandboxesViewOptions {
  /** The session's tenant. */
  tenantId: string;
  /** Makes the idempotency key of a create or snapshot; `console-<uuid>` by default. */
  idempotencyKey?: () => string;
}

export interface SandboxesView {
  readonly tenantId: string;
  /** Whose sandboxes the list shows. */
  readonly scope: ValueStore<SandboxScope>;
  /** The sandboxes of the scope, newest first, a page at a time. */
  readonly sandboxes: ListStore<Sandbox>;
  /** The tenant's templates (what create offers, and the rows' template names). */
  readonly templates: ListStore<SandboxTemplate>;
  /** True once the deployment said it has no snapshot store (INVALID_CONFIG). */
  readonly snapshotsOff: ValueStore<boolean>;
  /** The list's rows, with the templates' names as they are now. */
  rows(): SandboxRow[];
  /**
   * Keeps the list and the templates current with the live stream: a sandbox's events re-read it,
   * and the templates too (a warm pool's counts change with its sandboxes, not the template).
   */
  connect(live: Pick<LiveConsole, 'track'>): () => void;
  /** Reads the templates and the scope's sandboxes. */
  load(): Promise<void>;
  /** Shows the person's own sandboxes or the tenant's (reads the list again). */
  setScope(scope: SandboxScope): Promise<void>;
  create(templateId: string): Promise<Sandbox>;
  extend(sandboxId: string): Promise<Sandbox>;
  snapshot(sandboxId: string): Promise<SandboxSnapshot>;
  /** Deletes the sandbox; call it only after the person said yes. */
  remove(sandboxId: string): Promise<Sandbox>;
}

/**
 * The Sandboxes view over a client, with no framework: subscribe to its stores (or use
 * console-kit/react's `useList` and `useStore` on them).
 *
 * @example
 * const view = createSandboxesView(client, { tenantId: session.tenantId });
 * view.sandboxes.subscribe(() => render(view.rows()));
 * await view.load();
 * const made = await view.create(view.templates.get().items[0]!.id);
 * await view.extend(made.id);
 */
export function createSandboxesView(client: ComputeClient, options: SandboxesViewOptions): SandboxesView {
  const { tenantId } = options;
  const key = options.idempotencyKey ?? (() => `console-${crypto.randomUUID()}`);
  const scope = new ValueStore<SandboxScope>('mine');
  const snapshotsOff = new ValueStore(false);
  const sandboxes = new ListStore<Sandbox>({
    load: (cursor) =>
      client.call('sandboxes.list', {
        tenantId,
        all: scope.get() === 'all',
        limit: 50,
        ...(cursor ? { cursor } : {}),
      }),
    readOne: (sandboxId) => client.call('sandboxes.get', { tenantId, sandboxId }),
  });
  const templates = new ListStore<SandboxTemplate>({
    load: (cursor) =>
      client.call('sandboxTemplates.list', { tenantId, limit: 100, ...(cursor ? { cursor } : {}) }),
    readOne: (templateId) => client.call('sandboxTemplates.get', { tenantId, templateId }),
  });
  const templatesOnSandboxEvents: TrackedStore = {
    get loaded() {
      return templates.loaded;
    },
    refresh: () => templates.refresh(),
  };
  const changed = (sandbox: Sandbox) => {
    sandboxes.upsert(sandbox);
    return sandbox;
  };
  return {
    tenantId,
    scope,
    sandboxes,
    templates,
    snapshotsOff,
    rows() {
      const names = new Map(templates.get().items.map((template) => [template.id, template.name]));
      return sandboxes.get().items.map((sandbox) => sandboxRow(sandbox, names));
    },
    connect(live) {
      const undo = [
        live.track('sandbox', sandboxes),
        live.track('sandboxTemplate', templates),
        live.track('sandbox', templatesOnSandboxEvents),
      ];
      return () => undo.forEach((stop) => stop());
    },
    async load() {
      await Promise.all([templates.refresh(), sandboxes.refresh()]);
    },
    async setScope(next) {
      scope.set(next);
      await sandboxes.refresh();
    },
    async create(templateId) {
      return changed(
        await client.call('sandboxes.create', {
          tenantId,
          templateId,
          waitSeconds: SANDBOX_CREATE_WAIT_SECONDS,
          idempotencyKey: key(),
        }),
      );
    },
    async extend(sandboxId) {
      return changed(
        await client.call('sandboxes.extend', { tenantId, sandboxId, bySeconds: SANDBOX_EXTEND_SECONDS }),
      );
    },
    async snapshot(sandboxId) {
      try {
        return await client.call('sandboxes.snapshot', { tenantId, sandboxId, idempotencyKey: key() });
      } catch (error) {
        if (isComputeClientError(error) && error.code === 'INVALID_CONFIG') snapshotsOff.set(true);
        throw error;
      }
    },
    async remove(sandboxId) {
      return changed(await client.call('sandboxes.delete', { tenantId, sandboxId }));
    },
  };
}
