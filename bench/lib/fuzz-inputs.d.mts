import type { Arbitrary } from 'fast-check';

export interface HostileInputOptions {
  /** The caller's tenant, put in `tenantId`. */
  tenantId: string;
  /** The id prefix of a field that names an id (`nodeId` → `node`), or undefined. */
  idPrefix(field: string): string | undefined;
}

/** Hostile inputs for one method's input JSON schema. */
export function hostileInputs(schema: unknown, options: HostileInputOptions): Arbitrary<unknown>;

/** Raw bodies that are not JSON objects at all. */
export const hostileBodies: Arbitrary<string>;
