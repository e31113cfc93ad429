/**
 * Resource stores: a paged list, and one item. Each load replaces the snapshot, so a view that
 * subscribed re-renders once per change. A list re-reads one item when the live stream says it
 * changed (`refreshItem`) and drops it when the server answers NOT_FOUND or ACCESS_DENIED, so an
 * item the person may no longer see disappears instead of showing stale data.
 */
import { ComputeClientError, isComputeClientError } from '@better-compute/client';
import { Subscribable } from './subscribable.js';

export type LoadStatus = 'idle' | 'loading' | 'ready' | 'error';

/** One page of a list, as every `*.list` method answers. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface ListState<T> {
  status: LoadStatus;
  items: readonly T[];
  /** The cursor of the next page; null when every page is loaded. */
  nextCursor: string | null;
  /** The last failure, kept beside the items that were loaded before it. */
  error: ComputeClientError | null;
  /** When the list was last read in full (ms since the epoch); 0 before. */
  loadedAt: number;
  /** True while a refresh or a further page is being read over loaded items. */
  refreshing: boolean;
}

export interface ListStoreOptions<T> {
  /** Reads one page: the first without a cursor. */
  load(cursor: string | undefined): Promise<Page<T>>;
  /** Reads one item, for `refreshItem`; without it, a change refreshes the first page. */
  readOne?: ((id: string) => Promise<T>) | undefined;
  /** The item's id; default `item.id`. */
  idOf?: ((item: T) => string) | undefined;
  /** Whether a new item goes first (newest-first lists, the default) or last. */
  insertAt?: 'start' | 'end' | undefined;
}

/** The error every store keeps, whatever was thrown. */
export function asClientError(error: unknown): ComputeClientError {
  if (isComputeClientError(error)) return error;
  return new ComputeClientError('UNAVAILABLE', error instanceof Error ? error.message : String(error), {
    status: 0,
    cause: error,
  });
}

/** Whether an answer means "this item is gone for you": deleted, or no longer yours to see. */
export function isGone(error: unknown): boolean {
  return isComputeClientError(error) && (error.code === 'NOT_FOUND' || error.code === 'ACCESS_DENIED');
}

const defaultId = (item: unknown) => String((item as { id: unknown }).id);

/** A paged list of one resource kind. */
export class ListStore<T> extends Subscribable<ListState<T>> {
  readonly #options: ListStoreOptions<T>;
  readonly #idOf: (item: T) => string;
  // A refresh that started before another one finished must not overwrite the newer answer.
  #generation = 0;
  #loading: Promise<void> | null = null;

  constructor(options: ListStoreOptions<T>) {
    super({ status: 'idle', items: [], nextCursor: null, error: null, loadedAt: 0, refreshing: false });
    this.#options = options;
    this.#idOf = options.idOf ?? defaultId;
  }

  /** Whether a view has asked for the list (only those are kept live and polled). */
  get loaded(): boolean {
    return this.get().status !== 'idle';
  }

