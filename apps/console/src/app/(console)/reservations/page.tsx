'use client';
/**
 * Reservations: reserve from a preview, extend, release with a confirmation. The list is the live
 * store: a reservation made or released anywhere appears or changes here without a reload.
 */
import { useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import { describeAction, type LiveConsole, type Reservation } from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import {
  ConfirmButton,
  disabledReason,
  ErrorNote,
  IdRef,
  PagedTable,
  usePoolNames,
  when,
} from '@/components/ui';
import { idempotencyKey } from '@/lib/api';

export default function ReservationsPage() {
  const { live } = useConsole();
  return (
    <>
      <h1>Reservations</h1>
      {live ? <Reservations live={live} /> : <p aria-busy="true">Loading…</p>}
    </>
  );
}

function Reservations({ live }: { live: LiveConsole }) {
  const state = useList(live.reservations);
  const poolNames = usePoolNames(live);
  return (
    <>
      <ReserveForm live={live} />
      <h2>Your tenant’s reservations</h2>
      <PagedTable
        state={state}
        caption="Reservations"
        columns={['Reservation', 'Pool', 'State', 'GPUs', 'Ends', 'Actions']}
        empty="No reservations yet."
        onMore={() => void live.reservations.loadMore()}
        row={(reservation) => (
          <ReservationRow
            key={reservation.id}
            live={live}
            reservation={reservation}
            poolName={poolNames.get(reservation.poolId)}
          />
        )}
      />
    </>
  );
}

type Preview = CallOutput<'capacity.preview'>;

function ReserveForm({ live }: { live: LiveConsole }) {
  const { client, permissions } = useConsole();
  const pools = useList(live.pools);
  const [poolId, setPoolId] = useState('');
  const [gpus, setGpus] = useState(1);
  const [hours, setHours] = useState(1);
  const [preview, setPreview] = useState<Preview | null>(null);
  const [previewError, setPreviewError] = useState<unknown>(null);
  const allowed = usePermission(permissions, describeAction('reservations', 'create'));
  const reserve = useAction(
    (input: { poolId: string; gpus: number; durationSeconds: number }) =>
      client.reservations.create({ ...input, idempotencyKey: idempotencyKey() }),
    live.reservations,
  );
  const chosenPool = poolId || pools.items[0]?.id || '';
  const request = { poolId: chosenPool, gpus, durationSeconds: Math.round(hours * 3600) };
  const valid = chosenPool !== '' && Number.isInteger(gpus) && gpus >= 1 && hours > 0;

  async function runPreview(event: FormEvent) {
    event.preventDefault();
    setPreviewError(null);
    setPreview(null);
    try {
      setPreview(await client.capacity.preview(request));
    } catch (error) {
      setPreviewError(error);
    }
  }

  return (
    <section aria-labelledby="reserve-heading">
      <h2 id="reserve-heading">Reserve GPUs</h2>
      <form className="inline" onSubmit={(event) => void runPreview(event)}>
        <label>
          Pool
          <select
            name="pool"
            value={chosenPool}
            onChange={(e) => {
              setPoolId(e.target.value);
              setPreview(null);
            }}
          >
            {pools.items.map((pool) => (
              <option key={pool.id} value={pool.id}>
                {pool.name} ({pool.id})
              </option>
            ))}
          </select>
        </label>
        <label>
          GPUs
          <input
            name="gpus"
            type="number"
            min={1}
            max={4096}
            value={gpus}
            onChange={(e) => {
              setGpus(Number(e.target.value));
              setPreview(null);
            }}
          />
        </label>
        <label>
          Hours
          <input
            name="hours"
            type="number"
            min={0.02}
            step="any"
            value={hours}
            onChange={(e) => {
              setHours(Number(e.target.value));
              setPreview(null);
            }}
          />
        </label>
        <button type="submit" className="secondary" disabled={!valid}>
          Preview
        </button>
        <button
          type="button"
          disabled={!preview || !valid || allowed !== true || reserve.pending}
          title={!preview ? 'Preview first' : disabledReason(true, '', allowed)}
          onClick={() => void reserve.run(request).then((made) => made && setPreview(null))}
        >
          {preview && !preview.fits ? 'Reserve (queue)' : 'Reserve'}
        </button>
      </form>
      {pools.status === 'ready' && pools.items.length === 0 ? (
        <p className="note">Your tenant has no pools yet; an administrator creates them or offers you one.</p>
      ) : null}
      {preview ? (
        <p role="status" data-testid="preview">
          {preview.fits
            ? `Fits now on ${preview.placement?.map((p) => `${p.nodeId} (GPUs ${p.gpuIndices.join(', ')})`).join('; ')}.`
            : `Does not fit now${preview.reason ? `: ${preview.reason}` : ''}. ${
                preview.earliestStartAt
                  ? `It could start at ${when(preview.earliestStartAt)}`
                  : 'It cannot start on the nodes there are'
              }; ${preview.queuedAhead} queued ahead.`}
        </p>
      ) : null}
      <ErrorNote error={previewError} />
      <ErrorNote error={reserve.error} />
      {reserve.result ? (
        <p role="status">
          Reserved {reserve.result.id} ({reserve.result.state}).
        </p>
      ) : null}
    </section>
  );
}

function ReservationRow({
  live,
  reservation,
  poolName,
}: {
  live: LiveConsole;
  reservation: Reservation;
  poolName: string | undefined;
}) {
  const { client, permissions } = useConsole();
  const open = reservation.state !== 'ended';
  const canRelease = usePermission(
    permissions,
    open ? describeAction('reservations', 'release', reservation.id) : null,
  );
  const canExtend = usePermission(
    permissions,
    open ? describeAction('reservations', 'extend', reservation.id) : null,
  );
  const release = useAction(
    () => client.reservations.release({ reservationId: reservation.id }),
    live.reservations,
  );
  const extend = useAction(
    () => client.reservations.extend({ reservationId: reservation.id, bySeconds: 3600 }),
    live.reservations,
  );
  const why = 'This reservation has ended';
  const question =
    reservation.state === 'queued'
      ? `Cancel the queued reservation ${reservation.id}? It leaves the queue of ${poolName ?? reservation.poolId} and will not start.`
      : `Release reservation ${reservation.id} now? Its ${reservation.gpus} GPU(s) go back to ${poolName ?? reservation.poolId}, and whatever runs on them loses them.`;
  return (
    <tr data-reservation={reservation.id}>
      <td>
        <IdRef id={reservation.id} />
      </td>
      <td>
        <IdRef id={reservation.poolId} name={poolName} />
      </td>
      <td data-state={reservation.state}>
        {reservation.state}
        {reservation.state === 'queued' && reservation.queuePosition
          ? ` (#${reservation.queuePosition})`
          : ''}
        {reservation.endReason ? ` (${reservation.endReason})` : ''}
        {reservation.health === 'degraded' ? ' — degraded' : ''}
      </td>
      <td>{reservation.gpus}</td>
      <td>{when(reservation.endedAt ?? reservation.endsAt)}</td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            disabled={!open || canExtend !== true || extend.pending}
            title={disabledReason(open, why, canExtend) ?? 'Add one hour'}
            aria-label={`Extend ${reservation.id} by one hour`}
            onClick={() => void extend.run(undefined)}
          >
            +1 h
          </button>
          <ConfirmButton
            label={reservation.state === 'queued' ? 'Cancel' : 'Release'}
            title={`${reservation.state === 'queued' ? 'Cancel' : 'Release'} ${reservation.id}`}
            disabled={!open || canRelease !== true || release.pending}
            reason={disabledReason(open, why, canRelease)}
            question={question}
            confirmLabel={reservation.state === 'queued' ? 'Cancel reservation' : 'Release GPUs'}
            onConfirm={() => release.run(undefined)}
          />
        </div>
        <ErrorNote error={release.error ?? extend.error} />
      </td>
    </tr>
  );
}
