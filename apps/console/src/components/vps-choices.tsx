'use client';
/**
 * What a VPS form offers: the VPS pools the tenant sees, the flavors of the chosen pool, and the
 * images, each with the first one chosen until the person picks another. The Instances page and the
 * Sandboxes page's templates share it.
 */
import { useEffect, useState } from 'react';
import type { CallOutput } from '@better-compute/client';
import { useConsole } from './console-context';

type Pool = CallOutput<'pools.get'>;
type Flavor = CallOutput<'flavors.list'>['items'][number];
type Image = CallOutput<'images.list'>['items'][number];

export function useVpsChoices() {
  const { client } = useConsole();
  const [pools, setPools] = useState<Pool[]>([]);
  const [images, setImages] = useState<Image[]>([]);
  const [flavors, setFlavors] = useState<Flavor[]>([]);
  const [poolId, setPoolId] = useState('');
  const [flavorId, setFlavorId] = useState('');
  const [imageId, setImageId] = useState('');
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    Promise.all([client.pools.list({ class: 'vps', limit: 100 }), client.images.list({ limit: 100 })])
      .then(([poolPage, imagePage]) => {
        setPools(poolPage.items);
        setImages(imagePage.items);
        setPoolId((current) => current || poolPage.items[0]?.id || '');
        setImageId((current) => current || imagePage.items[0]?.id || '');
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
  return { pools, flavors, images, poolId, setPoolId, flavorId, setFlavorId, imageId, setImageId, error };
}
