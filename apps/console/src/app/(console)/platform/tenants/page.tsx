import { notFound } from 'next/navigation';
import { currentSession } from '@/lib/stack';
import { TenantsView } from './tenants-view';

/** Platform pages exist only for the root tenant's sessions. */
export default async function TenantsPage() {
  const session = await currentSession();
  if (!session?.platform) notFound();
  return <TenantsView />;
}
