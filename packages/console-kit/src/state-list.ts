/**
 * A list filtered by its items' state, as the batches and confirmations views show theirs: the
 * filter is a store, a change of it reads the list again, and an item read or answered anew goes
 * into the list while it matches the filter and leaves it once it does not.
 */
import type { TrackedStore } from './live.js';
import { isGone, ListStore, type Page } from './stores.js';
import { ValueStore } from './subscribable.js';

export interface StateListOptions<T, F extends string> {
  /** The first filter; `all` shows every state. */
  filter: F;
  /** A page of the items in `state` (every state when undefined). */
  load(state: Exclude<F, 'all'> | undefined, cursor: string | undefined): Promise<Page<T>>;
  /** One item, read again. */
  readOne(id: string): Promise<T>;
}

export interface StateList<T, F extends string> {
  readonly list: ListStore<T>;
  readonly filter: ValueStore<F>;
  /** What the live stream keeps current: an item's event re-reads it (or drops it when gone). */
  readonly tracked: TrackedStore;
  /** Shows another state's items (reads the list again). */
  setFilter(filter: F): Promise<void>;
  /** Puts an item the server answered into the list, or out of it when the filter hides it. */
  place(item: T): T;
}

export function stateList<T extends { id: string; state: string }, F extends string>(
  options: StateListOptions<T, F>,
): StateList<T, F> {
  const filter = new ValueStore<F>(options.filter);
  const list = new ListStore<T>({
    load: (cursor) => {
      const state = filter.get();
      return options.load(state === 'all' ? undefined : (state as Exclude<F, 'all'>), cursor);
    },
    readOne: (id) => options.readOne(id),
  });
  const place = (item: T) => {
    if (filter.get() === 'all' || filter.get() === item.state) list.upsert(item);
    else list.remove(item.id);
    return item;
  };
  const tracked: TrackedStore = {
    get loaded() {
      return list.loaded;
    },
    refresh: () => list.refresh(),
    async refreshItem(id) {
      if (!list.loaded) return;
      try {
        place(await options.readOne(id));
      } catch (error) {
        if (isGone(error)) list.remove(id);
      }
    },
  };
  return {
    list,
    filter,
    tracked,
    place,
    setFilter(next) {
      filter.set(next);
      return list.refresh();
    },
  };
}
