/**
 * Who is calling, and may they act in a tenant: the credential and tenant steps (3 and 4) of the
 * pipeline, shared by the method routes (handler.ts) and the live stream (watch.ts), which also
 * asks them again while a stream is open.
 */
import {
  ComputeError,
  type IamBridge,
  type Identity,
  ROOT_TENANT,
  type CredentialSource,
  requestCredential,
} from '@better-compute/core';

export function denied(message: string, details: Record<string, unknown>, hint: string): ComputeError {
  return new ComputeError('ACCESS_DENIED', message, { details, hint });
}

export interface Gate {
  /**
   * The identity behind the request's credential (header, or cookie under the CSRF rule). Null at
   * once, with no promise to wait for, when the request carries none: most public calls.
   */
  authenticate(request: CredentialSource): Promise<Identity> | null;
  /** The identity behind a credential already taken from a request; throws UNAUTHENTICATED when it no longer works. */
  identify(token: string): Promise<Identity>;
  /** Throws unless the identity may act in the tenant, and both tenants are active. */
  checkTenant(identity: Identity, actingTenant: string): Promise<void>;
}

export function createGate(iam: IamBridge, trustedOrigins: readonly string[] | undefined): Gate {
  async function identify(token: string): Promise<Identity> {
    const identity = await iam.authenticate(token);
    if (!identity) {
      throw new ComputeError('UNAUTHENTICATED', 'the credential is unknown, expired or revoked', {
        hint: 'Sign in again (better-iam login) or set BETTER_COMPUTE_TOKEN to a valid API key.',
      });
    }
    return identity;
  }
  return {
    identify,
    authenticate(request) {
      const credential = requestCredential(request, trustedOrigins);
      return credential ? identify(credential.token) : null;
    },
    async checkTenant(identity, actingTenant) {
      if (actingTenant !== identity.tenantId && identity.tenantId !== ROOT_TENANT) {
        throw denied(
          `this credential belongs to tenant ${identity.tenantId} and cannot act in ${actingTenant}`,
          { reason: 'foreign-tenant' },
          `Act in ${identity.tenantId} (--tenant ${identity.tenantId}, or leave --tenant out), or use a credential of ${actingTenant}.`,
        );
      }
      for (const tenant of new Set([identity.tenantId, actingTenant])) {
        const state = await iam.tenantState(tenant);
        if (state === null) throw new ComputeError('NOT_FOUND', `tenant ${tenant} does not exist`);
        if (state !== 'active') {
          throw new ComputeError('TENANT_SUSPENDED', `tenant ${tenant} is ${state}`, {
            details: { tenantId: tenant, state },
            hint: 'An administrator of a parent tenant can reactivate it in Better IAM.',
          });
        }
      }
    },
  };
}
