/**
 * THE CONTRACT: every API method, once. Routes, the client, `api --list`, `help --json` and IAM's
 * action catalog derive from this table. Import it lazily: it loads zod.
 */
import type { AnyMethod } from '../contract.js';
import { eventsList } from './events.js';
import { systemRoutes, systemVersion, systemWhoami } from './system.js';

export * from './common.js';
export { eventSchema } from './events.js';

export const methods = {
  'system.version': systemVersion,
  'system.whoami': systemWhoami,
  'system.routes': systemRoutes,
  'events.list': eventsList,
} as const satisfies Record<string, AnyMethod>;

export type MethodTable = typeof methods;
export type MethodName = keyof MethodTable;

/** Every method, in table order. */
export const methodList: readonly AnyMethod[] = Object.values(methods);
