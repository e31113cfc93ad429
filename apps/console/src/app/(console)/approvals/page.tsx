'use client';
/**
 * Awaiting approval (the console guide: "A delegated call held back for approval shows 'awaiting
 * approval' with the confirmation id"): what the signed-in person's agents asked to run and their
 * delegations hold for the person's confirmation. Pending ones by default, each with the agent, the
 * method, exactly what would run, why it was held and the hour counting down. Approve asks in the
 * browser first, naming what will run; the server takes it only from a session opened with the
 * person's second factor, and any refusal is shown in place with its hint. Decline ends it for good.
 * The page checks nothing in advance: the API decides, and every word from it is rendered as text.
 */
import { useEffect, useRef, useState } from 'react';
import { isComputeClientError, type ComputeClient } from '@better-compute/client';
import {
  CONFIRMATION_FILTERS,
  confirmationSecondsLeft,
  countdownText,
  createConfirmationsView,
  describeConfirmation,
  isConfirmationFilter,
  isApprovable,
  isDeclinable,
  type Confirmation,
  type ConfirmationFilter,
  type ConfirmationsView,
} from '@better-compute/console-kit';
import { useAction, useList, useStore } from '@better-compute/console-kit/react';
import { safeCell } from '@better-compute/core';
import { useConsole } from '@/components/console-context';
import { ConfirmButton, ErrorNote, IdRef, PagedTable, StateFilter, useNow, when } from '@/components/ui';
import { iamCall } from '@/lib/api';

const FILTER_LABELS: Record<ConfirmationFilter, string> = {
  pending: 'Awaiting approval',
  approved: 'Approved, not yet run',
  declined: 'Declined',
  expired: 'Expired',
  consumed: 'Approved and run',
  revoked: 'Revoked',
  all: 'All',
};

/** How a resource of each kind that has a name is read, to name it in its row. */
const RESOURCE_READS: Record<
  string,
  (client: ComputeClient, id: string) => Promise<{ name: string | null }>
> = {
  'compute-project': (client, projectId) => client.projects.get({ projectId }),
  'compute-pool': (client, poolId) => client.pools.get({ poolId }),
  'compute-node': (client, nodeId) => client.nodes.get({ nodeId }),
  'compute-instance': (client, instanceId) => client.instances.get({ instanceId }),
  'compute-site': (client, siteId) => client.sites.get({ siteId }),
};

/**
 * The names of the agents, people and resources the rows name, by id, each read once. A read the
 * API refuses (an agent the person may not look up, a resource gone since) leaves the id unnamed:
 * the row then shows its short id alone. The signed-in person is named by their session.
 */
function useNames(confirmations: readonly Confirmation[]): ReadonlyMap<string, string> {
  const { client, session } = useConsole();
  const [names, setNames] = useState<ReadonlyMap<string, string>>(
    () => new Map([[session.principalId, session.name]]),
  );
  const asked = useRef(new Set<string>());
  useEffect(() => {
    const name = (id: string, read: () => Promise<{ name?: string | null; displayName?: string }>) => {
      if (asked.current.has(id)) return;
      asked.current.add(id);
      read()
        .then((found) => {
          const text = found.displayName ?? found.name;
          if (text) setNames((known) => new Map(known).set(id, safeCell(text)));
        })
        .catch(() => undefined);
    };
    for (const confirmation of confirmations) {
      for (const principalId of [confirmation.agentId, confirmation.personId])
        name(principalId, () => iamCall<{ displayName: string }>('principals/get', { principalId }));
      const { type, id } = confirmation.resource;
      const read = RESOURCE_READS[type];
      if (id && read) name(id, () => read(client, id));
    }
  }, [client, confirmations]);
  return names;
}

/** A resource's kind as a person reads it: `compute-sandbox-template` is a sandbox template. */
const kindText = (type: string) => safeCell(type.replace(/^compute-/, '').replace(/-/g, ' '));

/** What the page last decided, said once above the table (the row itself leaves the pending list). */
type Decided = { confirmation: Confirmation; verb: 'approved' | 'declined' };

export default function ApprovalsPage() {
  const { client, live, session } = useConsole();
  const [view] = useState(() => createConfirmationsView(client, { tenantId: session.tenantId }));
  const [decided, setDecided] = useState<Decided | null>(null);
  const filter = useStore(view.filter);
  const state = useList(view.list);
  const now = useNow();
  const names = useNames(state.items);
  // A confirmation asked for, approved, declined or spent anywhere re-reads its row.
  useEffect(() => live?.track('confirmation', view.tracked), [live, view]);
  return (
    <>
      <h1>Agents awaiting approval</h1>
      <p className="note">
        Your agents&apos; calls that their delegation holds for your confirmation: anything destructive,
        anything above its spend limit, anything touching IAM. Approve only what you mean to run: the
        agent&apos;s retry of exactly this call, with the same idempotency key, then runs once within 15
        minutes. Approving and declining need a session opened with your second factor.
      </p>
      {session.mfa ? null : (
        <p className="note" data-no-second-factor="">
          You signed in without a second factor, so the server will refuse to approve or decline from this
          session. Sign out and sign in again with the code from your authenticator.
        </p>
      )}
      <StateFilter
        label="Filter confirmations"
        value={filter}
        filters={CONFIRMATION_FILTERS}
        labels={FILTER_LABELS}
        isFilter={isConfirmationFilter}
        onChange={(next) => void view.setFilter(next)}
      />
      {decided ? (
        <p role="status" data-decided={decided.verb}>
          {decided.verb === 'approved'
            ? `Approved ${decided.confirmation.id}: the agent's retry with the same input and idempotency key runs once until ${when(decided.confirmation.expiresAt)}.`
            : `Declined ${decided.confirmation.id}: the agent's call never runs.`}
        </p>
      ) : null}
      <PagedTable
        state={state}
        caption="Confirmations"
        columns={['Confirmation', 'What would run', 'Why', 'State', 'Window', 'Actions']}
        empty={
          filter === 'pending'
            ? 'Nothing is awaiting your approval.'
            : `No ${FILTER_LABELS[filter].toLowerCase()} confirmations.`
        }
        onMore={() => void view.list.loadMore()}
        row={(confirmation) => (
          <ConfirmationRow
            key={confirmation.id}
            view={view}
            confirmation={confirmation}
            names={names}
            now={now}
            onDecided={setDecided}
          />
        )}
      />
    </>
  );
}

