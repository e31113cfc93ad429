/**
 * A module adds methods (bindings of the method table), migrations and background job handlers.
 * A built-in module implements whole groups of the table (`implement(sitesGroup, { list, get, … })`,
 * a handler for each method, checked by the type checker); a plugin binds its own methods one at a
 * time (`bindMethod`). `betterCompute` checks at start that no two modules bind one method and that
 * every bound method is in the table; compute.ts checks at compile time that every method of the
 * table is implemented by a built-in module.
 */
import type { AnyMethod, Identity, MethodDefinition, MethodGroup } from '@better-compute/core';
import type { Migration } from '@better-compute/db';
import type { CatalogEventDraft } from '@better-compute/events';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { ComputeTables } from '../db/tables.js';

/**
 * An event a mutation writes to the outbox in its own transaction, of any type: what the outbox
 * stores and what a plugin's methods emit. The built-in modules emit `CatalogEventDraft`s, typed by
 * the catalog of @better-compute/events.
 */
export interface EventDraft {
  type: string;
  subject: { type: string; id: string | null };
  data?: Record<string, unknown>;
  /** Defaults to the acting tenant. */
  tenantId?: string;
}

/** Everything a method's service code gets; nothing global. `Draft` is what it may emit. */
export interface CallContext<Input = unknown, Draft extends EventDraft = CatalogEventDraft> {
  input: Input;
  /** Null only for public methods called without a credential. */
  identity: Identity | null;
  /** The acting tenant: the input's tenantId, or the identity's own. */
  tenantId: string;
  requestId: string;
  /** The transaction of a mutation, or the database for a query. */
  db: Kysely<ComputeTables>;
  /** Queues an event; it is written with the change, or not at all. */
  emit(event: Draft): void;
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

/** A method and its implementation (and, for `@own` decisions, how to read its resource's owner). */
export interface MethodBinding {
  method: AnyMethod;
  handler: MethodHandler;
  owner?: OwnerLoader;
  /**
   * For a mutation whose answer waits on work that starts only once it committed (a sandbox's
   * create waits for the node, up to its waitSeconds): runs after the commit with the database and
   * answers the final output, checked against the method's schema again.
   */
  /**
   * More decisions the call needs on what its input names (the volumes a sandbox template mounts,
   * every call a fleet apply makes): read before the transaction, decided with the method's own
   * action in one IAM call. `context` asks IAM what the transaction may not (on PGlite an embedded
   * IAM shares its one connection).
   */
  checks?: (
    db: Kysely<ComputeTables>,
    tenantId: string,
    input: unknown,
    context: ChecksContext,
  ) => Promise<import('@better-compute/core').AuthorizationCheck[]>;
  settle?: (
    output: unknown,
    context: { db: Kysely<ComputeTables>; input: unknown; tenantId: string; now: () => Date },
  ) => Promise<unknown>;
}

/**
 * What a binding's `checks` may ask besides the database: who calls, whether IAM knows a tenant, and
 * IAM's decisions ahead of the call's own (so costly checks are spared a caller who will be refused).
 */
export interface ChecksContext {
  identity: Identity;
  tenantExists(tenantId: string): Promise<boolean>;
  authorize(
    checks: import('@better-compute/core').AuthorizationCheck[],
  ): Promise<import('@better-compute/core').AuthorizationDecision[]>;
}

/** A binding as the handler routes it. */
export type BoundMethod = MethodBinding;

/** Binds one method to its implementation, typed by the method: a plugin's way to add a method. */
export function bindMethod<I extends z.ZodType, O extends z.ZodType>(
  method: MethodDefinition<I, O>,
  handler: (context: CallContext<z.output<I>, EventDraft>) => Promise<z.input<O>>,
  options: { owner?: OwnerLoader<z.output<I>> } = {},
): MethodBinding {
  return {
    method: method as unknown as AnyMethod,
    handler: handler as unknown as MethodHandler,
    ...(options.owner ? { owner: options.owner as OwnerLoader } : {}),
  };
}

/** The implementation of a method of a group, typed by the method. */
export type HandlerOf<M> =
  M extends MethodDefinition<infer I, infer O>
    ? (context: CallContext<z.output<I>>) => Promise<z.input<O>>
    : never;

/**
 * A group's methods bound to their handlers; `Keys` (`sites.list` | …) says at compile time which
 * methods of the table it implements.
 */
export interface ImplementedGroup<Keys extends string = string> {
  readonly keys: readonly Keys[];
  readonly bindings: readonly MethodBinding[];
}

/**
 * Implements every method of a group: a handler is required for each, and none may be extra.
 * `owners` names, for the methods decided with `@own`, how to read their resource's owner.
 */
export function implement<G extends MethodGroup<string, any>>(
  group: G,
  handlers: { [Name in keyof G['methods'] & string]: HandlerOf<G['methods'][Name]> },
  owners: { [Name in keyof G['methods'] & string]?: OwnerLoader<any> } = {},
): ImplementedGroup<`${G['group']}.${keyof G['methods'] & string}`> {
  const methods = group.methods as Record<string, AnyMethod>;
  const bindings = Object.keys(methods).map((name) => {
    const owner = (owners as Record<string, OwnerLoader | undefined>)[name];
    return {
      method: methods[name]!,
      handler: (handlers as Record<string, MethodHandler>)[name]!,
      ...(owner ? { owner } : {}),
    };
  });
  return {
    keys: Object.keys(methods).map((name) => `${group.group}.${name}`) as never,
    bindings,
  };
}

export interface JobContext {
  db: Kysely<ComputeTables>;
  payload: Record<string, unknown>;
  now(): Date;
}

/** What a module's background loop gets: the database, the clock, the log. */
export interface LoopContext {
  db: Kysely<ComputeTables>;
  now(): Date;
  log: (entry: { level: 'warn' | 'error' | 'info'; message: string; error?: unknown }) => void;
}

/** A loop a module runs on the replicas with `role` (the webhook fan-out and deliveries: `sinks`). */
interface ModuleLoop {
  role: 'controllers' | 'sinks';
  start(context: LoopContext): { stop(): Promise<void> };
}

/**
 * One gauge a module reports each time a replica's `/metrics` is scraped (host/metrics.ts): read
 * from its own tables, so the numbers are the deployment's, whichever replica answers.
 */
export interface GaugeFamily {
  /** The metric's name without the `better_compute_` prefix, in snake case. */
  name: string;
  help: string;
  samples: { labels: Record<string, string>; value: number }[];
}

/** A module's gauges: a few aggregate queries, never a scan of a growing history. */
export type ModuleGauges = (db: Kysely<ComputeTables>, now: Date) => Promise<GaugeFamily[]>;

/** A gauge's age: seconds from `then` to `now`, 0 for none or a time in the future. */
export function secondsSince(then: Date | string | null | undefined, now: Date): number {
  if (then === null || then === undefined) return 0;
  return Math.max(0, (now.getTime() - new Date(then).getTime()) / 1000);
}

export interface ComputeModule<Implemented extends string = string> {
  name: string;
  migrations?: readonly Migration[];
  methods: MethodBinding[];
  /** Handlers for background jobs of the given kinds. */
  jobs?: Record<string, (context: JobContext) => Promise<void>>;
  gauges?: ModuleGauges;
  /** Loops of its own, for work the job table does not fit (a cursor over the outbox). */
  loops?: readonly ModuleLoop[];
  /** Compile time only: the keys of the table its implemented groups cover (never set). */
  readonly implemented?: Implemented;
}

/** What a module declares: groups it implements and methods it binds one at a time, in any mix. */
export interface ModuleDeclaration<Parts extends readonly (MethodBinding | ImplementedGroup)[]> {
  name: string;
  migrations?: readonly Migration[];
  methods: Parts;
  jobs?: Record<string, (context: JobContext) => Promise<void>>;
  gauges?: ModuleGauges;
}

/** The table keys the implemented groups among a module's parts cover. */
export type ImplementedKeys<Parts> = Parts extends readonly (infer Part)[]
  ? Part extends ImplementedGroup<infer Keys>
    ? Keys
    : never
  : never;

export function defineModule<const Parts extends readonly (MethodBinding | ImplementedGroup)[]>(
  declaration: ModuleDeclaration<Parts>,
): ComputeModule<ImplementedKeys<Parts>> {
  const methods = declaration.methods.flatMap((part) => ('bindings' in part ? part.bindings : [part]));
  const module: ComputeModule<ImplementedKeys<Parts>> = { name: declaration.name, methods };
  if (declaration.migrations) module.migrations = declaration.migrations;
  if (declaration.jobs) module.jobs = declaration.jobs;
  if (declaration.gauges) module.gauges = declaration.gauges;
  return module;
}
