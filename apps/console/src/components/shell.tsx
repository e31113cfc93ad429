'use client';
import Link from 'next/link';
import { usePathname } from 'next/navigation';
import type { ReactNode } from 'react';
import { describeAction } from '@better-compute/console-kit';
import { usePermission, useStore } from '@better-compute/console-kit/react';
import { useConsole } from './console-context';
import { iamCall } from '@/lib/api';

const PAGES = [
  { href: '/reservations', label: 'Reservations' },
  { href: '/capacity', label: 'Capacity and pools' },
  { href: '/sites', label: 'Sites and projects' },
  { href: '/usage', label: 'Usage and quotas' },
  { href: '/nodes', label: 'Nodes' },
  { href: '/instances', label: 'Instances' },
  { href: '/catalog', label: 'Images and flavors' },
  { href: '/sandboxes', label: 'Sandboxes' },
  { href: '/volumes', label: 'Volumes' },
  { href: '/joining', label: 'Joining machines' },
  { href: '/machines', label: 'Bare-metal machines' },
  { href: '/discovery', label: 'PXE discovery' },
  { href: '/batches', label: 'Destructive batches' },
  { href: '/approvals', label: 'Awaiting approval' },
  { href: '/events', label: 'Events' },
  { href: '/webhooks', label: 'Webhooks' },
  { href: '/iam', label: 'People and keys' },
];
const PLATFORM_PAGES = [{ href: '/platform/tenants', label: 'Tenants' }];
/** Shown only where the deployment pins release keys (`session.rollouts`). */
const ROLLOUTS_PAGE = { href: '/rollouts', label: 'Rollouts' };
/** Shown to those Better IAM lets read the fleet (compute:fleet:admin, root administrators). */
const FLEET_DRIFT_PAGE = { href: '/fleet', label: 'Fleet drift' };

/** The stream's state in words: "live" while open, else what the pages do meanwhile. */
function LiveBadge() {
  const { live } = useConsole();
  const idle = { subscribe: () => () => {}, get: () => null };
  const state = useStore(live?.connection ?? idle);
  if (!state) return <span className="badge">starting</span>;
  if (state.status === 'open')
    return (
      <span className="badge live" role="status" data-live="open">
        live
      </span>
    );
  const text =
    state.status === 'stopped'
      ? `stopped${state.error ? `: ${state.error.message}` : ''}`
      : state.status === 'connecting' && state.attempt === 0
        ? 'connecting'
        : 'offline: refreshing every 20 s';
  return (
    <span className="badge down" role="status" data-live={state.status} title={state.error?.hint ?? ''}>
      {text}
    </span>
  );
}

export function Shell({ children }: { children: ReactNode }) {
  const { session, permissions } = useConsole();
  // Asked only in the root tenant: the fleet is the platform's, and no other tenant's role reaches it.
  const mayReadFleet = usePermission(
    permissions,
    session.platform ? describeAction('fleet', 'status') : null,
  );
  const pathname = usePathname();
  const link = (page: { href: string; label: string }) => (
    <Link key={page.href} href={page.href} aria-current={pathname.startsWith(page.href) ? 'page' : undefined}>
      {page.label}
    </Link>
  );
  async function signOut() {
    await iamCall('sessions/signOut', {}).catch(() => {});
    window.location.assign('/login');
  }
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <nav className="nav" aria-label="Console">
        <strong>better-compute</strong>
        <LiveBadge />
        <h2>Tenant {session.tenantId}</h2>
        {PAGES.map(link)}
        {session.platform ? (
          <>
            <h2>Platform</h2>
            {PLATFORM_PAGES.map(link)}
            {session.rollouts ? link(ROLLOUTS_PAGE) : null}
            {mayReadFleet === true ? link(FLEET_DRIFT_PAGE) : null}
          </>
        ) : null}
        <div className="who">
          Signed in as {session.name}
          <br />
          <button type="button" className="secondary" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </nav>
      <main id="main">{children}</main>
    </div>
  );
}
