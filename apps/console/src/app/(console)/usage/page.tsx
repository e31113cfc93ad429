'use client';
/**
 * Usage and quotas of the session's tenant. Usage: GPU-hours by pool or by tenant (a toggle) over a
 * chosen period (the tenant's own, and every tenant's on pools it owns), drawn as inline SVG from the sums of
 * `usage.list` (console-kit's loadUsageSeries, so the chart's numbers are the API's), the rows
 * themselves paged by the server, and Export CSV, the file `usage export --export-format csv`
 * writes for the same period. Reservation events redraw the chart (usage grows while GPUs are held).
 * Quotas: a pool's limits for a tenant (quotas.get), each set or cleared with quotas.set; the
 * server's refusal lands on the field it concerns.
 */
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import {
  describeAction,
  fieldErrorsOf,
  gpuHours,
  ListStore,
  loadUsageSeries,
  seriesGroups,
  usageExportName,
  type Pool,
  type UsageGrouping,
  type UsageRow,
  type UsageSeries,
  type UsageWindow,
} from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { disabledReason, ErrorNote, Field, PagedTable, when } from '@/components/ui';

type Quota = CallOutput<'quotas.get'>['items'][number];

const HOUR = 3_600_000;
/** A period ending at the next full hour: the current hour's window is whole. */
function lastHours(hours: number): { from: string; to: string } {
  const to = Math.ceil(Date.now() / HOUR) * HOUR;
  return { from: new Date(to - hours * HOUR).toISOString(), to: new Date(to).toISOString() };
}
/** GPU-hours to two decimals, or GPU-seconds below a hundredth of an hour (so a short use never reads 0). */
const usageText = (gpuSeconds: number) =>
  gpuSeconds > 0 && gpuSeconds < 36 ? `${gpuSeconds} GPU-seconds` : `${gpuHours(gpuSeconds)} GPU-hours`;
/** Up to 8 pools get a colour of their own; more share them (the legend names each). */
const COLOURS = ['#0b5cad', '#b35900', '#1a7f37', '#8250df', '#bf3989', '#57606a', '#9a6700', '#0e7c86'];

export default function UsagePage() {
  return (
    <>
      <h1>Usage and quotas</h1>
      <Usage />
      <Quotas />
    </>
  );
}

/** Pool names by id, from the live console's pools (names before raw ids). */
function usePoolNames(): { pools: readonly Pool[]; nameOf: (poolId: string) => string } {
  const { live } = useConsole();
  const idle = useMemo(
    () => new ListStore<Pool>({ load: async () => ({ items: [], nextCursor: null }) }),
    [],
  );
  const state = useList(live?.pools ?? idle);
  return useMemo(() => {
    const names = new Map(state.items.map((pool) => [pool.id, pool.name]));
    return { pools: state.items, nameOf: (poolId: string) => names.get(poolId) ?? poolId };
  }, [state.items]);
}

