/**
 * The shape of a route binding: what each area gives the HTTP layer for its methods (the resource
 * its `iam:*` action is decided on, and the call), and the helpers the bindings share. The handler
 * runs them; the areas declare them next to the service code they call.
 */
import type { z } from 'zod';
import {
  ComputeError,
  type Identity,
  isLoopbackHostname,
  type ResourceRef,
  SESSION_COOKIE,
} from '@better-compute/core';
import type { Iam, RecoveryAudit } from './api.js';
import type { IamMethodName, iamMethods } from './methods.js';
import type { IamResourceRef } from './policy.js';
import type { Principal } from './types.js';

/** What a route's binding knows of its request. */
export interface RouteContext {
  identity: Identity | null;
  request: Request;
  url: URL;
  /** The request's id, as its answer carries it. */
  requestId: string;
  /** The acting tenant: the input's `tenantId`, else the identity's. */
  tenantId: string;
}

export interface Answer {
  data: unknown;
  headers?: Record<string, string>;
}

type Input<K extends IamMethodName> = z.output<(typeof iamMethods)[K]['input']>;

export interface RouteBinding<K extends IamMethodName> {
  /** The resource the method's action is decided on (async: some need a lookup for the owner). */
  resource?: (
    input: Input<K>,
    context: RouteContext & { identity: Identity },
  ) => Promise<IamResourceRef> | IamResourceRef;
  /**
   * Whether the caller may call it without the method's action: the person an agent acts for, on
   * that agent's delegation. Throws to refuse outright (an agent changing a delegation).
   */
  selfServe?: (input: Input<K>, context: RouteContext & { identity: Identity }) => Promise<boolean>;
  run: (input: Input<K>, context: RouteContext) => Promise<Answer>;
}

/** The bindings of some methods: an area's `routes` answer these for its own. */
export type RouteBindings<K extends IamMethodName = IamMethodName> = { [M in K]: RouteBinding<M> };

export function sessionCookie(url: URL, token: string, maxAgeSeconds: number): string {
  const secure = isLoopbackHostname(url.hostname) ? '' : '; Secure';
  return `${SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secure}`;
}

export function requireIdentity(context: RouteContext): Identity {
  if (!context.identity) throw new ComputeError('UNAUTHENTICATED', 'this method needs a credential');
  return context.identity;
}

/**
 * A person's own session, opened with their password (a session token, or a JWT issued from one):
 * second factors are the person's alone, never set up with an API key or by an agent.
 */
export function requirePasswordSession(context: RouteContext): Identity {
  const identity = requireIdentity(context);
  if (identity.principalKind !== 'person' || identity.credentialKind === 'api-key') {
    throw new ComputeError(
      'ACCESS_DENIED',
      'a second factor is set up only from a session signed in with the password',
      {
        details: { reason: 'password-session-required' },
        hint: 'Sign in as the person (better-iam login) and run the command with that session, not an API key or an agent.',
      },
    );
  }
  return identity;
}

/** Who takes a recovery action, and in which request, for its audit entry. */
export function recoveryAudit(context: RouteContext): RecoveryAudit {
  return { actor: requireIdentity(context).principalId, requestId: context.requestId };
}

/** Principals are named within the acting tenant: one of another tenant is not found. */
export async function principalIn(iam: Iam, principalId: string, tenantId: string): Promise<Principal> {
  const principal = await iam.getPrincipal(principalId).catch(() => null);
  if (!principal || principal.tenantId !== tenantId)
    throw new ComputeError('NOT_FOUND', `principal ${principalId} was not found in tenant ${tenantId}`);
  return principal;
}

/** The principal a method names, or the caller. */
export const selfOr = (principalId: string | undefined, identity: Identity): string =>
  principalId ?? identity.principalId;

/** A principal as the resource of a method on it: its own owner (for `@own` patterns). */
export const principalResource = (principalId: string, tenantId: string): ResourceRef => ({
  type: 'iam-principal',
  id: principalId,
  tenantId,
  ownerId: principalId,
});

/** A page of a principal's own credentials (sessions, API keys): the caller's, or a named principal's. */
export function ownedCredentialsList<P>(
  iam: Iam,
  list: (principalId: string, page: { limit: number; cursor?: string }) => Promise<P>,
) {
  return {
    resource: (
      input: { principalId?: string | undefined },
      { identity, tenantId }: RouteContext & { identity: Identity },
    ) => principalResource(selfOr(input.principalId, identity), tenantId),
    async run(
      input: { principalId?: string | undefined; limit: number; cursor?: string | undefined },
      context: RouteContext,
    ): Promise<Answer> {
      const principal = await principalIn(
        iam,
        selfOr(input.principalId, requireIdentity(context)),
        context.tenantId,
      );
      return {
        data: await list(principal.id, {
          limit: input.limit,
          ...(input.cursor ? { cursor: input.cursor } : {}),
        }),
      };
    },
  };
}

/**
 * Revoking one credential of a principal: decided on the credential with its owner (for `@own`),
 * and one whose owner is outside the acting tenant is not found.
 */
export function ownedCredentialRevoke<I, C extends { principalId: string }>(credential: {
  type: 'iam-session' | 'iam-api-key';
  noun: string;
  idOf: (input: I) => string;
  get: (id: string) => Promise<C>;
  revoke: (id: string) => Promise<unknown>;
  iam: Iam;
}) {
  return {
    async resource(input: I, { tenantId }: RouteContext): Promise<IamResourceRef> {
      const id = credential.idOf(input);
      const found = await credential.get(id).catch(() => null);
      return { type: credential.type, id, tenantId, ...(found ? { ownerId: found.principalId } : {}) };
    },
    async run(input: I, { tenantId }: RouteContext): Promise<Answer> {
      const id = credential.idOf(input);
      const found = await credential.get(id);
      await principalIn(credential.iam, found.principalId, tenantId).catch(() => {
        throw new ComputeError('NOT_FOUND', `${credential.noun} ${id} was not found in tenant ${tenantId}`);
      });
      return { data: await credential.revoke(id) };
    },
  };
}
