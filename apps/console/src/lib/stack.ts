/**
 * The server side of a page: the stack server.mjs built in this process, and the signed-in person
 * read from the host-only session cookie. Never imported by client components.
 */
import { cookies } from 'next/headers';

const SESSION_COOKIE = 'better-iam.session';
const ROOT_TENANT = 'root';

interface Identity {
  principalId: string;
  principalKind: string;
  tenantId: string;
  credentialKind: string;
  mfa: boolean;
}

interface ConsoleStack {
  iam: {
    authenticate(credential: string): Promise<Identity | null>;
    getPrincipal(id: string): Promise<{ id: string; email: string | null; displayName: string | null }>;
  };
  origin: string;
  /** The compute instance: its configuration says which optional pages the deployment has. */
  compute?: { config?: { release?: { pins?: readonly string[] } } };
}

/** What a page knows of the session: who, in which tenant, and whether the root tenant's pages show. */
export interface SessionView {
  principalId: string;
  tenantId: string;
  name: string;
  mfa: boolean;
  platform: boolean;
  /**
   * Whether the Rollouts page shows: a root tenant's session on a deployment that pins release keys
   * (`release.pins` in its configuration; the console guide loads the rollout module only then).
   */
  rollouts: boolean;
}

function stack(): ConsoleStack | undefined {
  return (globalThis as { __betterComputeConsole?: ConsoleStack }).__betterComputeConsole;
}

/** The session of this request, or null without a valid one. */
export async function currentSession(): Promise<SessionView | null> {
  const token = (await cookies()).get(SESSION_COOKIE)?.value;
  const iam = stack()?.iam;
  if (!token || !iam || token.length > 4096) return null;
  try {
    const identity = await iam.authenticate(token);
    if (!identity || identity.credentialKind !== 'session') return null;
    const principal = await iam.getPrincipal(identity.principalId).catch(() => null);
    return {
      principalId: identity.principalId,
      tenantId: identity.tenantId,
      name: principal?.email ?? principal?.displayName ?? identity.principalId,
      mfa: identity.mfa,
      platform: identity.tenantId === ROOT_TENANT,
      rollouts:
        identity.tenantId === ROOT_TENANT && (stack()?.compute?.config?.release?.pins?.length ?? 0) > 0,
    };
  } catch {
    return null;
  }
}
