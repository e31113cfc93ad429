import { notFound } from 'next/navigation';
import { currentSession } from '@/lib/stack';
import { RolloutsView } from './rollouts-view';

/**
 * Rollouts are the platform's, and the console shows them only where the deployment pins release
 * keys (the console guide loads the rollout module "when release pins are set"): anything else is
 * this page's 404, as the navigation has no link to it.
 */
export default async function RolloutsPage() {
  const session = await currentSession();
  if (!session?.platform || !session.rollouts) notFound();
  return <RolloutsView />;
}