function Usage() {
  const { client, live, permissions, session } = useConsole();
  const { pools, nameOf } = usePoolNames();
  const [draft, setDraft] = useState(() => ({ ...lastHours(24), poolId: '' }));
  const [period, setPeriod] = useState<UsageWindow | null>(null);
  const [series, setSeries] = useState<UsageSeries | null>(null);
  const [grouping, setGrouping] = useState<UsageGrouping>('pool');
  const load = useAction(async (next: UsageWindow) => {
    const answer = await loadUsageSeries(client, session.tenantId, next);
    setPeriod(next);
    setSeries(answer);
    return answer;
  });
  const canExport = usePermission(permissions, describeAction('usage', 'export'));
  const exportCsv = useAction(async (period: UsageWindow) => {
    const exported = await client.usage.export({
      format: 'csv',
      from: period.from,
      to: period.to,
      ...(period.poolId ? { poolId: period.poolId } : {}),
    });
    // The answer's content is the file, byte for byte, as the CLI writes it with --out.
    const url = URL.createObjectURL(new Blob([exported.content], { type: exported.contentType }));
    const link = document.createElement('a');
    link.href = url;
    link.download = usageExportName(period);
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    return exported;
  });
  const rows = useMemo(() => (period ? usageRowStore(client, period) : null), [client, period]);

  // The first period loads by itself.
  useEffect(() => {
    void load.run(periodOf(draft));
  }, []);
  // Usage follows the GPUs held: a reservation's event redraws the shown period (debounced).
  useEffect(() => {
    if (!live || !period) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const redraw = async () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        void load.run(period);
        void rows?.refresh();
      }, 1000);
    };
    const undo = live.track('reservation', { loaded: true, refresh: redraw, refreshItem: redraw });
    return () => {
      clearTimeout(timer);
      undo();
    };
  }, [live, period, rows]);

  const { fields, rest } = fieldErrorsOf(load.error, ['from', 'to', 'poolId']);
  function submit(event: FormEvent) {
    event.preventDefault();
    void load.run(periodOf(draft));
  }
  function preset(hours: number) {
    const next = { ...draft, ...lastHours(hours) };
    setDraft(next);
    void load.run(periodOf(next));
  }
  return (
    <section aria-labelledby="usage">
      <h2 id="usage">GPU-hours by {grouping}</h2>
      <form className="inline" onSubmit={submit} aria-label="Usage period" noValidate>
        <Field
          form="usage"
          name="from"
          label="From (inclusive)"
          value={draft.from}
          onChange={(from) => setDraft({ ...draft, from })}
          error={fields.from}
          size={24}
        />
        <Field
          form="usage"
          name="to"
          label="To (exclusive)"
          value={draft.to}
          onChange={(to) => setDraft({ ...draft, to })}
          error={fields.to}
          size={24}
        />
        <label>
          Pool
          <select
            name="poolId"
            value={draft.poolId}
            onChange={(e) => setDraft({ ...draft, poolId: e.target.value })}
          >
            <option value="">All pools</option>
            {pools.map((pool) => (
              <option key={pool.id} value={pool.id}>
                {pool.name}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={load.pending}>
          Show
        </button>
        <button type="button" className="secondary" onClick={() => preset(24)}>
          Last 24 hours
        </button>
        <button type="button" className="secondary" onClick={() => preset(24 * 7)}>
          Last 7 days
        </button>
      </form>
      <ErrorNote error={rest} />
      {series && period ? (
        <>
          <fieldset className="inline" data-grouping={grouping}>
            <legend>Group GPU-hours by</legend>
            {(['pool', 'tenant'] as const).map((choice) => (
              <label key={choice}>
                <input
                  type="radio"
                  name="grouping"
                  value={choice}
                  checked={grouping === choice}
                  onChange={() => setGrouping(choice)}
                />{' '}
                {choice === 'pool' ? 'Pool' : 'Tenant'}
              </label>
            ))}
          </fieldset>
          <UsageChart
            series={series}
            grouping={grouping}
            nameOf={grouping === 'pool' ? nameOf : (tenantId) => tenantId}
            period={period}
          />
          <div className="row">
            <button
              type="button"
              disabled={canExport !== true || exportCsv.pending}
              title={disabledReason(true, '', canExport)}
              onClick={() => void exportCsv.run(period)}
            >
              Export CSV
            </button>
            <span className="note">
              The file <code>better-compute usage export --export-format csv</code> writes for this period.
            </span>
          </div>
          <ErrorNote error={exportCsv.error} />
          {exportCsv.result ? (
            <p role="status">
              Exported {exportCsv.result.rows} row(s) as {usageExportName(period)}.
            </p>
          ) : null}
        </>
      ) : load.pending ? (
        <p aria-busy="true">Loading usage…</p>
      ) : null}
      {rows ? <UsageRows store={rows} nameOf={nameOf} /> : null}
    </section>
  );
}

/** The form's period as the API takes it; the times are sent as typed, for the server to judge. */
function periodOf(draft: { from: string; to: string; poolId: string }): UsageWindow {
  return { from: draft.from.trim(), to: draft.to.trim(), ...(draft.poolId ? { poolId: draft.poolId } : {}) };
}

function usageRowStore(client: ReturnType<typeof useConsole>['client'], period: UsageWindow) {
  return new ListStore<UsageRow>({
    load: (cursor) =>
      client.usage.list({
        from: period.from,
        to: period.to,
        limit: 50,
        ...(period.poolId ? { poolId: period.poolId } : {}),
        ...(cursor ? { cursor } : {}),
      }),
    idOf: (row) => `${row.windowStart}/${row.tenantId}/${row.poolId}/${row.gpuModel}`,
  });
}

/**
 * Stacked columns, one per hour window, one segment per pool (or tenant); each segment and each
 * legend entry carries its GPU-seconds as the API summed them (data-gpu-seconds) and its group's key
 * (data-pool or data-tenant), and a title people can read.
 */
function UsageChart({
  series,
  grouping,
  nameOf,
  period,
}: {
  series: UsageSeries;
  grouping: UsageGrouping;
  nameOf: (key: string) => string;
  period: UsageWindow;
}) {
  const { groups, windows } = seriesGroups(series, grouping);
  const colourOf = new Map(groups.map((group, index) => [group.key, COLOURS[index % COLOURS.length]!]));
  // The group's key in a data attribute named after the grouping: data-pool="pool_…", data-tenant="acme".
  const keyAttribute = (key: string) => ({ [`data-${grouping}`]: key });
  const totalAttribute = (key: string) => ({ [`data-${grouping}-total`]: key });
  const width = 720;
  const height = 220;
  const axis = 40;
  // One slot per hour of the period (its first hour counted from the hour `from` falls in), so a
  // column stands where its hour is, and hours without usage are gaps.
  const firstHour = Math.floor(Date.parse(period.from) / HOUR) * HOUR;
  const hours = Math.max(1, Math.ceil((Date.parse(period.to) - firstHour) / HOUR));
  const slotOf = (windowStart: string) =>
    Math.min(hours - 1, Math.max(0, Math.floor((Date.parse(windowStart) - firstHour) / HOUR)));
  const top = Math.max(1, ...windows.map((w) => Object.values(w.byGroup).reduce((a, b) => a + b, 0)));
  const slot = (width - axis) / hours;
  const barWidth = Math.max(1, slot * 0.8);
  const scale = (height - 20) / top;
  const summary = `GPU-hours by ${grouping} from ${when(period.from)} to ${when(period.to)}: ${
    groups.length
      ? groups.map((group) => `${nameOf(group.key)} ${usageText(group.gpuSeconds)}`).join(', ')
      : 'none'
  }.`;
  return (
    <figure data-usage-chart={grouping} data-total-gpu-seconds={series.totalGpuSeconds}>
      {windows.length === 0 ? (
        <p className="note">No GPU was held in this period.</p>
      ) : (
        <svg
          viewBox={`0 0 ${width} ${height + 20}`}
          width="100%"
          role="img"
          aria-label={summary}
          style={{ maxWidth: `${width}px`, display: 'block' }}
        >
          <line x1={axis} y1={height} x2={width} y2={height} stroke="currentColor" strokeWidth="1" />
          {/* The tallest column's value, inside the plot: a unit like GPU-seconds is wider than the axis. */}
          <text x={axis + 4} y={12} fontSize="11" fill="currentColor">
            {usageText(top)}
          </text>
          <text x={axis - 4} y={height} textAnchor="end" fontSize="11" fill="currentColor">
            0
          </text>
          <text x={axis} y={height + 16} fontSize="11" fill="currentColor">
            {when(period.from)}
          </text>
          <text x={width} y={height + 16} textAnchor="end" fontSize="11" fill="currentColor">
            {when(period.to)}
          </text>
          {windows.map((w) => {
            let y = height;
            const x = axis + slotOf(w.windowStart) * slot + (slot - barWidth) / 2;
            return (
              <g key={w.windowStart} data-window={w.windowStart}>
                {groups
                  .filter((group) => w.byGroup[group.key])
                  .map((group) => {
                    const seconds = w.byGroup[group.key]!;
                    const h = Math.max(1, seconds * scale);
                    y -= h;
                    return (
                      <rect
                        key={group.key}
                        x={x}
                        y={y}
                        width={barWidth}
                        height={h}
                        fill={colourOf.get(group.key)}
                        {...keyAttribute(group.key)}
                        data-gpu-seconds={seconds}
                      >
                        <title>
                          {`${nameOf(group.key)}, ${when(w.windowStart)} to ${when(w.windowEnd)}: ${usageText(seconds)}`}
                        </title>
                      </rect>
                    );
                  })}
              </g>
            );
          })}
        </svg>
      )}
      <figcaption>
        <ul className="legend">
          {groups.map((group) => (
            <li key={group.key} {...totalAttribute(group.key)} data-gpu-seconds={group.gpuSeconds}>
              <span className="swatch" style={{ background: colourOf.get(group.key) }} aria-hidden="true" />{' '}
              {nameOf(group.key)}: <strong>{usageText(group.gpuSeconds)}</strong>
            </li>
          ))}
        </ul>
        {series.cutShort ? (
          <p className="note" role="status">
            The period has more than {series.rows.toLocaleString()} rows: the chart sums the first ones.
            Choose a shorter period or one pool.
          </p>
        ) : null}
      </figcaption>
    </figure>
  );
}

function UsageRows({ store, nameOf }: { store: ListStore<UsageRow>; nameOf: (poolId: string) => string }) {
  const state = useList(store);
  return (
    <details>
      <summary>Rows, as usage.list answers them</summary>
      <PagedTable
        state={state}
        caption="Usage rows"
        columns={['Window', 'Tenant', 'Pool', 'GPU model', 'GPU-hours']}
        empty="No usage in this period."
        onMore={() => void store.loadMore()}
        row={(row) => (
          <tr key={`${row.windowStart}/${row.tenantId}/${row.poolId}/${row.gpuModel}`}>
            <td>{when(row.windowStart)}</td>
            <td>{row.tenantId}</td>
            <td>{nameOf(row.poolId)}</td>
            <td>{row.gpuModel}</td>
            <td title={`${row.gpuSeconds} GPU-seconds`}>{gpuHours(row.gpuSeconds)}</td>
          </tr>
        )}
      />
    </details>
  );
}

function Quotas() {
  const { client, live, session } = useConsole();
  const { pools, nameOf } = usePoolNames();
  const [poolId, setPoolId] = useState('');
  const [tenant, setTenant] = useState(session.tenantId);
  const [shown, setShown] = useState<{ poolId: string; subjectTenantId: string } | null>(null);
  const [quotas, setQuotas] = useState<Quota[] | null>(null);
  const chosenPool = poolId || pools[0]?.id || '';
  const read = useAction(async (subject: { poolId: string; subjectTenantId: string }) => {
    const answer = await client.quotas.get(subject);
    setShown(subject);
    setQuotas(answer.items);
    return answer;
  });
  // A quota's change is an event of its pool: the shown pool's quotas are read again.
  useEffect(() => {
    if (!live || !shown) return;
    const reread = async (id?: string) => {
      if (id === undefined || id === shown.poolId) await read.run(shown);
    };
    return live.track('pool', { loaded: true, refresh: () => reread(), refreshItem: reread });
  }, [live, shown]);
  const { fields, rest } = fieldErrorsOf(read.error, ['poolId', 'subjectTenantId']);
  return (
    <section aria-labelledby="quotas">
      <h2 id="quotas">Quotas</h2>
      <p className="note">
        The most a tenant may hold at once on a pool: GPUs (queued and active) and reservations. A pool&apos;s
        owner sets them for any tenant.
      </p>
      <form
        className="inline"
        aria-label="Show quotas"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          void read.run({ poolId: chosenPool, subjectTenantId: tenant.trim() });
        }}
      >
        <label>
          Pool
          <select name="poolId" value={chosenPool} onChange={(e) => setPoolId(e.target.value)}>
            {pools.map((pool) => (
              <option key={pool.id} value={pool.id}>
                {pool.name}
              </option>
            ))}
          </select>
        </label>
        <Field
          form="quotas"
          name="subjectTenantId"
          label="Tenant"
          value={tenant}
          onChange={setTenant}
          error={fields.subjectTenantId}
        />
        <button type="submit" disabled={!chosenPool || !tenant.trim() || read.pending}>
          Show quotas
        </button>
      </form>
      <ErrorNote error={rest} />
      {shown && quotas ? (
        <table data-quotas={`${shown.poolId}/${shown.subjectTenantId}`}>
          <caption className="skip">
            Quotas of {shown.subjectTenantId} on {nameOf(shown.poolId)}
          </caption>
          <thead>
            <tr>
              <th scope="col">Resource</th>
              <th scope="col">Used</th>
              <th scope="col">Limit</th>
              <th scope="col">Set</th>
            </tr>
          </thead>
          <tbody>
            {quotas.map((quota) => (
              <QuotaRow
                key={`${quota.poolId}/${quota.tenantId}/${quota.resource}/${quota.version}`}
                quota={quota}
                ownsPool={pools.find((pool) => pool.id === quota.poolId)?.access === 'owner'}
                onSet={(next) =>
                  setQuotas(
                    (current) => current?.map((q) => (q.resource === next.resource ? next : q)) ?? null,
                  )
                }
              />
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

/**
 * One quota with its Save. Only a pool's owner sets quotas on it (the server's rule): on a pool the
 * tenant was offered, Save stays disabled and says so, whatever the person's roles allow.
 */
function QuotaRow({
  quota,
  ownsPool,
  onSet,
}: {
  quota: Quota;
  ownsPool: boolean;
  onSet: (quota: Quota) => void;
}) {
  const { client, permissions } = useConsole();
  const canSet = usePermission(permissions, describeAction('quotas', 'set', quota.poolId));
  const [limit, setLimit] = useState(quota.limit === null ? '' : String(quota.limit));
  const text = limit.trim();
  // A whole number (a negative one too: the server says what a limit must be, on the field).
  const wellFormed = text === '' || /^-?\d+$/.test(text);
  const set = useAction(async () => {
    const answer = await client.quotas.set({
      poolId: quota.poolId,
      subjectTenantId: quota.tenantId,
      resource: quota.resource,
      // Empty clears the quota; anything else goes to the server as a number, for it to judge.
      limit: text === '' ? null : Number(text),
      ...(quota.version > 0 ? { ifVersion: quota.version } : {}),
    });
    onSet(answer);
    return answer;
  });
  const { fields, rest } = fieldErrorsOf(set.error, ['limit']);
  const form = `quota-${quota.resource}`;
  return (
    <tr data-quota={quota.resource}>
      <th scope="row">{quota.resource === 'gpus' ? 'GPUs' : 'Reservations'}</th>
      <td data-used="">{quota.used}</td>
      <td data-limit="">{quota.limit === null ? 'no limit' : quota.limit}</td>
      <td>
        <form
          className="inline"
          aria-label={`Set the ${quota.resource} quota`}
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            void set.run(undefined);
          }}
        >
          <Field
            form={form}
            name="limit"
            label="Limit (empty for none)"
            value={limit}
            onChange={setLimit}
            error={fields.limit}
            size={8}
          />
          <button
            type="submit"
            disabled={!ownsPool || !wellFormed || canSet !== true || set.pending}
            title={disabledReason(
              ownsPool && wellFormed,
              ownsPool
                ? 'The limit is a whole number, or empty for none'
                : 'Only the pool’s owner sets its quotas; this pool was offered to your tenant',
              canSet,
            )}
          >
            Save
          </button>
        </form>
        <ErrorNote error={rest} />
      </td>
    </tr>
  );
}
