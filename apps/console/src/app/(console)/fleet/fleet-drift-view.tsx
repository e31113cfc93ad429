'use client';
/**
 * Fleet drift (docs/fleet.md): whether the live fleet is still what the last `fleet apply` left, as
 * `fleet status` answers it (each drifted object, and each field with its value in the applied
 * document and its live value), when the fleet.drift job last looked, and the fleet's events, kept
 * live by them. The page applies nothing: a person applies a reviewed plan from the CLI, whose
 * commands it shows as text. Who may not read the fleet sees "platform operators only", not an error.
 */
import { useEffect, useState } from 'react';
import {
  createFleetDriftView,
  describeDriftChange,
  describeFleetEvent,
  fleetCommands,
  nextCheckDue,
  type FleetDriftView as View,
  type FleetStatus,
  type LiveConsole,
} from '@better-compute/console-kit';
import { useDetail, useStore } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { ErrorNote, IdRef, useNodeNames, usePoolNames, when } from '@/components/ui';

const STATE_WORDS: Record<FleetStatus['drift']['state'], string> = {
  converged: 'In sync: the live fleet is what the last apply left.',
  drifted: 'Drifted: the live fleet moved away from the last apply.',
  unknown: 'Unknown: no fleet document has been applied, so there is nothing to compare with.',
};

/** What a person who may not read the fleet sees: who may, and nothing to press. */
export function OperatorsOnly() {
  return (
    <section aria-labelledby="operators-only" data-operators-only="">
      <h2 id="operators-only">Platform operators only</h2>
      <p>
        Fleet drift is shown to the platform&apos;s operators: the fleet methods are decided on{' '}
        <code>compute:fleet:admin</code>, which only the root tenant&apos;s administrators hold. Ask one of
        them whether the fleet is what its document says.
      </p>
    </section>
  );
}

export function FleetDriftView() {
  const { client, live, permissions, session } = useConsole();
  const [view] = useState(() => createFleetDriftView(client, { tenantId: session.tenantId, permissions }));
  const access = useStore(view.access);
  useEffect(() => {
    void view.start();
    return () => view.close();
  }, [view]);
  // Every fleet event (applied, drifted, converged) reads the status and the events again.
  useEffect(() => (live ? view.connect(live) : undefined), [live, view]);
  return (
    <>
      <h1>Fleet drift</h1>
      {access === 'refused' ? (
        <OperatorsOnly />
      ) : access === 'checking' ? (
        <p aria-busy="true">Checking whether you may read the fleet…</p>
      ) : (
        <Drift view={view} live={live} />
      )}
    </>
  );
}

function Drift({ view, live }: { view: View; live: LiveConsole | null }) {
  const { session } = useConsole();
  const state = useDetail(view.status);
  const poolNames = usePoolNames(live);
  const nodeNames = useNodeNames(live);
  const status = state.data;
  const commands = fleetCommands();
  if (!status)
    return state.status === 'error' ? <ErrorNote error={state.error} /> : <p aria-busy="true">Loading…</p>;
  const { applied, drift } = status;
  const due = nextCheckDue(status);
  return (
    <>
      <ErrorNote error={state.error} />
      <section aria-labelledby="drift-verdict">
        <h2 id="drift-verdict">Status</h2>
        <p data-drift-state={drift.state} role="status">
          <strong>{STATE_WORDS[drift.state]}</strong>
          {drift.since ? <> Since {when(drift.since)}.</> : null}
        </p>
        <dl>
          <dt>Last apply</dt>
          <dd data-applied={applied?.id ?? ''}>
            {applied ? (
              <>
                <IdRef id={applied.id} /> at {when(applied.appliedAt)}
                {applied.actor ? (
                  <>
                    {' '}
                    by{' '}
                    <IdRef
                      id={applied.actor}
                      name={applied.actor === session.principalId ? session.name : undefined}
                    />
                  </>
                ) : null}
                <br />
                planHash <code className="wrap">{applied.planHash}</code>
              </>
            ) : (
              'None yet.'
            )}
          </dd>
          <dt>Last drift check</dt>
          <dd data-checked-at={drift.checkedAt ?? ''}>
            {drift.checkedAt ? when(drift.checkedAt) : 'Not yet.'}
            {due ? (
              <span className="note">
                {' '}
                The fleet.drift job looks every minute; next at about {when(new Date(due).toISOString())}.
              </span>
            ) : null}
          </dd>
        </dl>
      </section>
      {drift.changes.length ? (
        <Changes changes={drift.changes} names={{ pools: poolNames, nodes: nodeNames }} />
      ) : null}
      <section aria-labelledby="drift-commands">
        <h2 id="drift-commands">What to do</h2>
        {applied ? (
          <>
            <p>
              The console applies nothing: a person applies a reviewed plan from the command line. To put the
              fleet back to the committed document, plan it, review the changes and apply that plan by its
              hash:
            </p>
            <pre data-command="">{`${commands.plan}\n${commands.apply}`}</pre>
            <p>
              To keep the live changes instead, export the fleet, commit the document, and apply it (its plan
              is empty; the apply makes it the fleet to compare with):
            </p>
            <pre data-command="">{`${commands.exportLive}\n${commands.plan}\n${commands.apply}`}</pre>
          </>
        ) : (
          <>
            <p>
              Drift is measured from the last apply. Export the fleet, commit the document, and apply it once:
            </p>
            <pre data-command="">{`${commands.exportLive}\n${commands.plan}\n${commands.apply}`}</pre>
          </>
        )}
        <p className="note">
          In CI, <code>{commands.status}</code> fails a job while the fleet is drifted.
        </p>
      </section>
      <Events view={view} />
    </>
  );
}

