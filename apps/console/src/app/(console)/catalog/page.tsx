'use client';
/**
 * Images and flavors: the VPS catalog. The images the tenant can boot (its own and the platform's)
 * with their channel, and Promote to another channel (testing → stable, or deprecated); registering
 * one is the CLI's `images register`, which hashes the files. A VPS pool's flavors: create (vCPUs,
 * memory, disk, GPUs, checked before the button enables) and Delete after a confirmation; a flavor
 * an instance uses is refused by the API, in its words.
 */
import { useMemo, useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import { describeAction, ListStore } from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { useVpsPools, VpsPoolField } from '@/components/vps-choices';
import { ConfirmButton, disabledReason, ErrorNote, IdRef, PagedTable, when } from '@/components/ui';

type Image = CallOutput<'images.get'>;
type Flavor = CallOutput<'flavors.list'>['items'][number];

const CHANNELS = ['testing', 'stable', 'deprecated'] as const;
const NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;

export default function CatalogPage() {
  return (
    <>
      <h1>Images and flavors</h1>
      <Images />
      <Flavors />
    </>
  );
}

function Images() {
  const { client } = useConsole();
  const [store] = useState(
    () =>
      new ListStore<Image>({
        load: (cursor) => client.images.list({ limit: 50, ...(cursor ? { cursor } : {}) }),
        readOne: (imageId) => client.images.get({ imageId }),
      }),
  );
  const state = useList(store);
  return (
    <section aria-labelledby="images">
      <h2 id="images">Images</h2>
      <p className="note">
        Register an image with <code>better-compute images register --source FILE --disk-format qcow2</code>,
        which hashes its files.
      </p>
      <PagedTable
        state={state}
        caption="Images"
        columns={['Image', 'Disk', 'Channel', 'Actions']}
        empty="No images yet."
        onMore={() => void store.loadMore()}
        row={(image) => <ImageRow key={image.id} image={image} store={store} />}
      />
    </section>
  );
}

function ImageRow({ image, store }: { image: Image; store: ListStore<Image> }) {
  const { client, permissions } = useConsole();
  const canPromote = usePermission(permissions, describeAction('images', 'promote', image.id));
  const [channel, setChannel] = useState<(typeof CHANNELS)[number]>(
    image.channel === 'testing' ? 'stable' : image.channel === 'stable' ? 'deprecated' : 'stable',
  );
  const promote = useAction(async () => {
    const moved = await client.images.promote({ imageId: image.id, channel });
    store.upsert(moved);
    return moved;
  });
  const moves = channel !== image.channel;
  return (
    <tr data-image={image.id}>
      <td>
        <IdRef id={image.id} />
        <br />
        {image.name}{' '}
        <span className="note">
          {image.os}, registered {when(image.createdAt)}
        </span>
      </td>
      <td>
        {image.diskFormat}, {(image.sizeBytes / 2 ** 30).toFixed(1)} GiB
      </td>
      <td data-channel={image.channel}>{image.channel}</td>
      <td>
        <div className="row">
          <label>
            To
            <select
              name="channel"
              value={channel}
              onChange={(e) => setChannel(e.target.value as (typeof CHANNELS)[number])}
            >
              {CHANNELS.map((name) => (
                <option key={name} value={name}>
                  {name}
                </option>
              ))}
            </select>
          </label>
          <button
            type="button"
            className="secondary"
            disabled={!moves || canPromote !== true || promote.pending}
            title={disabledReason(moves, `It is already ${image.channel}`, canPromote)}
            aria-label={`Promote ${image.name} (${image.id})`}
            onClick={() => void promote.run(undefined)}
          >
            Promote
          </button>
        </div>
        <ErrorNote error={promote.error} />
      </td>
    </tr>
  );
}

function Flavors() {
  const { client } = useConsole();
  const { pools, poolId, setPoolId, error: poolsError } = useVpsPools();
  const store = useMemo(
    () =>
      new ListStore<Flavor>({
        load: (cursor) =>
          poolId
            ? client.flavors.list({ poolId, limit: 50, ...(cursor ? { cursor } : {}) })
            : Promise.resolve({ items: [], nextCursor: null }),
      }),
    [client, poolId],
  );
  const state = useList(store);

  const [name, setName] = useState('');
  const [vcpus, setVcpus] = useState(1);
  const [memoryMiB, setMemoryMiB] = useState(1024);
  const [diskGiB, setDiskGiB] = useState(10);
  const [gpus, setGpus] = useState(0);
  const create = useAction(async () => {
    const made = await client.flavors.create({ poolId, name, vcpus, memoryMiB, diskGiB, gpus });
    store.upsert(made);
    setName('');
    return made;
  });
  const whole = (value: number, min: number, max: number) =>
    Number.isInteger(value) && value >= min && value <= max;
  const shapeOk =
    whole(vcpus, 1, 256) &&
    whole(memoryMiB, 128, 4_194_304) &&
    whole(diskGiB, 1, 65_536) &&
    whole(gpus, 0, 16);
  const nameProblem =
    name && !NAME.test(name) ? 'Lower-case letters, digits, . _ and -, starting with a letter or digit.' : '';

  function submit(event: FormEvent) {
    event.preventDefault();
    void create.run(undefined);
  }

  const number = (label: string, value: number, set: (n: number) => void, min: number, max: number) => (
    <label>
      {label}
      <input
        type="number"
        name={label}
        min={min}
        max={max}
        value={value}
        onChange={(e) => set(Number(e.target.value))}
      />
    </label>
  );

  return (
    <section aria-labelledby="flavors">
      <h2 id="flavors">Flavors</h2>
      <form className="inline" onSubmit={submit} aria-label="New flavor">
        <VpsPoolField choices={{ pools, poolId, setPoolId }} />
        <label>
          Name
          <input name="name" value={name} onChange={(e) => setName(e.target.value.trim())} size={12} />
        </label>
        {number('vCPUs', vcpus, setVcpus, 1, 256)}
        {number('Memory (MiB)', memoryMiB, setMemoryMiB, 128, 4_194_304)}
        {number('Disk (GiB)', diskGiB, setDiskGiB, 1, 65_536)}
        {number('GPUs', gpus, setGpus, 0, 16)}
        <button
          type="submit"
          disabled={!poolId || !NAME.test(name) || !shapeOk || create.pending}
          title={nameProblem || (shapeOk ? undefined : 'Whole numbers within the bounds shown')}
        >
          Create flavor
        </button>
      </form>
      {nameProblem ? <p className="note">{nameProblem}</p> : null}
      <ErrorNote error={create.error ?? poolsError} />
      {pools.length === 0 && !poolsError ? <p className="note">No VPS pool yet.</p> : null}
      <PagedTable
        state={state}
        caption="Flavors"
        columns={['Flavor', 'Shape', 'Actions']}
        empty="This pool has no flavors."
        onMore={() => void store.loadMore()}
        row={(flavor) => <FlavorRow key={flavor.id} flavor={flavor} store={store} />}
      />
    </section>
  );
}

function FlavorRow({ flavor, store }: { flavor: Flavor; store: ListStore<Flavor> }) {
  const { client, permissions } = useConsole();
  const canDelete = usePermission(permissions, describeAction('flavors', 'delete', flavor.id));
  const remove = useAction(async () => {
    await client.flavors.delete({ flavorId: flavor.id });
    store.remove(flavor.id);
  });
  return (
    <tr data-flavor={flavor.id}>
      <td>
        <IdRef id={flavor.id} />
        <br />
        {flavor.name}
      </td>
      <td>
        {flavor.vcpus} vCPU, {flavor.memoryMiB} MiB, {flavor.diskGiB} GiB
        {flavor.gpus ? `, ${flavor.gpus} GPU` : ''}
      </td>
      <td>
        <ConfirmButton
          label="Delete"
          title={`Delete ${flavor.name}`}
          disabled={canDelete !== true || remove.pending}
          reason={disabledReason(true, '', canDelete)}
          question={`Delete the flavor ${flavor.name} (${flavor.id})? New instances can no longer use it; one that an instance uses is refused.`}
          confirmLabel="Delete flavor"
          onConfirm={() => remove.run(undefined)}
        />
        <ErrorNote error={remove.error} />
      </td>
    </tr>
  );
}
