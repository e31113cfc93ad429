'use client';
/**
 * Capacity per pool and GPU model, live; a pool's capacity over a chosen period (GPUs reserved and
 * free per hour, console-kit's loadCapacityHistory over usage.list and capacity.get, so the chart's
 * numbers are the API's), redrawn as capacity changes; and the pools the tenant owns or was offered.
 */
import { useEffect, useState } from 'react';
import {
  CAPACITY_PERIODS,
  loadCapacityHistory,
  type CapacityHistory,
  type LiveConsole,
} from '@better-compute/console-kit';
import { useDetail, useList } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { ErrorNote, PagedTable, when } from '@/components/ui';

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
        // Focusable, as PagedTable's: it scrolls sideways on a narrow screen and holds no button.
        <table tabIndex={0}>
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
      {capacity.data && capacity.data.length > 0 ? (
        <CapacityOverTime pools={capacity.data} version={capacity.data} />
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

const PERIOD_NAMES: Record<(typeof CAPACITY_PERIODS)[number], string> = {
  24: 'Last 24 hours',
  168: 'Last 7 days',
  720: 'Last 30 days',
};
const isPeriod = (hours: number): hours is (typeof CAPACITY_PERIODS)[number] =>
  (CAPACITY_PERIODS as readonly number[]).includes(hours);

/**
 * A pool and a period, and its capacity per hour: a column per hour, reserved GPUs (on average over
 * the hour) under free ones. Read again whenever the live capacity changes (`version`).
 */
function CapacityOverTime({
  pools,
  version,
}: {
  pools: readonly { poolId: string; name: string }[];
  version: unknown;
}) {
  const { client, session } = useConsole();
  const [poolId, setPoolId] = useState(pools[0]!.poolId);
  const [hours, setHours] = useState<(typeof CAPACITY_PERIODS)[number]>(24);
  const [history, setHistory] = useState<CapacityHistory | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let gone = false;
    loadCapacityHistory(client, session.tenantId, poolId, hours)
      .then((loaded) => {
        if (gone) return;
        setHistory(loaded);
        setError(null);
      })
      .catch((failed: unknown) => {
        if (!gone) setError(failed);
      });
    return () => {
      gone = true;
    };
  }, [client, session.tenantId, poolId, hours, version]);
  return (
    <section aria-labelledby="capacity-over-time">
      <h2 id="capacity-over-time">Capacity over time</h2>
      <form className="inline" aria-label="Capacity period" onSubmit={(event) => event.preventDefault()}>
        <label>
          Pool
          <select name="pool" value={poolId} onChange={(e) => setPoolId(e.target.value)}>
            {pools.map((pool) => (
              <option key={pool.poolId} value={pool.poolId}>
                {pool.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Period
          <select
            name="period"
            value={hours}
            onChange={(e) => {
              const chosen = Number(e.target.value);
              if (isPeriod(chosen)) setHours(chosen);
            }}
          >
            {CAPACITY_PERIODS.map((period) => (
              <option key={period} value={period}>
                {PERIOD_NAMES[period]}
              </option>
            ))}
          </select>
        </label>
      </form>
      <ErrorNote error={error} />
      {history && history.pool.poolId === poolId ? (
        <CapacityChart history={history} />
      ) : error ? null : (
        <p aria-busy="true">Loading capacity over time…</p>
      )}
    </section>
  );
}

const RESERVED = '#b35900';
const FREE = '#1a7f37';

function CapacityChart({ history }: { history: CapacityHistory }) {
  const { pool, points } = history;
  const width = 720;
  const height = 200;
  const axis = 40;
  const top = Math.max(1, pool.total, ...points.map((p) => p.reservedGpus + p.freeGpus));
  const slot = (width - axis) / Math.max(1, points.length);
  const barWidth = Math.max(1, slot * 0.8);
  const scale = height / top;
  const busiest = points.reduce((most, p) => Math.max(most, p.reservedGpus), 0);
  const summary = `${pool.name} from ${when(history.from)} to now: ${pool.total} GPUs today, at most ${busiest} reserved on average in an hour.`;
  return (
    <figure
      data-capacity-chart={pool.poolId}
      data-from={history.from}
      data-to={history.to}
      data-total={pool.total}
      data-unavailable={pool.unavailable}
    >
      <svg
        viewBox={`0 0 ${width} ${height + 20}`}
        width="100%"
        role="img"
        aria-label={summary}
        style={{ maxWidth: `${width}px`, display: 'block' }}
      >
        <line x1={axis} y1={height} x2={width} y2={height} stroke="currentColor" strokeWidth="1" />
        <text x={axis - 4} y={12} textAnchor="end" fontSize="11" fill="currentColor">
          {top}
        </text>
        <text x={axis - 4} y={height} textAnchor="end" fontSize="11" fill="currentColor">
          0
        </text>
        <text x={axis} y={height + 16} fontSize="11" fill="currentColor">
          {when(history.from)}
        </text>
        <text x={width} y={height + 16} textAnchor="end" fontSize="11" fill="currentColor">
          now
        </text>
        {points.map((point, index) => {
          const x = axis + index * slot + (slot - barWidth) / 2;
          const reservedHeight = point.reservedGpus * scale;
          const freeHeight = point.freeGpus * scale;
          return (
            <g
              key={point.windowStart}
              data-window={point.windowStart}
              data-gpu-seconds={point.gpuSeconds}
              data-seconds={point.seconds}
              data-reserved-gpus={point.reservedGpus}
              data-free-gpus={point.freeGpus}
            >
              <title>
                {`${when(point.windowStart)} to ${when(point.windowEnd)}: ${point.reservedGpus} GPUs reserved, ${point.freeGpus} free on average`}
              </title>
              {reservedHeight > 0 ? (
                <rect
                  x={x}
                  y={height - reservedHeight}
                  width={barWidth}
                  height={Math.max(1, reservedHeight)}
                  fill={RESERVED}
                />
              ) : null}
              {freeHeight > 0 ? (
                <rect
                  x={x}
                  y={height - reservedHeight - freeHeight}
                  width={barWidth}
                  height={freeHeight}
                  fill={FREE}
                  opacity={0.45}
                />
              ) : null}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <ul className="legend">
          <li>
            <span className="swatch" style={{ background: RESERVED }} aria-hidden="true" /> Reserved (GPUs on
            average over each hour, every tenant’s usage you may read)
          </li>
          <li>
            <span className="swatch" style={{ background: FREE, opacity: 0.45 }} aria-hidden="true" /> Free,
            against today’s {pool.total} GPUs ({pool.unavailable} unavailable): the API keeps no history of a
            pool’s size
          </li>
        </ul>
        {history.cutShort ? (
          <p className="note" role="status">
            The period has more usage rows than a chart reads: the chart sums the first ones.
          </p>
        ) : null}
      </figcaption>
    </figure>
  );
}