/** The pools and nodes a field's value may name, by id. */
interface Names {
  pools: ReadonlyMap<string, string>;
  nodes: ReadonlyMap<string, string>;
}

/** A bare id as a field's value shows it (JSON of a string): `"pool_01…"`. */
const QUOTED_ID = /^"([a-z]+_[0-9a-z]{26})"$/;

/**
 * A field's value (JSON, as describeDriftChange gives it): a pool or node of the fleet by its name
 * and short id, anything else as the text it is.
 */
function FieldValue({ value, names }: { value: string; names: Names }) {
  const id = QUOTED_ID.exec(value)?.[1];
  const name = id ? (names.pools.get(id) ?? names.nodes.get(id)) : undefined;
  return id && name ? <IdRef id={id} name={name} /> : <code className="wrap">{value}</code>;
}

function Changes({ changes, names }: { changes: FleetStatus['drift']['changes']; names: Names }) {
  return (
    <section aria-labelledby="drift-changes">
      <h2 id="drift-changes">What drifted ({changes.length})</h2>
      <div>
        <table>
          <caption className="skip">Drifted objects and fields</caption>
          <thead>
            <tr>
              <th scope="col">Object</th>
              <th scope="col">Field</th>
              <th scope="col">In the applied document</th>
              <th scope="col">Live now</th>
            </tr>
          </thead>
          <tbody>
            {changes.map((change) => {
              const line = describeDriftChange(change);
              const key = `${change.op}/${change.kind}/${change.key}`;
              const object = (
                <>
                  <span aria-hidden="true">{line.op} </span>
                  {line.object}
                  {line.id ? (
                    <>
                      {' '}
                      <IdRef id={line.id} />
                    </>
                  ) : null}
                  <br />
                  <span className="note">{line.what}</span>
                </>
              );
              if (!line.fields.length)
                return (
                  <tr key={key} data-drift={change.id ?? change.key} data-op={change.op}>
                    <td>{object}</td>
                    <td colSpan={3}>
                      {change.op === '+' ? 'Not in the applied document.' : 'Not in the live fleet.'}
                    </td>
                  </tr>
                );
              return line.fields.map((field, index) => (
                <tr
                  key={`${key}/${field.field}`}
                  data-drift={change.id ?? change.key}
                  data-op={change.op}
                  data-field={field.field}
                >
                  <td>{index === 0 ? object : <span className="skip">{line.object}</span>}</td>
                  <td>
                    <code>{field.field}</code>
                  </td>
                  <td data-document-value="">
                    <FieldValue value={field.documentValue} names={names} />
                  </td>
                  <td data-live-value="">
                    <FieldValue value={field.liveValue} names={names} />
                  </td>
                </tr>
              ));
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function Events({ view }: { view: View }) {
  const state = useDetail(view.events);
  const events = state.data;
  return (
    <section aria-labelledby="drift-events">
      <h2 id="drift-events">Fleet events</h2>
      <p className="note">Applies, and each time the drift check&apos;s verdict turned; newest first.</p>
      <ErrorNote error={state.error} />
      {events === null ? (
        state.status === 'error' ? null : (
          <p aria-busy="true">Loading the events…</p>
        )
      ) : events.length === 0 ? (
        <p>No fleet events yet.</p>
      ) : (
        <ul data-fleet-events="">
          {events.map((event) => (
            <li key={event.id} data-event-type={event.type}>
              {when(event.occurredAt)}: {describeFleetEvent(event)}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
