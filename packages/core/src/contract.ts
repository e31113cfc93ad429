/**
 * The method table's machinery. Every API method is declared once with `defineMethod`; the server's
 * routes, the client's calls, `api --list`, `help --json` and the IAM action catalog all derive from
 * those declarations. This file holds no schema library at run time, so the CLI's fast paths
 * (`version`, `help`) can import it without loading zod.
 */
import type { z } from 'zod';

/** Which module serves a method; a deployment may run a subset. */
export type ModuleName =
  'core' | 'iam' | 'vps' | 'sandboxes' | 'fleet' | 'events' | 'audit' | 'rollout' | 'metal';

/** What IAM decides a call on. */
export interface ResourceRef {
  /** `tenant`, `compute-reservation`, `compute-node`, … */
  type: string;
  /** The resource's id; absent for the tenant itself or a collection. */
  id?: string;
  /** The tenant that owns the resource. */
  tenantId: string;
  /** The principal that owns a personal resource (a sandbox, a volume), when it has one. */
  ownerId?: string;
  /** The project the resource belongs to, for project-scoped bindings. */
  projectId?: string;
}

/** Who may call a method: anyone, any authenticated identity, or those IAM allows an action. */
export type MethodAccess = { public: true } | { authenticated: true } | { action: string };

export interface MethodDefinition<Input extends z.ZodType = z.ZodType, Output extends z.ZodType = z.ZodType> {
  group: string;
  name: string;
  kind: 'query' | 'mutation';
  summary: string;
  module: ModuleName;
  access: MethodAccess;
  /** Whether the input carries `tenantId` (filled from the identity's tenant when omitted). */
  tenantScoped: boolean;
  /** The resource IAM decides on; the tenant itself when absent. */
  resource?: (input: z.output<Input>) => Omit<ResourceRef, 'tenantId'>;
  /**
   * For a method whose action depends on what the input names (`tunnels.open`: a node's console
   * or an instance's), the action of this call; `access.action` lists first, `alsoActions` the rest,
   * so the action catalog knows every one.
   */
  actionFor?: (input: z.output<Input>) => string;
  alsoActions?: readonly string[];
  /**
   * The platform's own methods (releases): only the root tenant acts with them. Another tenant's
   * call is ACCESS_DENIED (reason `platform-only`) before it is decided, whatever its roles grant
   * in its own tenant.
   */
  platformOnly?: boolean;
  /** Creates take an `idempotencyKey`; the same key and input return the first answer. */
  idempotent?: boolean;
  /**
   * For an idempotent method whose handler does nothing outside its transaction: the key's read
   * travels with the handler's first statement instead of a round trip before it, and a kept answer
   * found then rolls back what the handler did. A handler that calls out (to a node, to a service)
   * must not set it: a retry would call out again before its kept answer is seen.
   */
  claimsWithFirstStatement?: boolean;
  /**
   * Top-level output fields that are secrets shown once (a join token): an idempotent method's kept
   * answer stores them sealed under its idempotency key, so a retry gets them back and the database
   * does not hold them.
   */
  sealed?: readonly string[];
  /**
   * Top-level input fields that are secrets (a secret's value): an idempotency key's input hash is
   * keyed by the key rather than a bare SHA-256, so the database holds nothing to guess them against,
   * and a confirmation's summary shows only that they were there.
   */
  secretInput?: readonly string[];
  /**
   * Top-level input fields that name another tenant (an offer's, a quota's): the handler refuses a
   * tenant IAM does not know with NOT_FOUND before the method runs, so a typo is never stored.
   */
  namesTenants?: readonly string[];
  /**
   * A larger request body than the API's 64 KiB, for a method whose input is a whole document
   * (`fleet.plan` and `fleet.apply` take a FleetConfig). Such a body is read only after the
   * credential was accepted, so an anonymous caller can make the server hold no more than 64 KiB.
   */
  maxBodyBytes?: number;
  input: Input;
  output: Output;
}

/** Declares a method; returns its argument, typed. */
export function defineMethod<Input extends z.ZodType, Output extends z.ZodType>(
  definition: MethodDefinition<Input, Output>,
): MethodDefinition<Input, Output> {
  return definition;
}

export type AnyMethod = MethodDefinition<z.ZodType, z.ZodType>;

/** `group.name`, the method's key in the table and in `api GROUP.METHOD`. */
export function methodKey(method: Pick<AnyMethod, 'group' | 'name'>): string {
  return `${method.group}.${method.name}`;
}

/**
 * The path of a method under the API's base: `/reservations/create`; a plugin's group
 * `plugins.ID.GROUP` becomes `/plugins/ID/GROUP/…`.
 */
export function methodPath(method: Pick<AnyMethod, 'group' | 'name'>): string {
  return `/${method.group.replaceAll('.', '/')}/${method.name}`;
}

/** The IAM action of a method, or undefined for public and authenticated-only methods. */
export function methodAction(method: Pick<AnyMethod, 'access'>): string | undefined {
  return 'action' in method.access ? method.access.action : undefined;
}

export function isPublicMethod(method: Pick<AnyMethod, 'access'>): boolean {
  return 'public' in method.access;
}

/** The most a method's request body may hold: its own `maxBodyBytes`, else the API's 64 KiB. */
export function methodBodyLimit(method: Pick<AnyMethod, 'maxBodyBytes'>, fallback: number): number {
  return method.maxBodyBytes ?? fallback;
}

/** One row of the live route table (`system.routes`, `api --list`). */
export interface RouteInfo {
  method: string;
  path: string;
  kind: 'query' | 'mutation';
  public: boolean;
  action: string | null;
  module: string;
  summary: string;
}

export function routeInfo(method: AnyMethod): RouteInfo {
  return {
    method: methodKey(method),
    path: methodPath(method),
    kind: method.kind,
    public: isPublicMethod(method),
    action: methodAction(method) ?? null,
    module: method.module,
    summary: method.summary,
  };
}

/** Input and output types of a method in a table. */
export type MethodInput<M> = M extends MethodDefinition<infer I, z.ZodType> ? z.input<I> : never;
export type MethodOutput<M> = M extends MethodDefinition<z.ZodType, infer O> ? z.output<O> : never;
