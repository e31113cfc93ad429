/**
 * `sandboxes.exec`: the way into a sandbox. It needs a signed-in session (or an agent's short-lived
 * token acting for a person), never an API key: a key lives on disks and in CI, and a sandbox
 * shell is a person's act (docs/decisions/sandboxes-exec.md). It answers a user certificate for
 * the caller's public key from the sandbox SSH CA (principal: the sandbox id; valid the `minutes`
 * asked, 1 to 15 and 10 by default, never past the caller's credential) and a single-use tunnel
 * ticket to the sandbox's SSH server.
 */
import { ComputeError } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { parseUserPublicKey } from '../ssh-certs/certificate.js';
import { openSandboxTunnel } from '../tunnels/service.js';
import { poolDriver } from '../fleet/queries.js';
import { signSandboxCertificate } from './keys.js';
import { loadSandbox, sandboxView } from './rows.js';
import type { SandboxDeps } from './settings.js';
import { sandboxDb } from './tables.js';

export const EXEC_ACCOUNT = 'root';

export function execSandbox(deps: SandboxDeps) {
  return async (ctx: CallContext<{ sandboxId: string; publicKey: string; minutes: number }>) => {
    const identity = ctx.identity;
    if (!identity || identity.credentialKind === 'api-key')
      throw new ComputeError('ACCESS_DENIED', 'sandbox exec needs a signed-in session, not an API key', {
        details: { reason: 'session-required', credentialKind: identity?.credentialKind ?? null },
        hint: 'Sign in (better-compute auth login) and run it with your session; API keys do not open sandboxes.',
      });
    // The key is checked before anything about the sandbox, so a private key pasted by mistake is
    // refused the same way whatever the id.
    await parseUserPublicKey(ctx.input.publicKey);
    const row = await loadSandbox(sandboxDb(ctx.db), ctx.tenantId, ctx.input.sandboxId);
    if (row.state !== 'running' || !row.node_id)
      throw new ComputeError(
        'INVALID_STATE',
        `sandbox ${row.id} is ${row.state}; exec opens running sandboxes`,
        {
          details: { state: row.state },
          hint:
            row.state === 'starting' ? 'Wait until sandbox get shows it running.' : 'Create a new sandbox.',
        },
      );
    if (!row.identity_rebound)
      throw new ComputeError(
        'INVALID_STATE',
        `sandbox ${row.id} still shares its SSH identity with the sandbox it was restored from`,
        {
          details: { reason: 'restore-shares-identity' },
          hint: `Delete the sandbox it was restored from or its sibling restores, or wait until sandbox get ${row.id} shows identityRebound: true.`,
        },
      );
    const ca = await deps.ca.get();
    const now = ctx.now();
    // The schema bounds minutes (1 to 15) and fills in the default.
    let validBefore = new Date(now.getTime() + ctx.input.minutes * 60_000);
    if (identity.expiresAt !== null) {
      const credentialEnds = new Date(identity.expiresAt);
      if (credentialEnds.getTime() < validBefore.getTime()) validBefore = credentialEnds;
    }
    if (validBefore.getTime() <= now.getTime())
      throw new ComputeError('UNAUTHENTICATED', 'your session ends now; sign in again', {
        hint: 'better-compute auth login',
      });
    const certificate = await signSandboxCertificate({
      ca,
      kind: 'user',
      publicKey: ctx.input.publicKey,
      principal: row.id,
      keyId: `${identity.principalId}:${row.id}`,
      // A minute back, for a guest whose clock is a little behind.
      validAfter: new Date(now.getTime() - 60_000),
      validBefore,
    });
    const driver = await poolDriver(ctx.db, row.pool_id);
    const ticket = await openSandboxTunnel(deps.keys, ctx, {
      sandboxId: row.id,
      nodeId: row.node_id,
      action: 'compute:sandboxes:exec',
      simulated: driver === 'sim',
    });
    return {
      sandboxId: row.id,
      ticket: ticket.ticket,
      ticketExpiresAt: ticket.expiresAt,
      certificate,
      certificateExpiresAt: validBefore.toISOString(),
      account: EXEC_ACCOUNT,
      hostPrincipal: row.id,
      hostCertified: sandboxView(row, now).hostCertified,
      hostCaPublicKey: ca.sshPublicKey.trim(),
    };
  };
}
