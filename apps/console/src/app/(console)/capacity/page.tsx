'use client';
/** Capacity per pool and GPU model, and the pools the tenant owns or was offered. */
import type { LiveConsole } from '@better-compute/console-kit';
import { useDetail, useList } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { ErrorNote, PagedTable } from '@/components/ui';

export default function CapacityPage() {
  const { live } = useConsole();
  return (
    <>
      <h1>Capacity and pools</h1>
      {live ? <Capacity live={live} /> : <p aria-busy="true">Loading…</p>}
    </>
  );
}

function Capacity({ live }: { live: LiveConsole }) {
  const capacity = useDetail(live.capacity);
  const pools = useList(live.pools);
  return (
    <>
      <h2>GPUs</h2>
      <ErrorNote error={capacity.error} />
      {capacity.data ? (
        <table>
          <caption className="skip">GPU capacity per pool</caption>
          <thead>
            <tr>
              {['Pool', 'Model', 'Total', 'Reserved', 'Free', 'Unavailable', 'Queued'].map((column) => (
                <th key={column} scope="col">
                  {column}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {capacity.data.flatMap((pool) => [
              <tr key={pool.poolId} data-pool={pool.poolId}>
                <td>
                  <strong>{pool.name}</strong> <code>{pool.poolId}</code>
                </td>
                <td>all</td>
                <td>{pool.total}</td>
                <td>{pool.reserved}</td>
                <td data-free={pool.free}>{pool.free}</td>
                <td>{pool.unavailable}</td>
                <td>
                  {pool.queuedReservations} ({pool.queuedGpus} GPUs)
                </td>
              </tr>,
              ...pool.models.map((model) => (
                <tr key={`${pool.poolId}/${model.gpuModel}`}>
                  <td />
                  <td>{model.gpuModel}</td>
                  <td>{model.total}</td>
                  <td>{model.reserved}</td>
                  <td>{model.free}</td>
                  <td>{model.unavailable}</td>
                  <td />
                </tr>
              )),
            ])}
          </tbody>
        </table>
      ) : capacity.status === 'loading' || capacity.status === 'idle' ? (
        <p aria-busy="true">Loading capacity…</p>
      ) : null}
      <h2>Pools</h2>
      <PagedTable
        state={pools}
        caption="Pools"
        columns={['Pool', 'Class', 'Driver', 'State', 'Access', 'Offered to']}
        empty="No pools yet."
        onMore={() => void live.pools.loadMore()}
        row={(pool) => (
          <tr key={pool.id}>
            <td>
              <strong>{pool.name}</strong> <code>{pool.id}</code>
            </td>
            <td>{pool.class}</td>
            <td>{pool.driver}</td>
            <td>{pool.state}</td>
            <td>{pool.access}</td>
            <td>
              {[...pool.offeredTo, ...pool.offerPending.map((tenant) => `${tenant} (pending)`)].join(', ') ||
                '—'}
            </td>
          </tr>
        )}
      />
    </>
  );
}
