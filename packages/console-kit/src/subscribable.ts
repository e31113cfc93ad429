/**
 * The one contract every console-kit store keeps: `subscribe(listener)` returns the unsubscribe,
 * `get()` returns the current snapshot, and a snapshot is never mutated, only replaced. That is
 * exactly what React's `useSyncExternalStore` (and Solid's `from`, Svelte's stores, Vue's
 * `shallowRef` with a watcher) need, so a framework adapter is a few lines.
 */

export type Listener = () => void;

/** A readable, observable value. */
export interface Readable<T> {
  subscribe(listener: Listener): () => void;
  get(): T;
}

/** Listeners and a snapshot; subclasses replace the snapshot with `set`. */
export class Subscribable<T> implements Readable<T> {
  #listeners = new Set<Listener>();
  #state: T;

  constructor(initial: T) {
    this.#state = initial;
  }

  /** Calls `listener` after every change; returns the function that stops it. */
  subscribe = (listener: Listener): (() => void) => {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  };

  get = (): T => this.#state;

  /** Replaces the snapshot and tells every listener (a listener that throws does not stop the others). */
  protected set(next: T): void {
    if (Object.is(next, this.#state)) return;
    this.#state = next;
    for (const listener of [...this.#listeners]) {
      try {
        listener();
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}

/** A store holding one value anyone may set: the connection state, a selected tenant. */
export class ValueStore<T> extends Subscribable<T> {
  override set(next: T): void {
    super.set(next);
  }

  update(change: (current: T) => T): void {
    this.set(change(this.get()));
  }
}
