import { currentSession } from '@/lib/stack';
import { FleetDriftView, OperatorsOnly } from './fleet-drift-view';

/**
 * Fleet drift is the platform's (the fleet methods act in the root tenant only): a session of any
 * other tenant sees the operators-only state at once, with nothing sent; a root session's page asks
 * Better IAM and the API, which say the same for a person without compute:fleet:admin.
 */
export default async function FleetDriftPage() {
  const session = await currentSession();
  if (!session?.platform)
    return (
      <>
        <h1>Fleet drift</h1>
        <OperatorsOnly />
      </>
    );
  return <FleetDriftView />;
}
