/**
 * The selector shorthand of `reserve --selector` and `capacity --preview --selector`:
 *
 *   gpuProduct in (H100-SXM5-80GB), vramGiB >= 80, zone != eu-2
 *
 * Terms are joined by commas (and); operators `=` `!=` `in` `notin` `>=` `<=` `>` `<`; fields
 * `gpuModel`, `gpuProduct`, `vramGiB`, and any other key is a node label. Every mistake is an
 * INVALID_ARGUMENT that names the term and what is wrong with it.
 */
import { ComputeError } from '@better-compute/core';

type SelectorOperator = '=' | '!=' | 'in' | 'notin' | '>=' | '<=' | '>' | '<';
type SelectorField = 'gpuModel' | 'gpuProduct' | 'vramGiB';

export interface SelectorTerm {
  /** `gpuModel`, `gpuProduct`, `vramGiB`, or a node label key. */
  key: string;
  /** Whether `key` is one of the GPU fields rather than a node label. */
  field: SelectorField | null;
  operator: SelectorOperator;
  values: string[];
}

const GPU_FIELDS: readonly SelectorField[] = ['gpuModel', 'gpuProduct', 'vramGiB'];
const KEY = /^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/;
const NUMBER = /^-?\d+(\.\d+)?$/;
const COMPARE = /^(.*?)\s*(>=|<=|!=|==|=|>|<)\s*(.*)$/s;
const LIST = /^(.*?)\s+(in|notin)\s*(\(.*)$/s;

function fail(message: string, term: string | undefined, selector: string): never {
  throw new ComputeError('INVALID_ARGUMENT', `selector: ${message}`, {
    details: { field: 'selector', selector, ...(term !== undefined ? { term } : {}) },
    hint: 'A selector looks like: gpuProduct in (H100-SXM5-80GB), vramGiB >= 80',
  });
}

/** Splits on commas outside parentheses; refuses unbalanced parentheses. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '(') {
      depth++;
      if (depth > 1) fail(`nested parentheses at position ${i + 1}`, undefined, selector);
    } else if (c === ')') {
      depth--;
      if (depth < 0) fail(`unbalanced ")" at position ${i + 1}`, undefined, selector);
    } else if (c === ',' && depth === 0) {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) fail('unbalanced "(": a list is not closed', undefined, selector);
  terms.push(selector.slice(start));
  return terms;
}

function checkKey(key: string, term: string, selector: string): SelectorField | null {
  if (!key) fail(`"${term}" has no key before its operator`, term, selector);
  if (!KEY.test(key))
    fail(`"${key}" is not a field (gpuModel, gpuProduct, vramGiB) or a label key`, term, selector);
  return (GPU_FIELDS as readonly string[]).includes(key) ? (key as SelectorField) : null;
}

function checkValue(
  value: string,
  field: SelectorField | null,
  numeric: boolean,
  term: string,
  selector: string,
): void {
  if (!value) fail(`"${term}" has no value`, term, selector);
  if (field === 'vramGiB' && !/^\d+$/.test(value))
    fail(`vramGiB takes a whole number of GiB, not "${value}"`, term, selector);
  if (numeric && !NUMBER.test(value)) fail(`"${value}" in "${term}" is not a number`, term, selector);
  if (!VALUE.test(value))
    fail(`"${value}" in "${term}" is not a valid value (letters, digits, - _ .)`, term, selector);
}

/** Parses a selector; the empty string selects everything. */
export function parseSelector(selector: string): SelectorTerm[] {
  if (selector.trim() === '') return [];
  const terms: SelectorTerm[] = [];
  for (const raw of splitTerms(selector)) {
    const term = raw.trim();
    if (!term) fail('an empty term (two commas, or a comma at the start or end)', term, selector);
    const list = LIST.exec(term);
    if (list) {
      const [, rawKey, operator, rest] = list as unknown as [string, string, 'in' | 'notin', string];
      const key = rawKey.trim();
      const field = checkKey(key, term, selector);
      if (!rest.endsWith(')')) fail(`"${term}": nothing may follow the list's ")"`, term, selector);
      const values = rest
        .slice(1, -1)
        .split(',')
        .map((v) => v.trim());
      if (values.length === 1 && values[0] === '')
        fail(`"${term}": the list of ${operator} is empty`, term, selector);
      for (const value of values) checkValue(value, field, false, term, selector);
      terms.push({ key, field, operator, values });
      continue;
    }
    if (/\s(in|notin)\s*$/.test(term) || /\s(in|notin)\s+[^(]/.test(term)) {
      fail(
        `"${term}": in and notin take a list in parentheses, like gpuModel in (H100, A100)`,
        term,
        selector,
      );
    }
    const compare = COMPARE.exec(term);
    if (!compare) fail(`"${term}" has no operator (= != in notin >= <= > <)`, term, selector);
    const [, rawKey, rawOperator, rawValue] = compare as unknown as [string, string, string, string];
    const key = rawKey.trim();
    const value = rawValue.trim();
    if (/^[=!<>]/.test(value))
      fail(`"${term}": unknown operator "${rawOperator}${value[0]}"`, term, selector);
    const operator = (rawOperator === '==' ? '=' : rawOperator) as SelectorOperator;
    const field = checkKey(key, term, selector);
    const numeric = operator === '>=' || operator === '<=' || operator === '>' || operator === '<';
    if (numeric && (field === 'gpuModel' || field === 'gpuProduct')) {
      fail(`${field} compares with = != in notin, not ${operator}`, term, selector);
    }
    checkValue(value, field, numeric, term, selector);
    terms.push({ key, field, operator, values: [value] });
  }
  return terms;
}

/** The terms a request makes: its selector plus `gpuModel` / `gpuProduct` shorthands. */
export function requestTerms(request: {
  selector?: string | null | undefined;
  gpuModel?: string | null | undefined;
  gpuProduct?: string | null | undefined;
}): SelectorTerm[] {
  const terms = parseSelector(request.selector ?? '');
  if (request.gpuModel)
    terms.push({ key: 'gpuModel', field: 'gpuModel', operator: '=', values: [request.gpuModel] });
  if (request.gpuProduct)
    terms.push({ key: 'gpuProduct', field: 'gpuProduct', operator: '=', values: [request.gpuProduct] });
  return terms;
}

function compare(actual: string | undefined, term: SelectorTerm): boolean {
  const [first] = term.values;
  switch (term.operator) {
    case '=':
      return actual === first;
    case '!=':
      return actual !== first;
    case 'in':
      return actual !== undefined && term.values.includes(actual);
    case 'notin':
      return actual === undefined || !term.values.includes(actual);
    default: {
      if (actual === undefined || !NUMBER.test(actual)) return false;
      const a = Number(actual);
      const b = Number(first);
      return term.operator === '>='
        ? a >= b
        : term.operator === '<='
          ? a <= b
          : term.operator === '>'
            ? a > b
            : a < b;
    }
  }
}

/** Whether a GPU with these fields on a node with these labels matches every term. */
export function matchesSelector(
  terms: readonly SelectorTerm[],
  gpu: { model: string; product: string; vramGiB: number },
  labels: Record<string, string>,
): boolean {
  return terms.every((term) => {
    const actual =
      term.field === 'gpuModel'
        ? gpu.model
        : term.field === 'gpuProduct'
          ? gpu.product
          : term.field === 'vramGiB'
            ? String(gpu.vramGiB)
            : labels[term.key];
    return compare(actual, term);
  });
}
