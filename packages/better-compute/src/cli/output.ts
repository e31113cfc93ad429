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
  /** The rows of a table view, when they are not the value itself or its `items`. */
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

/**
 * The part of `value` a --query path selects. `items[].id` maps over the array, so the answer is a
 * list; a field that is absent selects undefined.
 */
export function applyQuery(value: unknown, path: string): { value: unknown; many: boolean } {
  let values: unknown[] = [value];
  let many = false;
  for (const segment of parseQuery(path)) {
    if ('field' in segment)
      values = values.map((v) =>
        isRecord(v) && Object.hasOwn(v, segment.field) ? v[segment.field] : undefined,
      );
    else if ('index' in segment)
      values = values.map((v) => (Array.isArray(v) ? v[segment.index] : undefined));
    else {
      values = values.flatMap((v) => (Array.isArray(v) ? v : []));
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
  const records = rows.every(isRecord);
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

function tableOf(value: unknown, options: FormatOptions): string {
  const custom = options.tableRows?.(value);
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

/** Renders a result as the text to print; undefined prints nothing. */
export function formatResult(value: unknown, options: FormatOptions = {}): string | undefined {
  let selected = value;
  let many = false;
  if (options.query !== undefined) ({ value: selected, many } = applyQuery(value, options.query));
  if (selected === undefined && options.query === undefined) return undefined;
  // A string (or a --query that selects one) prints raw under every --format, made safe for the
  // terminal: `C=$(… --format json --query nextCursor)` must capture the cursor, not its quotes.
  if (typeof selected === 'string') return safeText(selected);
  // `--query items[].id` without --format prints one value per line, for shell loops.
  if (
    many &&
    options.format === undefined &&
    (selected as unknown[]).every((v) => v === null || typeof v !== 'object')
  ) {
    return (selected as unknown[])
      .map((v) => (typeof v === 'string' ? safeText(v) : JSON.stringify(v)))
      .join('\n');
  }
  const format = options.format ?? (options.query !== undefined ? 'json' : (options.defaultFormat ?? 'json'));
  if (format === 'table') return tableOf(selected, options);
  return jsonOf(selected, format === 'json');
}