  /** Loads the first page unless it is loaded or loading. */
  ensure(): Promise<void> {
    if (this.#loading) return this.#loading;
    if (this.loaded) return Promise.resolve();
    return this.refresh();
  }

  /** Reads the first page again; the items shown stay until the answer replaces them. */
  refresh(): Promise<void> {
    const generation = ++this.#generation;
    const state = this.get();
    this.set(
      state.status === 'idle' || (state.status === 'error' && state.items.length === 0)
        ? { ...state, status: 'loading', error: null }
        : { ...state, refreshing: true },
    );
    const loading = this.#options.load(undefined).then(
      (page) => {
        if (generation !== this.#generation) return;
        this.set({
          status: 'ready',
          items: page.items,
          nextCursor: page.nextCursor,
          error: null,
          loadedAt: Date.now(),
          refreshing: false,
        });
      },
      (error: unknown) => {
        if (generation !== this.#generation) return;
        this.set({ ...this.get(), status: 'error', error: asClientError(error), refreshing: false });
      },
    );
    const tracked: Promise<void> = loading.finally(() => {
      if (this.#loading === tracked) this.#loading = null;
    });
    this.#loading = tracked;
    return tracked;
  }

  /** Appends the next page, when there is one. */
  async loadMore(): Promise<void> {
    const state = this.get();
    if (!state.nextCursor || state.refreshing) return;
    const generation = this.#generation;
    this.set({ ...state, refreshing: true });
    try {
      const page = await this.#options.load(state.nextCursor);
      if (generation !== this.#generation) return;
      const seen = new Set(this.get().items.map(this.#idOf));
      this.set({
        ...this.get(),
        items: [...this.get().items, ...page.items.filter((item) => !seen.has(this.#idOf(item)))],
        nextCursor: page.nextCursor,
        error: null,
        refreshing: false,
      });
    } catch (error) {
      if (generation !== this.#generation) return;
      this.set({ ...this.get(), error: asClientError(error), refreshing: false });
    }
  }

  /** Puts an item in the list: replaces the one with its id, or adds it. */
  upsert(item: T): void {
    const state = this.get();
    const id = this.#idOf(item);
    const index = state.items.findIndex((existing) => this.#idOf(existing) === id);
    const items = [...state.items];
    if (index >= 0) items[index] = item;
    else if ((this.#options.insertAt ?? 'start') === 'start') items.unshift(item);
    else items.push(item);
    this.set({ ...state, items });
  }

  /** Takes an item out of the list. */
  remove(id: string): void {
    const state = this.get();
    const items = state.items.filter((item) => this.#idOf(item) !== id);
    if (items.length !== state.items.length) this.set({ ...state, items });
  }

  /**
   * Re-reads one item after a change: puts the fresh copy in, or drops it on NOT_FOUND or
   * ACCESS_DENIED. Other failures leave the list as it was (the next event or poll tries again).
   */
  async refreshItem(id: string): Promise<void> {
    if (!this.loaded) return;
    if (!this.#options.readOne) return this.refresh();
    try {
      this.upsert(await this.#options.readOne(id));
    } catch (error) {
      if (isGone(error)) this.remove(id);
    }
  }
}

export interface DetailState<T> {
  status: LoadStatus;
  data: T | null;
  error: ComputeClientError | null;
}

/** One item (a reservation's page), or any single answer (the capacity summary). */
export class DetailStore<T> extends Subscribable<DetailState<T>> {
  readonly #read: () => Promise<T>;
  #generation = 0;
  #loading: Promise<void> | null = null;

  constructor(read: () => Promise<T>) {
    super({ status: 'idle', data: null, error: null });
    this.#read = read;
  }

  get loaded(): boolean {
    return this.get().status !== 'idle';
  }

  ensure(): Promise<void> {
    if (this.#loading) return this.#loading;
    if (this.loaded) return Promise.resolve();
    return this.refresh();
  }

  refresh(): Promise<void> {
    const generation = ++this.#generation;
    if (this.get().data === null) this.set({ ...this.get(), status: 'loading', error: null });
    const loading = this.#read().then(
      (data) => {
        if (generation === this.#generation) this.set({ status: 'ready', data, error: null });
      },
      (error: unknown) => {
        if (generation !== this.#generation) return;
        // Gone for this person: the data shown is no longer theirs to see.
        const gone = isGone(error);
        this.set({ status: 'error', data: gone ? null : this.get().data, error: asClientError(error) });
      },
    );
    const tracked = loading.finally(() => {
      if (this.#loading === tracked) this.#loading = null;
    });
    this.#loading = tracked;
    return tracked;
  }

  /** Replaces the data with an answer already in hand (a mutation's result). */
  replace(data: T): void {
    this.#generation++;
    this.set({ status: 'ready', data, error: null });
  }
}
