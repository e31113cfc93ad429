/**
 * The one output formatter. Results carry the server's words, so every string is made
 * terminal-safe on its way out: raw strings through safeText (control characters become spaces;
 * line breaks and tabs stay), table cells through safeCell (one line, no controls at all), and JSON
 * through safeJson (DEL, the C1 controls and U+2028/U+2029 escaped as \uXXXX).
 */
import { safeCell, safeJson, safeText, isRecord } from '@better-compute/core';
import { CliError } from './errors.js';
import type { OutputFormat } from './define.js';

export interface FormatOptions {
  /** The format asked for with --format, if any. */
  format?: OutputFormat | undefined;
  /** The command's default when --format is absent. */
  defaultFormat?: OutputFormat | undefined;
  query?: string | undefined;
  /** The rows of a table view of the whole result, when they are not the value itself or its `items`; never of a --query's selection. */
  tableRows?: ((value: unknown) => unknown[] | undefined) | undefined;
}

type Segment = { field: string } | { index: number } | { each: true };

function parseQuery(path: string): Segment[] {
  const segments: Segment[] = [];
  const text = path.startsWith('.') ? path.slice(1) : path;
  const pattern = /([A-Za-z0-9_$-]+)|\[(\d*)\]|(\.)/gy;
  let expectField = true;
  let match: RegExpExecArray | null;
  let consumed = 0;
  while ((match = pattern.exec(text)) !== null) {
    consumed = pattern.lastIndex;
    if (match[1] !== undefined) {
      if (!expectField) break;
      segments.push({ field: match[1] });
      expectField = false;
    } else if (match[2] !== undefined) {
      segments.push(match[2] === '' ? { each: true } : { index: Number(match[2]) });
      expectField = false;
    } else {
      if (expectField) break;
      expectField = true;
    }
  }
  if (text === '' || consumed !== text.length || expectField) {
    throw new CliError(
      'INVALID_ARGUMENT',
      `--query "${path}" is not a path like binding, items[].id or findings[0].check`,
      {
        details: { field: 'query' },
      },
    );
  }
  return segments;
}

/** What the result is, for a --query that names a field it does not have. */
function kindOf(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  return `a ${typeof value}`;
}

/**
 * Refuses a path whose first field is not one of the result's: `--query nosuch` or `--query itme`
 * would print null (or nothing) and exit 0, so a typo in a script goes unnoticed. Only the first
 * segment is checked: further in, a field may be absent from some items and an index past the end
 * of a short list, as data goes, and those select null.
 */
function checkFirstField(value: unknown, path: string, first: Segment | undefined): void {
  if (first === undefined || !('field' in first)) return;
  if (isRecord(value) && Object.hasOwn(value, first.field)) return;
  const fields = isRecord(value) ? Object.keys(value) : [];
  const has = isRecord(value)
    ? fields.length
      ? `its fields are ${fields.join(', ')}`
      : 'it has no fields'
    : `it is ${kindOf(value)}${Array.isArray(value) ? ': start the path with [] or [N]' : ''}`;
  throw new CliError(
    'INVALID_ARGUMENT',
    `--query "${path}": the result has no field "${first.field}"; ${has}`,
    {
      // The command has run by now (a create has created): say so, so nobody retries it to mend a path.
      hint: "Start the path with one of the result's fields, or run without --query to see the whole result; the command itself ran, only its output was not printed.",
      details: { field: 'query', fields },
    },
  );
}

/**
 * The part of `value` a --query path selects. `items[].id` maps over the array, so the answer is a
 * list; a field that is absent selects undefined, except the first: a path must start with one of
 * the result's own fields (INVALID_ARGUMENT otherwise).
 */
