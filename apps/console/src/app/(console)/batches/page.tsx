'use client';
/**
 * Destructive batches (the console guide's section of that name): the tenant's fleet-wide
 * reimages, wipes and power actions held until enough approvers sign their scope. Pending ones by
 * default, each counting down to the end of its window; Details shows the whole scope by command
 * kind, the approvals and the member commands; Cancel asks first. The page never signs: a browser
 * holds no approver key, so a pending batch shows the `batch approve` command for the approver's
 * own terminal. Every word from the server is rendered as text, never as markup.
 */
import { memo, useEffect, useMemo, useState } from 'react';
import {
  approveCommand,
  BATCH_FILTERS,
  countdownText,
  createBatchesView,
  describeBatch,
  isBatchFilter,
  secondsLeft,
  type Batch,
  type BatchDetails,
  type BatchesView,
  type BatchFilter,
} from '@better-compute/console-kit';
import { useAction, useDetail, useList, usePermission, useStore } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import {
  ConfirmButton,
  disabledReason,
  ErrorNote,
  IdRef,
  PagedTable,
  StateFilter,
  useNow,
  when,
} from '@/components/ui';

const FILTER_LABELS: Record<BatchFilter, string> = {
  pending: 'Pending',
  approved: 'Approved',
  expired: 'Expired',
  cancelled: 'Cancelled',
  all: 'All',
};

export default function BatchesPage() {
  const { client, live, session } = useConsole();
  const [view] = useState(() => createBatchesView(client, { tenantId: session.tenantId }));
  const [selected, setSelected] = useState<string | null>(null);
  const [cancelled, setCancelled] = useState<Batch | null>(null);
  const filter = useStore(view.filter);
  const state = useList(view.list);
  const now = useNow();
  // A batch created, approved or cancelled anywhere re-reads its row (or leaves the filter's list).
  useEffect(() => live?.track('batch', view.tracked), [live, view]);
  return (
    <>
      <h1>Destructive batches</h1>
      <p className="note">
        Fleet-wide reimages, wipes and power actions wait here until enough approvers have signed their scope.
        The console cannot approve: an approver runs the command shown with their own key, which lists the
        whole scope and recomputes its root before signing.
      </p>
      <StateFilter
        label="Filter batches"
        value={filter}
        filters={BATCH_FILTERS}
        labels={FILTER_LABELS}
        isFilter={isBatchFilter}
        onChange={(next) => void view.setFilter(next)}
      />
      {cancelled ? (
        <p role="status">
          Cancelled {cancelled.id}: none of its {cancelled.size} command(s) will run.
        </p>
      ) : null}
      <PagedTable
        state={state}
        caption="Batches"
        columns={['Batch', 'Reason', 'State', 'Approvals', 'Window', 'Actions']}
        empty={filter === 'all' ? 'No batches.' : `No ${filter} batches.`}
        onMore={() => void view.list.loadMore()}
        row={(batch) => (
          <BatchRow
            key={batch.id}
            view={view}
            batch={batch}
            now={now}
            open={selected === batch.id}
            onDetails={() => setSelected(selected === batch.id ? null : batch.id)}
            onCancelled={(answer) => {
              setCancelled(answer);
              if (selected === answer.id) setSelected(null);
            }}
          />
        )}
      />
      {selected ? <Details key={selected} view={view} batchId={selected} now={now} /> : null}
    </>
  );
}

function BatchRow({
  view,
  batch,
  now,
  open,
  onDetails,
  onCancelled,
}: {
  view: BatchesView;
  batch: Batch;
  now: number;
  open: boolean;
  onDetails: () => void;
  onCancelled: (batch: Batch) => void;
}) {
  const { permissions } = useConsole();
  const pending = batch.state === 'pending';
  const canCancel = usePermission(permissions, pending ? view.cancelAction(batch.id) : null);
  const cancel = useAction(async () => {
    const answer = await view.cancel(batch.id);
    onCancelled(answer);
    return answer;
  });
  const text = describeBatch(batch);
  const left = secondsLeft(batch, now);
  const command = approveCommand(batch);
  return (
    <tr data-batch={batch.id}>
      <td>
        <IdRef id={batch.id} />
        <br />
        <span className="note">
          {batch.size} command(s): {text.kinds}
        </span>
      </td>
      <td>
        {text.reason}
        <br />
        {text.agentWarning ? (
          <strong className="error" role="note" data-agent-warning="">
            {text.proposedBy}
          </strong>
        ) : (
          <span className="note">{text.proposedBy}</span>
        )}
      </td>
      <td data-state={batch.state}>{batch.state}</td>
      <td>
        {batch.approvals.length} of {batch.approvalsNeeded}
      </td>
      <td>
        {left === null ? (
          <span className="note">
            {batch.state === 'approved'
              ? `approved ${when(batch.approvedAt)}`
              : `ended ${when(batch.endedAt)}`}
          </span>
        ) : (
          <span data-left={left} title={`The window closes at ${batch.notAfter}`}>
            {countdownText(left)}
          </span>
        )}
      </td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            aria-expanded={open}
            aria-label={`Details of ${batch.id}`}
            onClick={onDetails}
          >
            {open ? 'Hide details' : 'Details'}
          </button>
          <ConfirmButton
            label="Cancel"
            title={`Cancel ${batch.id}`}
            disabled={!pending || canCancel !== true || cancel.pending}
            reason={disabledReason(pending, `This batch is ${batch.state}`, canCancel)}
            question={`Cancel the batch ${batch.id}? None of its ${batch.size} command(s) will run, and approvers can no longer approve it.`}
            confirmLabel="Cancel batch"
            onConfirm={() => cancel.run(undefined)}
          />
        </div>
        {command ? (
          <p className="note">
            Approve in your terminal: <code data-approve-command="">{command}</code>
          </p>
        ) : null}
        <ErrorNote error={cancel.error} />
      </td>
    </tr>
  );
}

