'use client';
/** The few building blocks every page shares: errors in plain words, confirmations, paged tables. */
import { useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { isComputeClientError } from '@better-compute/client';
import type { ListState, ListStore, LiveConsole } from '@better-compute/console-kit';
import { useStore } from '@better-compute/console-kit/react';

/**
 * An error as the server said it, with its hint; nothing when there is none. A delegated call held
 * back for a person's approval (CONFIRMATION_REQUIRED with its confirmation id) reads "awaiting
 * approval" with that id, as the console guide says, rather than as a failure.
 */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  // Only the held call's answer carries the window (expiresAt); a spent or declined confirmation's
  // CONFIRMATION_REQUIRED names its id too, but nothing awaits approval then.
  const held = isComputeClientError(error)
    ? (error.details as { confirmationId?: unknown; expiresAt?: unknown } | undefined)
    : undefined;
  const confirmationId = held?.confirmationId;
  if (
    isComputeClientError(error) &&
    error.code === 'CONFIRMATION_REQUIRED' &&
    typeof confirmationId === 'string' &&
    typeof held?.expiresAt === 'string'
  )
    return (
      <div className="note" role="status" data-awaiting-approval={confirmationId}>
        <p>
          Awaiting approval: confirmation <code>{confirmationId}</code>.
        </p>
        {error.hint ? <p className="note">{error.hint}</p> : null}
      </div>
    );
  const message = error instanceof Error ? error.message : String(error);
  const hint = isComputeClientError(error) ? error.hint : undefined;
  const code = isComputeClientError(error) ? error.code : undefined;
  return (
    <div className="error" role="alert">
      <p>
        {message}
        {code ? <span className="note"> ({code})</span> : null}
      </p>
      {hint ? <p className="note">{hint}</p> : null}
    </div>
  );
}

/**
 * A button that asks first, naming what happens, and only then runs `onConfirm`. Used for every
 * action that destroys or releases something.
 */