function ConfirmationRow({
  view,
  confirmation,
  names,
  now,
  onDecided,
}: {
  view: ConfirmationsView;
  confirmation: Confirmation;
  names: ReadonlyMap<string, string>;
  now: number;
  onDecided: (decided: Decided) => void;
}) {
  const approve = useAction(async () => {
    const answer = await view.approve(confirmation.id);
    onDecided({ confirmation: answer, verb: 'approved' });
    return answer;
  });
  const decline = useAction(async () => {
    const answer = await view.decline(confirmation.id);
    onDecided({ confirmation: answer, verb: 'declined' });
    return answer;
  });
  const text = describeConfirmation(confirmation);
  const { resource } = confirmation;
  const agentName = names.get(confirmation.agentId);
  const left = confirmationSecondsLeft(confirmation, now);
  const canApprove = isApprovable(confirmation, now);
  const canDecline = isDeclinable(confirmation, now);
  const busy = approve.pending || decline.pending;
  // Why a button is disabled, for its title: a window that ran out, or the state.
  const why = (allowed: boolean) =>
    allowed ? undefined : left === 0 ? 'Its window is over' : `It is ${text.state}`;
  const error = approve.error ?? decline.error;
  const needsSecondFactor =
    isComputeClientError(error) &&
    error.code === 'ACCESS_DENIED' &&
    error.details?.reason === 'second-factor-required';
  return (
    <tr data-confirmation={text.id}>
      <td>
        <code data-confirmation-id="">{text.id}</code>
        <br />
        <span className="note">asked {when(confirmation.createdAt)}</span>
      </td>
      <td>
        {/* describeConfirmation's `asks`, with the agent, the person and the resource named. */}
        <span className="note" data-asks="">
          Agent <IdRef id={confirmation.agentId} name={names.get(confirmation.agentId)} /> acting for{' '}
          <IdRef id={confirmation.personId} name={names.get(confirmation.personId)} /> (delegation{' '}
          <IdRef id={confirmation.delegationId} />) asks to run
          {resource.id ? (
            <>
              {' '}
              on the {kindText(resource.type)} <IdRef id={resource.id} name={names.get(resource.id)} />
            </>
          ) : null}
          :
        </span>
        <br />
        <strong data-method="">{text.method}</strong>
        {/* Exactly what would run, boxed and wrapped anywhere: JSON has no spaces to break at. */}
        <div className="once">
          <code data-summary="">{text.summary}</code>
        </div>
      </td>
      <td>{text.reason}</td>
      <td data-state={confirmation.state}>{text.state}</td>
      <td>
        {left === null ? (
          <span className="note">
            {confirmation.decidedAt
              ? `decided ${when(confirmation.decidedAt)}`
              : `until ${when(confirmation.expiresAt)}`}
          </span>
        ) : (
          <span
            data-left={left}
            title={`${confirmation.state === 'pending' ? 'Expires unanswered' : 'The retry window closes'} at ${confirmation.expiresAt}`}
          >
            {countdownText(left)}
          </span>
        )}
      </td>
      <td>
        <div className="row">
          <ConfirmButton
            label="Approve"
            title={`Approve ${text.id}`}
            disabled={!canApprove || busy}
            reason={why(canApprove)}
            question={
              <>
                Approve {text.id}? Agent {agentName ? `${agentName} ` : null}
                <code>{confirmation.agentId}</code> may then run this once, within 15 minutes, as you:{' '}
                <code className="once">{text.summary}</code>
              </>
            }
            confirmLabel="Approve"
            onConfirm={() => {
              decline.reset();
              return approve.run(undefined);
            }}
          />
          <button
            type="button"
            className="secondary"
            disabled={!canDecline || busy}
            title={why(canDecline)}
            aria-label={`Decline ${text.id}`}
            onClick={() => {
              approve.reset();
              void decline.run(undefined);
            }}
          >
            Decline
          </button>
        </div>
        <ErrorNote error={error} />
        {needsSecondFactor ? (
          <p className="note" data-second-factor-hint="">
            In the console: sign out, then sign in again with the code from your authenticator.
          </p>
        ) : null}
      </td>
    </tr>
  );
}
