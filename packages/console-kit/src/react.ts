/**
 * `@better-compute/console-kit/react`: the hooks, bound to the app's own `react` (an optional peer,
 * React 19).
 */
import * as React from 'react';
import { bindReact, type ReactLike } from './hooks.js';

bindReact(React as unknown as ReactLike);

export {
  useAction,
  useDetail,
  useList,
  usePermission,
  useStore,
  useTerminal,
  type UseActionResult,
} from './hooks.js';
