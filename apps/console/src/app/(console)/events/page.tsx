'use client';
/** Events: what the live stream delivers as it happens, and the tenant's history page by page. */
import { useState } from 'react';
import { ListStore, type ComputeEvent, type LiveConsole } from '@better-compute/console-kit';
import { useList, useStore } from '@better-compute/console-kit/react';
import type { CallOutput } from '@better-compute/client';
import { useConsole } from '@/components/console-context';
import { PagedTable, when } from '@/components/ui';

type StoredEvent = CallOutput<'events.list'>['items'][number];

export default function EventsPage() {
  const { live } = useConsole();
  return (
    <>
      <h1>Events</h1>
      {live ? <Events live={live} /> : <p aria-busy="true">Loading…</p>}
    </>
  );
}

function subjectOf(event: { subject: { type: string; id: string | null } }): string {
  return event.subject.id ? `${event.subject.type}/${event.subject.id}` : event.subject.type;
}

function Events({ live }: { live: LiveConsole }) {
  const { client } = useConsole();
  const recent = useStore(live.events);
  const [history] = useState(
    () =>
      new ListStore<StoredEvent>({
        load: (cursor) => client.events.list({ limit: 50, ...(cursor ? { cursor } : {}) }),
        insertAt: 'end',
      }),
  );
  const historyState = useList(history);
  return (
    <>
      <h2>As they happen</h2>
      {recent.length === 0 ? (
        <p className="note">Nothing yet since this page opened; events appear here as they are committed.</p>
      ) : (
        <table>
          <caption className="skip">Events since this page opened</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Type</th>
              <th scope="col">Subject</th>
              <th scope="col">Actor</th>
            </tr>
          </thead>
          <tbody>
            {recent.map((event: ComputeEvent) => (
              <tr key={event.id} data-event={event.type}>
                <td>{when(event.occurredAt)}</td>
                <td>
                  <code>{event.type}</code>
                </td>
                <td>{subjectOf(event)}</td>
                <td>{event.actor ?? '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>History, oldest first</h2>
      <PagedTable
        state={historyState}
        caption="Event history"
        columns={['Position', 'Time', 'Type', 'Subject', 'Actor']}
        empty="No events yet."
        onMore={() => void history.loadMore()}
        row={(event) => (
          <tr key={event.id}>
            <td>{event.position}</td>
            <td>{when(event.occurredAt)}</td>
            <td>
              <code>{event.type}</code>
            </td>
            <td>{subjectOf(event)}</td>
            <td>{event.actor ?? '—'}</td>
          </tr>
        )}
      />
    </>
  );
}
