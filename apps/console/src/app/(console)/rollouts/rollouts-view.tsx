'use client';
/**
 * Rollouts of bcd releases (docs/rollouts.md): every rollout, newest first, with its state, its
 * progress and how long it has run; Details shows each wave and each node's state, update workflow,
 * timings and error, all kept live by the rollout's events. Pause, Resume and Abort each ask first
 * and appear only where the rollout's state allows them and Better IAM says the person may; the API
 * still decides the call, and a refusal is shown in place.
 */
import { useEffect, useState } from 'react';
import {
  createRolloutsView,
  describeRollout,
  elapsed,
  isRolloutActionAllowed,
  isRolloutFilter,
  ROLLOUT_ACTIONS,
  ROLLOUT_FILTERS,
  rolloutQuestion,
  type Rollout,
  type RolloutAction,
  type RolloutFilter,
  type RolloutsView as View,
} from '@better-compute/console-kit';
import { useAction, useDetail, useList, usePermission, useStore } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import {
  ConfirmButton,
  ErrorNote,
  IdRef,
  PagedTable,
  StateFilter,
  useNodeNames,
  useNow,
  usePoolNames,
  when,
} from '@/components/ui';

const FILTER_LABELS: Record<RolloutFilter, string> = {
  all: 'All',
  running: 'Running',
  paused: 'Paused',
  aborted: 'Aborted',
  completed: 'Completed',
};
const ACTION_LABELS: Record<RolloutAction, { label: string; confirm: string; done: string }> = {
  pause: { label: 'Pause', confirm: 'Pause rollout', done: 'Paused' },
  resume: { label: 'Resume', confirm: 'Resume rollout', done: 'Resumed' },
  abort: { label: 'Abort', confirm: 'Abort rollout', done: 'Aborted' },
};

export function RolloutsView() {
  const { client, live, session } = useConsole();
  const [view] = useState(() => createRolloutsView(client, { tenantId: session.tenantId }));
  const [selected, setSelected] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const filter = useStore(view.filter);
  const state = useList(view.list);
  const now = useNow();
  const poolNames = usePoolNames(live);
  const nodeNames = useNodeNames(live);
  // Every change of a rollout has its event: the row (and its open details) is read again.
  useEffect(() => (live ? view.connect(live) : undefined), [live, view]);
  return (
    <>
      <h1>Rollouts</h1>
      <p className="note">
        Signed bcd releases reaching the fleet in waves. A wave whose failed nodes pass the failure budget
        pauses the rollout before the next wave starts; a node that does not come back healthy returns to its
        old version by itself.
      </p>
      <StateFilter
        label="Filter rollouts"
        value={filter}
        filters={ROLLOUT_FILTERS}
        labels={FILTER_LABELS}
        isFilter={isRolloutFilter}
        onChange={(next) => void view.setFilter(next)}
      />
      {done ? <p role="status">{done}</p> : null}
      <PagedTable
        state={state}
        caption="Rollouts"
        columns={['Rollout', 'State', 'Progress', 'Started', 'Actions']}
        empty={filter === 'all' ? 'No rollouts.' : `No ${filter} rollouts.`}
        onMore={() => void view.list.loadMore()}
        row={(rollout) => (
          <RolloutRow
            key={rollout.id}
            view={view}
            rollout={rollout}
            now={now}
            poolNames={poolNames}
            open={selected === rollout.id}
            onDetails={() => setSelected(selected === rollout.id ? null : rollout.id)}
            onDone={setDone}
          />
        )}
      />
      {selected ? (
        <Details key={selected} view={view} rolloutId={selected} now={now} nodeNames={nodeNames} />
      ) : null}
    </>
  );
}

function RolloutRow({
  view,
  rollout,
  now,
  poolNames,
  open,
  onDetails,
  onDone,
}: {
  view: View;
  rollout: Rollout;
  now: number;
  poolNames: ReadonlyMap<string, string>;
  open: boolean;
  onDetails: () => void;
  onDone: (text: string) => void;
}) {
  const text = describeRollout(rollout);
  const took = elapsed({ startedAt: rollout.createdAt, finishedAt: rollout.finishedAt }, now);
  return (
    <tr data-rollout={rollout.id}>
      <td>
        <IdRef id={rollout.id} />
        <br />
        <IdRef id={rollout.releaseId} name={`bcd ${rollout.version}`} /> to{' '}
        {/* A pool is named; a list of nodes or a selector reads as describeRollout says it. */}
        {rollout.target.poolId ? (
          <>
            pool <IdRef id={rollout.target.poolId} name={poolNames.get(rollout.target.poolId)} />
          </>
        ) : (
          text.target
        )}
      </td>
      <td>
        <span data-state={rollout.state}>{rollout.state}</span>
        {text.reason ? (
          <>
            <br />
            <span className="note" data-reason="">
              {text.reason}
            </span>
          </>
        ) : null}
      </td>
      <td>
        <span data-progress="">{text.progress}</span>
        <br />
        <span className="note" data-nodes="">
          {text.nodes}
        </span>
      </td>
      <td>
        {when(rollout.createdAt)}
        {took ? (
          <span className="note">{took.running ? `, running ${took.text}` : `, took ${took.text}`}</span>
        ) : null}
      </td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            aria-expanded={open}
            aria-label={`${open ? 'Hide details' : 'Details'} of ${rollout.id}`}
            onClick={onDetails}
          >
            {open ? 'Hide details' : 'Details'}
          </button>
          <Steering view={view} rollout={rollout} onDone={onDone} />
        </div>
      </td>
    </tr>
  );
}

