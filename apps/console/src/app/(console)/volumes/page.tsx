'use client';
/**
 * Volumes: persistent sandbox volumes, an agent's memory. Your volumes (or everyone's in the
 * tenant), live; create on a pool (a name and a size, checked before the button enables); Grow to a
 * larger size; Delete after a confirmation that says the data is wiped. The API decides every call.
 * Each volume shows the guest's device path (`/dev/disk/by-id/virtio-<serial>`), its pool by name,
 * and the templates that mount it by name with their mount paths.
 */
import { useEffect, useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import { ListStore, volumeDevicePath } from '@better-compute/console-kit';
import { useAction, useList } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { useVpsPools, VpsPoolField } from '@/components/vps-choices';
import { ConfirmButton, ErrorNote, IdRef, PagedTable } from '@/components/ui';
import { idempotencyKey } from '@/lib/api';

type Volume = CallOutput<'sandboxVolumes.get'>;
type Template = CallOutput<'sandboxTemplates.get'>;
/** Where a template mounts a volume: the template's name, the path, read-only or not. */
interface Mount {
  template: string;
  path: string;
  readOnly: boolean;
}

const NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;
const MAX_GIB = 16_384;

export default function VolumesPage() {
  const { client, live } = useConsole();
  const [everyone, setEveryone] = useState(false);
  const [store, setStore] = useState(() => volumeStore(client, false));
  useEffect(() => setStore(volumeStore(client, everyone)), [client, everyone]);
  useEffect(() => live?.track('sandboxVolume', store), [live, store]);
  const state = useList(store);
  const { pools, poolId, setPoolId, error: poolsError } = useVpsPools();
  const poolNames = new Map(pools.map((pool) => [pool.id, pool.name]));
  const mounts = useMounts(state.items);
  const [name, setName] = useState('');
  const [size, setSize] = useState(10);
  const create = useAction(async () => {
    const made = await client.sandboxVolumes.create({
      poolId,
      name,
      sizeGiB: size,
      idempotencyKey: idempotencyKey(),
    });
    store.upsert(made);
    setName('');
    return made;
  });
  const nameProblem =
    name && !NAME.test(name)
      ? 'Lower-case letters, digits, . _ and -, at most 63, starting with a letter or digit.'
      : '';
  const sizeOk = Number.isInteger(size) && size >= 1 && size <= MAX_GIB;

  function submit(event: FormEvent) {
    event.preventDefault();
    void create.run(undefined);
  }

  return (
    <>
      <h1>Volumes</h1>
      <form className="inline" onSubmit={submit} aria-label="New volume">
        <VpsPoolField choices={{ pools, poolId, setPoolId }} />
        <label>
          Name
          <input name="name" value={name} onChange={(e) => setName(e.target.value.trim())} size={16} />
        </label>
        <label>
          Size (GiB)
          <input
            name="size"
            type="number"
            min={1}
            max={MAX_GIB}
            value={size}
            onChange={(e) => setSize(Number(e.target.value))}
          />
        </label>
        <button
          type="submit"
          disabled={!poolId || !NAME.test(name) || !sizeOk || create.pending}
          title={nameProblem}
        >
          Create volume
        </button>
        <label>
          <input type="checkbox" checked={everyone} onChange={(e) => setEveryone(e.target.checked)} />{' '}
          Everyone’s volumes
        </label>
      </form>
      {nameProblem ? <p className="note">{nameProblem}</p> : null}
      <ErrorNote error={create.error ?? poolsError} />
      <PagedTable
        state={state}
        caption="Volumes"
        columns={['Volume', 'Pool and node', 'Size', 'State', 'Actions']}
        empty="No volumes."
        onMore={() => void store.loadMore()}
        row={(volume) => (
          <VolumeRow
            key={volume.id}
            volume={volume}
            store={store}
            poolName={poolNames.get(volume.poolId)}
            mounts={mounts.get(volume.id) ?? []}
          />
        )}
      />
    </>
  );
}

function volumeStore(client: ReturnType<typeof useConsole>['client'], all: boolean) {
  return new ListStore<Volume>({
    load: (cursor) => client.sandboxVolumes.list({ all, limit: 50, ...(cursor ? { cursor } : {}) }),
    readOne: (volumeId) => client.sandboxVolumes.get({ volumeId }),
  });
}

/**
 * Each listed volume's mounts, by template name: read from the tenant's templates, again whenever a
 * volume's list of templates changes. Without the right to read templates, none are shown by name.
 */
function useMounts(volumes: readonly Volume[]): Map<string, Mount[]> {
  const { client } = useConsole();
  const [templates, setTemplates] = useState<Template[]>([]);
  const mountedBy = volumes.map((volume) => `${volume.id}:${volume.templateIds.join(',')}`).join(' ');
  const anyMounted = volumes.some((volume) => volume.templateIds.length > 0);
  useEffect(() => {
    if (!anyMounted) return;
    let gone = false;
    client.sandboxTemplates
      .list({ limit: 100 })
      .then((page) => {
        if (!gone) setTemplates(page.items);
      })
      .catch(() => {
        if (!gone) setTemplates([]);
      });
    return () => {
      gone = true;
    };
  }, [client, mountedBy, anyMounted]);
  const mounts = new Map<string, Mount[]>();
  for (const template of templates)
    for (const volume of template.volumes)
      mounts.set(volume.volumeId, [
        ...(mounts.get(volume.volumeId) ?? []),
        { template: template.name, path: volume.path, readOnly: volume.readOnly },
      ]);
  return mounts;
}

function VolumeRow({
  volume,
  store,
  poolName,
  mounts,
}: {
  volume: Volume;
  store: ListStore<Volume>;
  poolName: string | undefined;
  mounts: Mount[];
}) {
  const { client } = useConsole();
  const [growTo, setGrowTo] = useState(volume.sizeGiB * 2);
  const changed = (next: Volume) => {
    store.upsert(next);
    return next;
  };
  const grow = useAction(async () =>
    changed(await client.sandboxVolumes.resize({ volumeId: volume.id, sizeGiB: growTo })),
  );
  const remove = useAction(async () => changed(await client.sandboxVolumes.delete({ volumeId: volume.id })));
  const ready = volume.state === 'ready';
  const larger = Number.isInteger(growTo) && growTo > volume.sizeGiB && growTo <= MAX_GIB;
  return (
    <tr data-volume={volume.id}>
      <td>
        {volume.name}
        <br />
        <IdRef id={volume.id} />
        <br />
        <span className="note">
          Guest device: <code data-device-path>{volumeDevicePath(volume.id)}</code>
        </span>
        {mounts.map((mount) => (
          <div key={mount.template} className="note" data-mount={mount.template}>
            {mount.template} mounts it at <code>{mount.path}</code>
            {mount.readOnly ? ' (read-only)' : ''}
          </div>
        ))}
      </td>
      <td>
        <IdRef id={volume.poolId} name={poolName} />
        <br />
        {volume.nodeId ? <IdRef id={volume.nodeId} /> : <span className="note">not placed yet</span>}
      </td>
      <td>{volume.sizeGiB} GiB</td>
      <td data-state={volume.state}>
        {volume.state}
        {volume.reason ? <span className="note">: {volume.reason}</span> : null}
        {volume.templateIds.length && mounts.length === 0 ? (
          <span className="note"> (mounted by {volume.templateIds.length} template(s))</span>
        ) : null}
      </td>
      <td>
        <div className="row">
          <label>
            Grow to (GiB)
            <input
              name="growTo"
              type="number"
              min={volume.sizeGiB + 1}
              max={MAX_GIB}
              value={growTo}
              onChange={(e) => setGrowTo(Number(e.target.value))}
            />
          </label>
          <button
            type="button"
            className="secondary"
            disabled={!ready || !larger || grow.pending}
            title={larger ? undefined : 'A volume only grows: give a larger size'}
            aria-label={`Grow ${volume.id}`}
            onClick={() => void grow.run(undefined)}
          >
            Grow
          </button>
          <ConfirmButton
            label="Delete"
            title={`Delete ${volume.id}`}
            disabled={!ready || remove.pending}
            question={`Delete the volume ${volume.name} (${volume.id})? Its data is wiped and cannot be brought back.`}
            confirmLabel="Delete volume"
            onConfirm={() => remove.run(undefined)}
          />
        </div>
        <ErrorNote error={grow.error ?? remove.error} />
      </td>
    </tr>
  );
}
