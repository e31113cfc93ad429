'use client';
/**
 * Sandboxes: your sandboxes (or everyone's in the tenant), live, with their lifetime counting down;
 * create from a template, +30 min, a snapshot, delete after asking; the `sandbox exec` command for a
 * shell (OpenSSH through a tunnel, never in the browser). Below, the tenant's templates with their
 * warm pools and volumes (templates.tsx). The page is console-kit's createSandboxesView.
 */
import { useEffect, useState, type FormEvent } from 'react';
import { isComputeClientError } from '@better-compute/client';
import {
  createSandboxesView,
  sandboxCountdown,
  sandboxSecondsLeft,
  type SandboxRow,
  type SandboxesView,
} from '@better-compute/console-kit';
import { useAction, useList, useStore } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { ChoiceField, ConfirmButton, ErrorNote, IdRef, PagedTable } from '@/components/ui';
import { idempotencyKey } from '@/lib/api';
import { Templates } from './templates';

/** Whole seconds left until `iso`, ticking every second; 0 once it has passed. */
function useSecondsLeft(iso: string | null): number | null {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!iso) return;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [iso]);
  return sandboxSecondsLeft(iso, now);
}

export default function SandboxesPage() {
  const { client, live, session } = useConsole();
  // console-kit's view: the scope's sandboxes, the templates, and the calls the page makes.
  const [view] = useState(() => createSandboxesView(client, { tenantId: session.tenantId, idempotencyKey }));
  useEffect(() => {
    void view.load();
  }, [view]);
  useEffect(() => (live ? view.connect(live) : undefined), [live, view]);
  const state = useList(view.sandboxes);
  const templateState = useList(view.templates);
  const scope = useStore(view.scope);
  const rows = new Map(view.rows().map((row) => [row.id, row]));

  const [templateId, setTemplateId] = useState('');
  useEffect(() => {
    if (!templateId && templateState.items[0]) setTemplateId(templateState.items[0].id);
  }, [templateId, templateState.items]);
  const create = useAction(() => view.create(templateId));

  function submit(event: FormEvent) {
    event.preventDefault();
    void create.run(undefined);
  }

  return (
    <>
      <h1>Sandboxes</h1>
      {templateState.status === 'ready' && templateState.items.length === 0 ? (
        <p className="note">No sandbox templates yet: a tenant administrator creates them below.</p>
      ) : null}
      <form className="inline" onSubmit={submit} aria-label="New sandbox">
        <ChoiceField
          label="Template"
          name="template"
          items={templateState.items}
          value={templateId}
          onChange={setTemplateId}
          text={(template) => template.name}
        />
        <button type="submit" disabled={!templateId || create.pending}>
          Create sandbox
        </button>
        <label>
          <input
            type="checkbox"
            checked={scope === 'all'}
            onChange={(e) => void view.setScope(e.target.checked ? 'all' : 'mine')}
          />{' '}
          Everyone’s sandboxes
        </label>
      </form>
      <ErrorNote error={create.error} />
      <PagedTable
        state={state}
        caption="Sandboxes"
        columns={['Sandbox', 'Template', 'State', 'Lifetime', 'Actions']}
        empty="No sandboxes."
        onMore={() => void view.sandboxes.loadMore()}
        row={(sandbox) => <SandboxLine key={sandbox.id} row={rows.get(sandbox.id)!} view={view} />}
      />
      <Templates store={view.templates} />
    </>
  );
}

function SandboxLine({ row, view }: { row: SandboxRow; view: SandboxesView }) {
  const left = useSecondsLeft(row.expiresAt);
  const snapshotsOff = useStore(view.snapshotsOff);
  const extend = useAction(() => view.extend(row.id));
  const snapshot = useAction(() => view.snapshot(row.id));
  const remove = useAction(() => view.remove(row.id));
  const busy = extend.pending || snapshot.pending || remove.pending;
  const snapshotRefusedAsOff =
    isComputeClientError(snapshot.error) && snapshot.error.code === 'INVALID_CONFIG';
  return (
    <tr data-sandbox={row.id}>
      <td>
        <IdRef id={row.id} />
        <br />
        <span className="note">
          {row.warm ? 'from the warm pool' : 'started cold'}
          {row.fromSnapshotId ? `, restored from ${row.fromSnapshotId}` : ''}
        </span>
      </td>
      <td>{row.templateName}</td>
      <td data-state={row.state}>
        {row.state}
        {row.reason ? <span className="note">: {row.reason}</span> : null}
        {!row.identityRebound ? (
          <p className="note" role="note">
            Still answers to its source’s SSH identity: exec waits until the source and sibling restores are
            gone, or the node gives it its own.
          </p>
        ) : null}
      </td>
      <td>{left === null ? '' : <span data-left={left}>{sandboxCountdown(left)}</span>}</td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            disabled={!row.live || busy}
            aria-label={`Extend ${row.id} by 30 minutes`}
            onClick={() => void extend.run(undefined)}
          >
            +30 min
          </button>
          {snapshotsOff ? null : (
            <button
              type="button"
              className="secondary"
              disabled={row.state !== 'running' || busy}
              aria-label={`Snapshot ${row.id}`}
              onClick={() => void snapshot.run(undefined)}
            >
              Snapshot
            </button>
          )}
          <ConfirmButton
            label="Delete"
            title={`Delete ${row.id}`}
            disabled={!row.live || busy}
            question={`Delete ${row.id}? It stops and its disk goes; its snapshots go too unless they were kept.`}
            confirmLabel="Delete sandbox"
            onConfirm={() => remove.run(undefined)}
          />
        </div>
        {row.execCommand ? (
          <p className="note">
            Shell: <code>{row.execCommand}</code>
          </p>
        ) : null}
        {snapshot.result ? <p className="note">Snapshot {snapshot.result.id} is being taken.</p> : null}
        {snapshotsOff ? <p className="note">Snapshots are not configured on this deployment.</p> : null}
        <ErrorNote error={extend.error ?? (snapshotRefusedAsOff ? null : snapshot.error) ?? remove.error} />
      </td>
    </tr>
  );
}