/**
 * Pause, Resume and Abort: a button only where the state allows the action and Better IAM says yes.
 * While IAM has not answered, nothing shows; a person whose roles do not allow it sees a note instead.
 */
function Steering({
  view,
  rollout,
  onDone,
}: {
  view: View;
  rollout: Rollout;
  onDone: (text: string) => void;
}) {
  const { permissions } = useConsole();
  const allowed = ROLLOUT_ACTIONS.filter((action) => isRolloutActionAllowed(rollout, action));
  const pause = usePermission(
    permissions,
    allowed.includes('pause') ? view.actionOf(rollout.id, 'pause') : null,
  );
  const resume = usePermission(
    permissions,
    allowed.includes('resume') ? view.actionOf(rollout.id, 'resume') : null,
  );
  const abort = usePermission(
    permissions,
    allowed.includes('abort') ? view.actionOf(rollout.id, 'abort') : null,
  );
  const may: Record<RolloutAction, boolean | undefined> = { pause, resume, abort };
  const steer = useAction(async (action: RolloutAction) => {
    const answer = await view.steer(rollout.id, action);
    onDone(`${ACTION_LABELS[action].done} ${answer.id}: it is ${answer.state}.`);
    return answer;
  });
  const refused = allowed.some((action) => may[action] === false);
  return (
    <>
      {allowed
        .filter((action) => may[action] === true)
        .map((action) => (
          <ConfirmButton
            key={action}
            label={ACTION_LABELS[action].label}
            title={`${ACTION_LABELS[action].label} ${rollout.id}`}
            disabled={steer.pending}
            question={rolloutQuestion(rollout, action)}
            confirmLabel={ACTION_LABELS[action].confirm}
            onConfirm={() => steer.run(action)}
          />
        ))}
      {refused ? (
        <span className="note" data-no-steering="">
          Your roles do not allow steering rollouts.
        </span>
      ) : null}
      <ErrorNote error={steer.error} />
    </>
  );
}

/** One rollout's waves and nodes, with their states and timings, live while the panel is open. */
function Details({
  view,
  rolloutId,
  now,
  nodeNames,
}: {
  view: View;
  rolloutId: string;
  now: number;
  nodeNames: ReadonlyMap<string, string>;
}) {
  const [store, setStore] = useState<ReturnType<View['details']> | null>(null);
  useEffect(() => {
    const opened = view.details(rolloutId);
    setStore(opened);
    return () => opened.close();
  }, [view, rolloutId]);
  return store ? <DetailsBody store={store} rolloutId={rolloutId} now={now} nodeNames={nodeNames} /> : null;
}

function DetailsBody({
  store,
  rolloutId,
  now,
  nodeNames,
}: {
  store: ReturnType<View['details']>;
  rolloutId: string;
  now: number;
  nodeNames: ReadonlyMap<string, string>;
}) {
  const state = useDetail(store);
  const rollout = state.data;
  return (
    <section aria-labelledby="rollout-details" data-details={rolloutId}>
      {/* The id beside the heading, not in it: the section's name stays "Rollout details". */}
      <h2 id="rollout-details">Rollout details</h2>
      <p>
        <IdRef id={rolloutId} />
      </p>
      <ErrorNote error={state.error} />
      {rollout ? (
        <>
          <dl>
            <dt>Release</dt>
            <dd>
              <IdRef id={rollout.releaseId} name={`bcd ${rollout.version}`} />
            </dd>
            <dt>State</dt>
            <dd data-detail-state={rollout.state}>{rollout.state}</dd>
            <dt>Gate</dt>
            <dd>
              up to {rollout.failureBudget} failed node(s) per wave; each node has{' '}
              {rollout.healthTimeoutSeconds} s to come back healthy
            </dd>
          </dl>
          {rollout.waves.map((wave) => {
            const took = elapsed(wave, now);
            return (
              <section key={wave.index} data-wave={wave.index} aria-label={`Wave ${wave.index + 1}`}>
                <h3>
                  Wave {wave.index + 1} ({wave.size}): <span data-wave-state={wave.state}>{wave.state}</span>
                  {took ? (
                    <span className="note">
                      {' '}
                      {took.running ? `running ${took.text}` : `took ${took.text}`}
                    </span>
                  ) : null}
                </h3>
                <table>
                  <caption className="skip">Nodes of wave {wave.index + 1}</caption>
                  <thead>
                    <tr>
                      <th scope="col">Node</th>
                      <th scope="col">State</th>
                      <th scope="col">Update workflow</th>
                      <th scope="col">Started</th>
                      <th scope="col">Time</th>
                      <th scope="col">Error</th>
                    </tr>
                  </thead>
                  <tbody>
                    {wave.nodes.map((node) => {
                      const nodeTook = elapsed(node, now);
                      return (
                        <tr key={node.nodeId} data-node={node.nodeId}>
                          <td>
                            <IdRef id={node.nodeId} name={nodeNames.get(node.nodeId)} />
                          </td>
                          <td data-node-state={node.state}>{node.state}</td>
                          <td>{node.workflowId ? <IdRef id={node.workflowId} /> : '—'}</td>
                          <td>{when(node.startedAt)}</td>
                          <td data-took="">{nodeTook ? nodeTook.text : '—'}</td>
                          <td>{node.error ?? ''}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </section>
            );
          })}
        </>
      ) : state.status === 'error' ? null : (
        <p aria-busy="true">Loading the rollout…</p>
      )}
    </section>
  );
}
