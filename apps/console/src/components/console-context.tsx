'use client';
/**
 * The console's live state for every page of a session: the client, the live console (stores kept
 * current by the event stream, polled every 20 s while the stream is down and the tab visible), and
 * the permission cache whose checks go to Better IAM's `can` in batches of up to 50.
 */
import { createContext, useContext, useEffect, useState, type ReactNode } from 'react';
import type { ComputeClient } from '@better-compute/client';
import {
  createPermissions,
  startLiveConsole,
  type LiveConsole,
  type Permissions,
} from '@better-compute/console-kit';
import { browserClient, CSRF_HEADERS, iamCall } from '@/lib/api';

export interface SessionInfo {
  principalId: string;
  tenantId: string;
  name: string;
  mfa: boolean;
  platform: boolean;
  /** The Rollouts page shows (root tenant, release pins set). */
  rollouts: boolean;
}

export interface ConsoleValue {
  session: SessionInfo;
  client: ComputeClient;
  permissions: Permissions;
  /** Null until started in the browser (and during server rendering). */
  live: LiveConsole | null;
}

const ConsoleContext = createContext<ConsoleValue | null>(null);

export function useConsole(): ConsoleValue {
  const value = useContext(ConsoleContext);
  if (!value) throw new Error('useConsole outside the console layout');
  return value;
}

export function ConsoleProvider({ session, children }: { session: SessionInfo; children: ReactNode }) {
  const [base] = useState(() => ({
    client:
      typeof window === 'undefined' ? (null as unknown as ComputeClient) : browserClient(session.tenantId),
    permissions: createPermissions({
      authorize: async (checks) =>
        (await iamCall<{ results: { allowed: boolean }[] }>('can', { checks })).results,
    }),
  }));
  const [live, setLive] = useState<LiveConsole | null>(null);
  useEffect(() => {
    let started: LiveConsole | null = null;
    let cancelled = false;
    void startLiveConsole(base.client, {
      tenantId: session.tenantId,
      watchUrl: `${window.location.origin}/api/compute/watch`,
      headers: { ...CSRF_HEADERS },
      permissions: base.permissions,
    }).then((value) => {
      if (cancelled) return value.stop();
      started = value;
      setLive(value);
      // A session that ended (signed out elsewhere, revoked, expired) ends the stream with
      // UNAUTHENTICATED: back to the sign-in page rather than pages that can no longer load.
      value.connection.subscribe(() => {
        const state = value.connection.get();
        if (state.status === 'stopped' && state.error?.code === 'UNAUTHENTICATED')
          window.location.assign('/login');
      });
    });
    return () => {
      cancelled = true;
      started?.stop();
    };
  }, [base, session.tenantId]);
  return (
    <ConsoleContext.Provider value={{ session, client: base.client, permissions: base.permissions, live }}>
      {children}
    </ConsoleContext.Provider>
  );
}