export function applyQuery(value: unknown, path: string): { value: unknown; many: boolean } {
  const segments = parseQuery(path);
  checkFirstField(value, path, segments[0]);
  let values: unknown[] = [value];
  let many = false;
  for (const segment of segments) {
    if ('field' in segment)
      values = values.map((v) =>
        isRecord(v) && Object.hasOwn(v, segment.field) ? v[segment.field] : undefined,
      );
    else if ('index' in segment)
      values = values.map((v): unknown => (Array.isArray(v) ? (v as unknown[])[segment.index] : undefined));
    else {
      values = values.flatMap((v): unknown[] => (Array.isArray(v) ? (v as unknown[]) : []));
      many = true;
    }
  }
  return many ? { value: values, many } : { value: values[0], many };
}

function jsonOf(value: unknown, indent: boolean): string {
  return safeJson(JSON.stringify(value === undefined ? null : value, null, indent ? 2 : undefined));
}

function cellOf(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return safeCell(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return safeCell(JSON.stringify(value));
}

/** Rows as an aligned table: a header of the rows' keys, one line per row. */
export function renderTable(rows: readonly unknown[]): string {
  if (rows.length === 0) return '(no rows)';
  // Records without a single key (labels that are all {}) have no columns: print them as values.
  const records = rows.every(isRecord) && rows.some((row) => Object.keys(row).length > 0);
  const columns: string[] = [];
  if (records) {
    for (const row of rows as Record<string, unknown>[])
      for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  } else {
    columns.push('value');
  }
  const cells = rows.map((row) =>
    records ? columns.map((key) => cellOf((row as Record<string, unknown>)[key])) : [cellOf(row)],
  );
  const header = columns.map((column) => safeCell(column));
  const widths = header.map((title, i) => Math.max(title.length, ...cells.map((line) => line[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((value, i) => (i === values.length - 1 ? value : value.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...cells.map(line)].join('\n');
}

function tableOf(value: unknown, tableRows?: FormatOptions['tableRows']): string {
  const custom = tableRows?.(value);
  if (custom) return renderTable(custom);
  if (isRecord(value) && Array.isArray(value.items)) {
    const body = renderTable(value.items);
    const next = value.nextCursor;
    return typeof next === 'string' && next !== ''
      ? `${body}\n(more rows: --cursor ${safeCell(next)})`
      : body;
  }
  if (Array.isArray(value)) return renderTable(value);
  if (isRecord(value)) return renderTable(Object.entries(value).map(([key, v]) => ({ key, value: v })));
  return jsonOf(value, true);
}

const isScalar = (value: unknown): boolean => value === null || typeof value !== 'object';

/**
 * Renders a result as the text to print; undefined prints nothing. A --query selects from the
 * command's result, whatever --format says: the format only renders what it selected.
 */
export function formatResult(value: unknown, options: FormatOptions = {}): string | undefined {
  if (options.query === undefined) {
    if (value === undefined) return undefined;
    if (typeof value === 'string') return safeText(value);
    const format = options.format ?? options.defaultFormat ?? 'json';
    if (format === 'table') return tableOf(value, options.tableRows);
    return jsonOf(value, format === 'json');
  }
  const { value: selected, many } = applyQuery(value, options.query);
  // A string (or a --query that selects one) prints raw under every --format, made safe for the
  // terminal: `C=$(… --format json --query nextCursor)` must capture the cursor, not its quotes.
  if (typeof selected === 'string') return safeText(selected);
  // `--query items[].id` prints one value per line, for shell loops: without --format, and with
  // --format table too (the default of lists), where a one-column table would only add a header.
  // An absent field is `null` on its line, as in JSON, never a blank line.
  if (
    many &&
    (options.format === undefined || options.format === 'table') &&
    (selected as unknown[]).every(isScalar)
  ) {
    return (selected as unknown[])
      .map((v) => (typeof v === 'string' ? safeText(v) : JSON.stringify(v ?? null)))
      .join('\n');
  }
  // A selection is JSON unless --format table asks for a table (an object as key and value rows,
  // a list of records as rows). Not through the command's tableRows: they shape its whole result,
  // not a part of it.
  const format = options.format ?? 'json';
  if (format === 'table') return tableOf(selected);
  return jsonOf(selected, format === 'json');
}
