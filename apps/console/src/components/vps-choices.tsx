'use client';
/**
 * What a VPS form offers: the VPS pools the tenant sees, the flavors of the chosen pool, and the
 * images, each with the first one chosen until the person picks another. The Instances page and the
 * Sandboxes page's templates share it; the Volumes and the Images and flavors pages the pools.
 */
import { useEffect, useState } from 'react';
import type { CallOutput } from '@better-compute/client';
import { useConsole } from './console-context';

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
