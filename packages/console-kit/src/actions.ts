/**
 * What a button does, derived from the method table (never declared by hand): the route it posts
 * to, the IAM action the server decides it as, and the resource it is decided on. The same
 * description is what `createPermissions` asks IAM about, so a button's advisory check and the
 * server's real decision cannot drift apart.
 */
import { ComputeError, type AnyMethod, type ModuleName } from '@better-compute/core';
import { methods } from '@better-compute/core/methods';

export interface ActionResource {
  type: string;
  id?: string;
}

export interface ActionDescription {
  /** The method's route under the API's base: `reservations/release`. */
  path: string;
  /** The method table's key: `reservations.release`. */
  method: string;
  /** The IAM action the call is decided as; null for a method any signed-in caller may use. */
  action: string | null;
  /** What the call is decided on: the item, or the tenant itself for a collection. */
  resource: ActionResource;
  kind: 'query' | 'mutation';
}

const table = methods as unknown as Record<string, AnyMethod>;

// The table's `resource` functions read the id from the input field that names the item
// (`reservationId`, `nodeId`, …); an input answering every field with the id gives the resource.
function resourceOf(method: AnyMethod, id: string | undefined): ActionResource {
  if (!method.resource) return { type: 'tenant' };
  const input = new Proxy({}, { get: (_target, key) => (typeof key === 'string' ? id : undefined) });
  const resource = method.resource(input as never);
  return id === undefined ? { type: resource.type } : { type: resource.type, id };
}

function describe(method: AnyMethod, id: string | undefined): ActionDescription {
  return {
    path: `${method.group}/${method.name}`,
    method: `${method.group}.${method.name}`,
    action: 'action' in method.access ? method.access.action : null,
    resource: resourceOf(method, id),
    kind: method.kind,
  };
}

/**
 * The description of `group.name` on the item `id`.
 *
 * @example describeAction('reservations', 'release', 'rsv_…')
 * // { path: 'reservations/release', action: 'compute:reservations:release',
 * //   resource: { type: 'compute-reservation', id: 'rsv_…' }, kind: 'mutation', … }
 */
export function describeAction(group: string, name: string, id?: string): ActionDescription {
  const method = table[`${group}.${name}`];
  if (!method || method.group !== group) {
    throw new ComputeError('INVALID_ARGUMENT', `${group}.${name} is not a method of the API table`, {
      hint: 'Name a method as the table lists it, for example describeAction("reservations", "release", id).',
    });
  }
  return describe(method, id);
}

export interface ActionsForOptions {
  /** Only methods of these modules (the ones the deployment runs). */
  modules?: readonly ModuleName[] | undefined;
}

/**
 * Every mutation on one item of a resource kind (`reservations`, `nodes`): the methods of that
 * group whose resource is the item, in table order.
 */
export function actionsFor(group: string, id: string, options: ActionsForOptions = {}): ActionDescription[] {
  return Object.values(table)
    .filter(
      (method) =>
        method.group === group &&
        method.kind === 'mutation' &&
        method.resource !== undefined &&
        (!options.modules || options.modules.includes(method.module)),
    )
    .map((method) => describe(method, id));
}