/** Details of one batch: its scope by kind, root, approvals, and member commands by state. */
function Details({ view, batchId, now }: { view: BatchesView; batchId: string; now: number }) {
  const { live } = useConsole();
  const store = useMemo(() => view.details(batchId), [view, batchId]);
  const state = useDetail(store);
  // Approvals and members change with the batch's events: read the panel again on each.
  useEffect(
    () =>
      live?.track('batch', {
        get loaded() {
          return store.loaded;
        },
        refresh: () => store.refresh(),
        refreshItem: (id) => (id === batchId ? store.refresh() : Promise.resolve()),
      }),
    [live, store, batchId],
  );
  return (
    <section aria-labelledby="batch-details" data-details={batchId}>
      <h2 id="batch-details">Batch {batchId}</h2>
      <button type="button" className="secondary" onClick={() => void store.refresh()}>
        Read again
      </button>
      <ErrorNote error={state.error} />
      {state.data ? (
        <DetailsBody details={state.data} now={now} />
      ) : state.status === 'error' ? null : (
        <p aria-busy="true">Loading the batch and its scope…</p>
      )}
    </section>
  );
}

function DetailsBody({ details, now }: { details: BatchDetails; now: number }) {
  const { batch } = details;
  const left = secondsLeft(batch, now);
  const text = describeBatch(batch);
  return (
    <>
      <p>{text.reason}</p>
      {text.agentWarning ? (
        <p className="error" role="note" data-agent-warning="">
          <strong>{text.proposedBy}</strong>
        </p>
      ) : (
        <p className="note">{text.proposedBy}</p>
      )}
      {details.warnings.map((warning) => (
        <p key={warning} className="error" role="alert">
          {warning}
        </p>
      ))}
      <dl>
        <dt>Scope root</dt>
        <dd>
          <code data-root="">{batch.root}</code> over {batch.size} entries (trust domain{' '}
          <code>{batch.trustDomain}</code>, approver set epoch {batch.epoch})
        </dd>
        <dt>State</dt>
        <dd>
          {batch.state}
          {left === null ? '' : `, ${countdownText(left)} (until ${when(batch.notAfter)})`}
        </dd>
      </dl>

      <ScopeAndMembers details={details} />
    </>
  );
}

/**
 * The scope, approvals and members: up to 20,000 entries, so kept apart from the countdown, which
 * renders every second, and drawn again only when the details are read again.
 */
const ScopeAndMembers = memo(function ScopeAndMembers({ details }: { details: BatchDetails }) {
  const { batch } = details;
  return (
    <>
      <h3>Scope by command kind</h3>
      {details.groups.map((group) => (
        <details key={group.kind} open={group.count <= 100} data-kind={group.kind}>
          <summary>
            {group.kind} ×{group.count}
            {group.summary ? `: ${group.summary}` : ': a kind this console does not know'}
          </summary>
          <ul>
            {group.entries.map((entry) => (
              <li key={entry.index} data-index={entry.index}>
                <code>{entry.subject}</code>: {entry.payload}
                {entry.unbound ? (
                  <strong> (admits any payload: approvers must allow unbound leaves)</strong>
                ) : null}
              </li>
            ))}
          </ul>
        </details>
      ))}

      <h3>Approvals</h3>
      {details.approvals.length === 0 ? (
        <p className="note">No approvals yet; {batch.approvalsNeeded} needed.</p>
      ) : (
        <table>
          <caption className="skip">Approvals</caption>
          <thead>
            <tr>
              <th scope="col">Key id</th>
              <th scope="col">Approver</th>
              <th scope="col">Time</th>
            </tr>
          </thead>
          <tbody>
            {details.approvals.map((approval) => (
              <tr key={approval.kid}>
                <td>
                  <code>{approval.kid}</code>
                </td>
                <td>{approval.approver}</td>
                <td>{when(approval.at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h3>Member commands</h3>
      {details.members.length === 0 ? <p className="note">No member commands.</p> : null}
      {details.members.map((group) => (
        <details key={group.state} open={group.count <= 100} data-member-state={group.state}>
          <summary>
            {group.state} ({group.count})
          </summary>
          <ul>
            {group.commands.map((member) => (
              <li key={member.commandId}>
                <code>{member.commandId}</code> {member.kind} on <code>{member.nodeId}</code>
                {member.error ? <span className="note">: {member.error}</span> : null}
              </li>
            ))}
          </ul>
        </details>
      ))}
    </>
  );
});
