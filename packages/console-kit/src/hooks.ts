/**
 * React hooks over the stores, on `useSyncExternalStore` with the same snapshot on the server, so
 * they render during SSR (a list renders "loading" there and loads in the browser). They use the
 * React passed to `bindReact`: the `/react` entry binds the app's own `react`; an app with its own
 * build of React, or preact/compat, calls `bindReact(React)` from the main entry instead.
 */
import type { ComputeClientError } from '@better-compute/client';
import type { ActionDescription } from './actions.js';
import type { PermissionCheck, Permissions } from './permissions.js';
import {
  asClientError,
  type DetailState,
  type DetailStore,
  type ListState,
  type ListStore,
} from './stores.js';
import { Subscribable } from './subscribable.js';
import { mountTerminal, type TerminalOptions, type TerminalStatus } from './terminal.js';

/** The parts of React the hooks use. */
export interface ReactLike {
  useSyncExternalStore<T>(
    subscribe: (listener: () => void) => () => void,
    get: () => T,
    getServer?: () => T,
  ): T;
  useEffect(effect: () => void | (() => void), deps?: readonly unknown[]): void;
  useState<T>(initial: T | (() => T)): [T, (next: T) => void];
  useRef<T>(initial: T): { current: T };
}

let bound: ReactLike | undefined;

/** Binds the hooks to a React (or a compatible library). */
export function bindReact(react: ReactLike): void {
  bound = react;
}

function react(): ReactLike {
  if (!bound)
    throw new Error(
      'console-kit hooks need React: import them from @better-compute/console-kit/react, or call bindReact(React) first',
    );
  return bound;
}

/** A list store's state; loads the first page on first use (in the browser). */
export function useList<T>(store: ListStore<T>): ListState<T> {
  const r = react();
  const state = r.useSyncExternalStore(store.subscribe, store.get, store.get);
  r.useEffect(() => void store.ensure(), [store]);
  return state;
}

/** A detail store's state; loads it on first use (in the browser). */
export function useDetail<T>(store: DetailStore<T>): DetailState<T> {
  const r = react();
  const state = r.useSyncExternalStore(store.subscribe, store.get, store.get);
  r.useEffect(() => void store.ensure(), [store]);
  return state;
}

/** Any readable store's value. */
export function useStore<T>(store: { subscribe(listener: () => void): () => void; get(): T }): T {
  return react().useSyncExternalStore(store.subscribe, store.get, store.get);
}

const noPermissions = {
  subscribe: () => () => {},
};

/**
 * Whether IAM would allow the action: undefined while unknown (render the button disabled) or when
 * IAM could not answer, then true or false. Without `permissions`, or without an action, undefined.
 */
export function usePermission(
  permissions: Permissions | undefined,
  action: ActionDescription | PermissionCheck | null | undefined,
): boolean | undefined {
  const r = react();
  const source = permissions ?? noPermissions;
  const get = () => (permissions && action ? permissions.peek(action) : undefined);
  const answer = r.useSyncExternalStore(source.subscribe, get, () => undefined);
  const key = action ? `${action.action}|${action.resource.type}|${action.resource.id ?? ''}` : '';
  r.useEffect(() => {
    if (!permissions || !action || permissions.peek(action) !== undefined) return;
    // A failed batch leaves the answer unknown: the button stays disabled.
    permissions.can(action).catch(() => {});
  }, [permissions, key, answer]);
  return answer;
}

export interface ActionState<T> {
  pending: boolean;
  result: T | undefined;
  error: ComputeClientError | undefined;
}

/** A call's progress as a store, so `useAction` is the same hook on the server and in the browser. */
export class ActionRunner<I, T> extends Subscribable<ActionState<T>> {
  readonly #call: (input: I) => Promise<T>;
  constructor(call: (input: I) => Promise<T>) {
    super({ pending: false, result: undefined, error: undefined });
    this.#call = call;
  }
  run = async (input: I): Promise<T | undefined> => {
    this.set({ pending: true, result: undefined, error: undefined });
    try {
      const result = await this.#call(input);
      this.set({ pending: false, result, error: undefined });
      return result;
    } catch (error) {
      this.set({ pending: false, result: undefined, error: asClientError(error) });
      return undefined;
    }
  };
  reset = (): void => this.set({ pending: false, result: undefined, error: undefined });
}

export interface UseActionResult<I, T> extends ActionState<T> {
  /** Runs the call; resolves with its answer, or undefined after an error (kept in `error`). */
  run(input: I): Promise<T | undefined>;
  reset(): void;
}

/**
 * A mutation for a button: `run`, `pending`, and the outcome or the error. `call` is the method
 * (`(input) => client.call('reservations.release', input)`); on success `detail` (when given) shows
 * the answer at once, before the event stream confirms it.
 */
export function useAction<I, T>(
  call: (input: I) => Promise<T>,
  detail?: DetailStore<T> | ListStore<T> | undefined,
): UseActionResult<I, T> {
  const r = react();
  // The runner lives as long as the component; the call it makes is always this render's, so a
  // button whose action depends on the item's state (cordon, then uncordon) calls the current one.
  const latest = r.useRef({ call, detail });
  latest.current = { call, detail };
  const [runner] = r.useState(
    () =>
      new ActionRunner<I, T>(async (input) => {
        const { call: current, detail: target } = latest.current;
        const result = await current(input);
        if (target && 'replace' in target) target.replace(result);
        else if (target && 'upsert' in target) target.upsert(result);
        return result;
      }),
  );
  const state = r.useSyncExternalStore(runner.subscribe, runner.get, runner.get);
  return { ...state, run: runner.run, reset: runner.reset };
}

const CONNECTING: TerminalStatus = { phase: 'connecting', text: 'Connecting…', error: null };

/**
 * console-kit's terminal (`mountTerminal`) in a React component: attach `host` to the element the
 * terminal draws in; `status` follows it. A new `options.open` (keep it in `useCallback`) opens a
 * new tunnel; unmounting detaches (the remote keeps running).
 *
 * @example
 * import '@xterm/xterm/css/xterm.css';
 * const open = useCallback(() => client.tunnels.open({ nodeId, op: 'console' }), [client, nodeId]);
 * const { host, status } = useTerminal({ open, xterm: loadXterm });
 * return <><p role="status">{status.text}</p><div ref={host} /></>;
 */
export function useTerminal(options: TerminalOptions): {
  host: { current: HTMLDivElement | null };
  status: TerminalStatus;
} {
  const r = react();
  const host = r.useRef<HTMLDivElement | null>(null);
  const latest = r.useRef(options);
  latest.current = options;
  const [status, setStatus] = r.useState<TerminalStatus>(CONNECTING);
  r.useEffect(() => {
    const element = host.current;
    if (!element) return;
    const terminal = mountTerminal(element, { ...latest.current, open: options.open });
    setStatus(terminal.get());
    const stop = terminal.subscribe(() => setStatus(terminal.get()));
    return () => {
      stop();
      terminal.close();
    };
  }, [options.open]);
  return { host, status };
}