export function ConfirmButton({
  label,
  title,
  question,
  confirmLabel,
  disabled,
  onConfirm,
  reason,
}: {
  label: string;
  title?: string;
  question: ReactNode;
  confirmLabel: string;
  disabled?: boolean;
  reason?: string | undefined;
  onConfirm: () => Promise<unknown> | void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(false);
  useEffect(() => {
    if (open) dialog.current?.showModal();
    else dialog.current?.close();
  }, [open]);
  return (
    <>
      <button
        type="button"
        className="danger"
        disabled={disabled}
        title={reason ?? title}
        aria-label={title ?? label}
        onClick={() => setOpen(true)}
      >
        {label}
      </button>
      <dialog ref={dialog} onClose={() => setOpen(false)} aria-label={title ?? label}>
        {open ? (
          <form
            method="dialog"
            onSubmit={(event) => {
              event.preventDefault();
              setOpen(false);
              void onConfirm();
            }}
          >
            <p>{question}</p>
            <div className="row">
              <button type="submit" className="danger">
                {confirmLabel}
              </button>
              <button type="button" className="secondary" autoFocus onClick={() => setOpen(false)}>
                Cancel
              </button>
            </div>
          </form>
        ) : null}
      </dialog>
    </>
  );
}

/** A table over a list store: a header, a row per item, and the next page when there is one. */
export function PagedTable<T>({
  state,
  caption,
  columns,
  row,
  empty,
  onMore,
}: {
  state: ListState<T>;
  caption: string;
  columns: string[];
  row: (item: T) => ReactNode;
  empty: string;
  onMore: () => void;
}) {
  if (state.status === 'idle' || state.status === 'loading')
    return <p aria-busy="true">Loading {caption.toLowerCase()}…</p>;
  return (
    <>
      <ErrorNote error={state.error} />
      {state.items.length === 0 ? (
        <p className="note">{empty}</p>
      ) : (
        // Focusable: below 48rem a table scrolls sideways on its own, and a person on a keyboard must
        // reach it even when it holds no button (every one disabled for a reader).
        <table tabIndex={0}>
          <caption className="skip">{caption}</caption>
          <thead>
            <tr>
              {columns.map((column) => (
                <th key={column} scope="col">
                  {column}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>{state.items.map(row)}</tbody>
        </table>
      )}
      {state.nextCursor ? (
        <button type="button" className="secondary" disabled={state.refreshing} onClick={onMore}>
          Next page
        </button>
      ) : null}
    </>
  );
}

/** Why a button is disabled, for its title: the state first, then the advisory IAM check. */
export function disabledReason(
  stateAllows: boolean,
  stateWhy: string,
  allowed: boolean | undefined,
): string | undefined {
  if (!stateAllows) return stateWhy;
  if (allowed === undefined) return 'Checking whether you may…';
  if (!allowed) return 'Your roles do not allow this';
  return undefined;
}

/**
 * An id as people read it: `res_…7Q2ZKD`, the prefix and the last six characters, which tell the
 * rows of one table apart. Ids too short to gain from it are shown whole.
 */
function shortId(id: string): string {
  const cut = id.indexOf('_');
  const body = cut === -1 ? id : id.slice(cut + 1);
  return body.length <= 10 ? id : `${id.slice(0, cut + 1)}…${body.slice(-6)}`;
}

/**
 * A thing named for people: its name when it has one, and its short id, which a press turns into
 * the full id (selectable, to copy) and back. The full id is also the short one's title.
 */
export function IdRef({ id, name }: { id: string; name?: string | null | undefined }) {
  const [full, setFull] = useState(false);
  const short = shortId(id);
  return (
    <span className="id-ref" data-id={id}>
      {name ? <span className="id-name">{name}</span> : null}
      {short === id ? (
        <code>{id}</code>
      ) : (
        <button
          type="button"
          className="id"
          aria-expanded={full}
          // The name read aloud starts with the text shown, as the short id's reader expects.
          aria-label={`${full ? id : short}${name ? ` (${name})` : ''}: ${full ? 'press for the short id' : 'press for the full id'}`}
          title={id}
          onClick={() => setFull((shown) => !shown)}
        >
          <code>{full ? id : short}</code>
        </button>
      )}
    </span>
  );
}

/** A store that never changes: what a name hook reads before the live console has started. */
const NO_LIST = { subscribe: () => () => undefined, get: () => undefined };

/** The names a live list holds, by id; none while there is no live console yet. */
function useNames<T extends { id: string; name: string }>(
  store: ListStore<T> | undefined,
): ReadonlyMap<string, string> {
  const state = useStore<ListState<T> | undefined>(store ?? NO_LIST);
  useEffect(() => void store?.ensure(), [store]);
  const items = state?.items;
  return useMemo(() => new Map((items ?? []).map((item) => [item.id, item.name])), [items]);
}

/** The names of the pools the tenant sees (the live pools store), by id, for IdRef. */
export function usePoolNames(live: LiveConsole | null): ReadonlyMap<string, string> {
  return useNames(live?.pools);
}

/**
 * The names of the nodes the tenant sees, by id, for IdRef: those of the live nodes store's pages
 * read so far, so a node beyond them shows its short id alone.
 */
export function useNodeNames(live: LiveConsole | null): ReadonlyMap<string, string> {
  return useNames(live?.nodes);
}

export function when(value: string | null | undefined): string {
  if (!value) return '—';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString();
}

/** A labelled choice among items named by id (a pool, a flavor, an image, a template). */
export function ChoiceField<T extends { id: string }>({
  label,
  name,
  items,
  value,
  onChange,
  text,
}: {
  label: string;
  name: string;
  items: readonly T[];
  value: string;
  onChange: (id: string) => void;
  /** What the option says of its item. */
  text: (item: T) => ReactNode;
}) {
  return (
    <label>
      {label}
      <select name={name} value={value} onChange={(e) => onChange(e.target.value)}>
        {items.map((item) => (
          <option key={item.id} value={item.id}>
            {text(item)}
          </option>
        ))}
      </select>
    </label>
  );
}

/** The time now, ticking every second: one timer for every countdown on a page. */
export function useNow(): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  return now;
}

/** A list's "Show" select over its states; `label` names the form for assistive technology. */
export function StateFilter<F extends string>({
  label,
  value,
  filters,
  labels,
  isFilter,
  onChange,
}: {
  label: string;
  value: F;
  filters: readonly F[];
  labels: Record<F, string>;
  isFilter: (value: string) => value is F;
  onChange: (filter: F) => void;
}) {
  return (
    <form className="inline" aria-label={label} onSubmit={(event) => event.preventDefault()}>
      <label>
        Show
        <select
          name="state"
          value={value}
          onChange={(event) => {
            if (isFilter(event.target.value)) onChange(event.target.value);
          }}
        >
          {filters.map((filter) => (
            <option key={filter} value={filter}>
              {labels[filter]}
            </option>
          ))}
        </select>
      </label>
    </form>
  );
}

/** A labelled text input with the server's message for it, tied by aria-describedby. */
export function Field({
  form,
  name,
  label,
  value,
  onChange,
  error,
  required,
  size,
  type,
}: {
  form: string;
  name: string;
  label: ReactNode;
  value: string;
  onChange: (value: string) => void;
  error: string | undefined;
  required?: boolean;
  size?: number;
  type?: string;
}) {
  const errorId = `${form}-${name}-error`;
  return (
    <label>
      {label}
      <input
        name={name}
        value={value}
        required={required}
        size={size}
        type={type}
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? errorId : undefined}
        onChange={(e) => onChange(e.target.value)}
      />
      <FieldError id={errorId} name={name} error={error} />
    </label>
  );
}

/** The message placed on a field (its input names `id` in aria-describedby); nothing without one. */
export function FieldError({ id, name, error }: { id: string; name: string; error: string | undefined }) {
  return error ? (
    <span id={id} className="field-error" data-field-error={name}>
      {error}
    </span>
  ) : null;
}
