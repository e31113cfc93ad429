'use client';
/**
 * What a VPS form offers: the VPS pools the tenant sees, the flavors of the chosen pool, and the
 * images, each with the first one chosen until the person picks another, and the three fields that
 * choose them. The Instances page and the Sandboxes page's templates share them; the Volumes and the
 * Images and flavors pages the pools.
 */
import { type ReactNode, useEffect, useState } from 'react';
import type { CallOutput } from '@better-compute/client';
import { useConsole } from './console-context';
import { ChoiceField } from './ui';

type Pool = CallOutput<'pools.get'>;
type Flavor = CallOutput<'flavors.list'>['items'][number];
type Image = CallOutput<'images.list'>['items'][number];

/** The VPS pools the tenant sees, the first chosen until the person picks another. */
export function useVpsPools() {
  const { client } = useConsole();
  const [pools, setPools] = useState<Pool[]>([]);
  const [poolId, setPoolId] = useState('');
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    client.pools
      .list({ class: 'vps', limit: 100 })
      .then((page) => {
        setPools(page.items);
        setPoolId((current) => current || page.items[0]?.id || '');
      })
      .catch(setError);
  }, [client]);
  return { pools, poolId, setPoolId, error };
}

export function useVpsChoices() {
  const { client } = useConsole();
  const { pools, poolId, setPoolId, error: poolsError } = useVpsPools();
  const [images, setImages] = useState<Image[]>([]);
  const [flavors, setFlavors] = useState<Flavor[]>([]);
  const [flavorId, setFlavorId] = useState('');
  const [imageId, setImageId] = useState('');
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    client.images
      .list({ limit: 100 })
      .then((page) => {
        setImages(page.items);
        setImageId((current) => current || page.items[0]?.id || '');
      })
      .catch(setError);
  }, [client]);
  useEffect(() => {
    if (!poolId) return;
    client.flavors
      .list({ poolId, limit: 100 })
      .then((page) => {
        setFlavors(page.items);
        setFlavorId(page.items[0]?.id ?? '');
      })
      .catch(setError);
  }, [client, poolId]);
  return {
    pools,
    flavors,
    images,
    poolId,
    setPoolId,
    flavorId,
    setFlavorId,
    imageId,
    setImageId,
    error: error ?? poolsError,
  };
}

/** The pool field over `useVpsPools()`'s result (or `useVpsChoices()`'s). */
export function VpsPoolField({
  choices,
  name = 'pool',
}: {
  choices: Pick<ReturnType<typeof useVpsPools>, 'pools' | 'poolId' | 'setPoolId'>;
  name?: string;
}) {
  return (
    <ChoiceField
      label="Pool"
      name={name}
      items={choices.pools}
      value={choices.poolId}
      onChange={choices.setPoolId}
      text={(pool) => pool.name}
    />
  );
}

/**
 * The pool, flavor and image fields of a form, over `useVpsChoices()`'s result. `prefix` names the
 * fields (`pool`, or `templatePool` with prefix `template`); `flavorText` says what a flavor's option
 * shows (its name by default).
 */
export function VpsChoiceFields({
  choices,
  prefix = '',
  flavorText = (flavor) => flavor.name,
}: {
  choices: ReturnType<typeof useVpsChoices>;
  prefix?: string;
  flavorText?: (flavor: Flavor) => ReactNode;
}) {
  const name = (field: string) => (prefix ? `${prefix}${field[0]!.toUpperCase()}${field.slice(1)}` : field);
  return (
    <>
      <VpsPoolField choices={choices} name={name('pool')} />
      <ChoiceField
        label="Flavor"
        name={name('flavor')}
        items={choices.flavors}
        value={choices.flavorId}
        onChange={choices.setFlavorId}
        text={flavorText}
      />
      <ChoiceField
        label="Image"
        name={name('image')}
        items={choices.images}
        value={choices.imageId}
        onChange={choices.setImageId}
        text={(image) => image.name}
      />
    </>
  );
}
