/** The system module: the version, the caller, and the live route table. */
import { PRODUCT, ROOT_TENANT, ComputeError, VERSION } from '@better-compute/core';
import { systemGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';

/** Bumped when a method changes incompatibly. */
const API_VERSION = 1;

export const systemModule = defineModule({
  name: 'system',
  methods: [
    implement(systemGroup, {
      version: async () => ({
        product: PRODUCT,
        version: VERSION,
        apiVersion: API_VERSION,
      }),
      whoami: async ({ identity, tenantId }) => {
        if (!identity) throw new ComputeError('UNAUTHENTICATED', 'a credential is required');
        return {
          principalId: identity.principalId,
          principalKind: identity.principalKind,
          tenantId: identity.tenantId,
          actingTenantId: tenantId,
          credentialKind: identity.credentialKind,
          mfa: identity.mfa,
          expiresAt: identity.expiresAt,
          ...(identity.displayName ? { displayName: identity.displayName } : {}),
          ...(identity.email ? { email: identity.email } : {}),
          platformOperator: identity.tenantId === ROOT_TENANT,
        };
      },
      routes: async ({ routes, input }) => ({
        items: routes().filter((route) => !input.group || route.method.startsWith(`${input.group}.`)),
        nextCursor: null,
      }),
    }),
  ],
});
