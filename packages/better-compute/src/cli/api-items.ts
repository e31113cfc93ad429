/**
 * The input of `better-compute api GROUP.METHOD [items…]`, in the guide's item forms:
 *
 * | item               | sets                                  |
 * | ------------------ | ------------------------------------- |
 * | name=gpu-a         | a string                              |
 * | limit:=10          | a JSON value                          |
 * | spec:=@spec.json   | a JSON value read from a file         |
 * | notes=@notes.md    | a string read from a file             |
 * | resource.type=pool | a nested field                        |
 * | ids[]=a            | an item appended to an array          |
 *
 * and `--data JSON | @file | -` for the whole body. Items are applied over --data.
 */
import { isRecord } from '@better-compute/core';
import { CliError } from './errors.js';
import { shownWord } from './shown.js';

export interface ItemSources {
  /** Reads a file named after `@` (relative to the working directory). */
  readFile(path: string): Promise<string>;
  /** All of standard input, for `--data -`. */
  stdin?: (() => Promise<string>) | undefined;
}

type Key = { name: string; append: boolean }[];

const FORBIDDEN = new Set(['__proto__', 'prototype', 'constructor']);

function invalid(message: string, field = 'items'): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    hint: 'Items are name=value, name:=json, name=@file, name:=@file, a.b=value or ids[]=value; see "better-compute help api".',
    details: { field },
  });
}

function parseKey(text: string, item: string): Key {
  if (text === '') throw invalid(`item "${item}" has no field name`);
  return text.split('.').map((part) => {
    const append = part.endsWith('[]');
    const name = append ? part.slice(0, -2) : part;
    if (!/^[A-Za-z0-9_$-]+$/.test(name) || FORBIDDEN.has(name))
      throw invalid(`item "${item}": "${part}" is not a field name`);
    return { name, append };
  });
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw invalid(`${what} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function assign(target: Record<string, unknown>, key: Key, value: unknown, item: string): void {
  let node: Record<string, unknown> = target;
  key.forEach((segment, i) => {
    const last = i === key.length - 1;
    const existing = Object.hasOwn(node, segment.name) ? node[segment.name] : undefined;
    if (segment.append) {
      if (existing !== undefined && !Array.isArray(existing))
        throw invalid(`item "${item}": ${segment.name} is not a list`);
      const list = (existing as unknown[] | undefined) ?? [];
      node[segment.name] = list;
      if (last) list.push(value);
      else {
        const child: Record<string, unknown> = {};
        list.push(child);
        node = child;
      }
      return;
    }
    if (last) {
      node[segment.name] = value;
      return;
    }
    if (existing === undefined) node[segment.name] = {};
    else if (!isRecord(existing))
      throw invalid(`item "${item}": ${segment.name} is already a value, not an object`);
    node = node[segment.name] as Record<string, unknown>;
  });
}

/** One item as its key and value. */
export async function parseItem(item: string, sources: ItemSources): Promise<{ key: Key; value: unknown }> {
  const eq = item.indexOf('=');
  if (eq <= 0) throw invalid(`item ${shownWord(item)} is not name=value or name:=json`);
  const json = item[eq - 1] === ':';
  const key = parseKey(item.slice(0, json ? eq - 1 : eq), item);
  const raw = item.slice(eq + 1);
  const fromFile = raw.startsWith('@') && raw.length > 1;
  const text = fromFile ? await readNamed(raw.slice(1), sources, `item "${item}"`) : raw;
  return { key, value: json ? parseJson(text, `item "${item}"`) : text };
}

async function readNamed(path: string, sources: ItemSources, what: string): Promise<string> {
  try {
    return await sources.readFile(path);
  } catch (error) {
    throw invalid(`${what}: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
}

/** The body of an `api` call from --data and the items. */
export async function buildApiInput(
  items: readonly string[],
  data: string | undefined,
  sources: ItemSources,
): Promise<Record<string, unknown>> {
  let body: Record<string, unknown> = {};
  if (data !== undefined) {
    let text: string;
    if (data === '-') {
      if (!sources.stdin)
        throw new CliError('UNSUPPORTED', '--data - needs standard input, and this CliIO has none');
      text = await sources.stdin();
    } else if (data.startsWith('@')) text = await readNamed(data.slice(1), sources, '--data');
    else text = data;
    const parsed = parseJson(text, '--data');
    if (!isRecord(parsed)) throw invalid('--data must be a JSON object', 'data');
    body = parsed;
  }
  for (const item of items) {
    const { key, value } = await parseItem(item, sources);
    assign(body, key, value, item);
  }
  return body;
}
