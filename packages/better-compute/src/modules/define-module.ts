/**
 * A module adds methods (bindings of the method table), migrations and background job handlers.
 * `betterCompute` checks at start that no two modules bind one method and that every bound method
 * is in the table.
 */
import type { AnyMethod, Identity, MethodDefinition } from '@better-compute/core';
import type { Migration } from '@better-compute/db';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { ComputeTables } from '../db/tables.js';

/** An event a mutation writes to the outbox in its own transaction. */
export interface EventDraft {
  type: string;
  subject: { type: string; id: string | null };
  data?: Record<string, unknown>;
  /** Defaults to the acting tenant. */
  tenantId?: string;
}

/** Everything a method's service code gets; nothing global. */
export interface CallContext<Input = unknown> {
  input: Input;
  /** Null only for public methods called without a credential. */
  identity: Identity | null;
  /** The acting tenant: the input's tenantId, or the identity's own. */
  tenantId: string;
  requestId: string;
  /** The transaction of a mutation, or the database for a query. */
  db: Kysely<ComputeTables>;
  /** Queues an event; it is written with the change, or not at all. */
  emit(event: EventDraft): void;
  now(): Date;
  /**
   * Whether IAM knows a tenant. For queries only: a mutation names its tenants in the method table
   * (`namesTenants`), checked before its transaction, since an embedded IAM may share its connection.
   */
  tenantExists(tenantId: string): Promise<boolean>;
  /** The live route table, for `system.routes`. */
  routes(): import('@better-compute/core').RouteInfo[];
}

export type MethodHandler<M extends AnyMethod = AnyMethod> = (
  context: CallContext<z.output<M['input']>>,
) => Promise<z.input<M['output']>>;

/**
 * Reads who owns the resource a call names, before the call is decided, so IAM's `@own` patterns
 * apply to it (a member releases its own reservations). Null when it has no owner or does not exist.
 */
export type OwnerLoader<Input = unknown> = (
  db: Kysely<ComputeTables>,
  tenantId: string,
  input: Input,
) => Promise<string | null>;

export interface BoundMethod {
  method: AnyMethod;
  handler: MethodHandler;
  owner?: OwnerLoader;
}

/** Binds a method of the table to its implementation, typed by the method. */
export function bindMethod<I extends z.ZodType, O extends z.ZodType>(
  method: MethodDefinition<I, O>,
  handler: (context: CallContext<z.output<I>>) => Promise<z.input<O>>,
  options: { owner?: OwnerLoader<z.output<I>> } = {},
): BoundMethod {
  return {
    method: method as unknown as AnyMethod,
    handler: handler as unknown as MethodHandler,
    ...(options.owner ? { owner: options.owner as OwnerLoader } : {}),
  };
}

export interface JobContext {
  db: Kysely<ComputeTables>;
  payload: Record<string, unknown>;
  now(): Date;
}

export interface ComputeModule {
  name: string;
  migrations?: readonly Migration[];
  methods: BoundMethod[];
  /** Handlers for background jobs of the given kinds. */
  jobs?: Record<string, (context: JobContext) => Promise<void>>;
}

export function defineModule(module: ComputeModule): ComputeModule {
  return module;
}
