import { redirect } from 'next/navigation';
import type { ReactNode } from 'react';
import { ConsoleProvider } from '@/components/console-context';
import { Shell } from '@/components/shell';
import { currentSession } from '@/lib/stack';

// Every page reads the session cookie: none is rendered ahead of time.
export const dynamic = 'force-dynamic';

export default async function ConsoleLayout({ children }: { children: ReactNode }) {
  const session = await currentSession();
  if (!session) redirect('/login');
  return (
    <ConsoleProvider session={session}>
      <Shell>{children}</Shell>
    </ConsoleProvider>
  );
}
