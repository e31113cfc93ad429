/**
 * A method group, declared once. `defineGroup('pools', { module: 'fleet' }, { list, get, … })` gives
 * each method its group, its name (the key it is listed under), its route (`/pools/list`) and, unless
 * the method says otherwise, its IAM action: `compute:pools:read` for a query, `compute:pools:<name>`
 * for a mutation (the group in kebab case: `joinTokens` → `compute:join-tokens:…`). `tableOf` turns
 * groups into the method table's entries (`pools.list`, …); the server's `implement(group, handlers)`
 * takes a handler for each method of a group, so none can be forgotten. Like contract.ts, this file
 * holds no schema library at run time.
 */
import type { z } from 'zod';
import type { MethodAccess, MethodDefinition, ModuleName } from './contract.js';

/** A method as its group lists it: what the group declaration does not give it. */
export type MethodSpec<Input extends z.ZodType = z.ZodType, Output extends z.ZodType = z.ZodType> = Omit<
  MethodDefinition<Input, Output>,
  'group' | 'name' | 'module' | 'access'
> & {
  /** Who may call it; the group's default action when absent. */
  access?: MethodAccess;
};

/** Declares one method of a group; returns its argument, typed by its input and output. */
export function method<Input extends z.ZodType, Output extends z.ZodType>(
  spec: MethodSpec<Input, Output>,
): MethodSpec<Input, Output> {
  return spec;
}

/** What every method of a group shares. */
export interface GroupOptions {
  /** The module that serves the group. */
  module: ModuleName;
}

/**
 * A method of a group. Exactly a MethodDefinition (no intersection with literal names): the checker
 * then compares it with AnyMethod by the interface's variance, as it does a method declared whole.
 */
export type GroupMethod<Spec> = Spec extends {
  input: infer Input extends z.ZodType;
  output: infer Output extends z.ZodType;
}
  ? MethodDefinition<Input, Output>
  : never;

export interface MethodGroup<Group extends string = string, Specs = Record<string, MethodSpec>> {
  readonly group: Group;
  /** Each method, by name, in declaration order. */
  readonly methods: { readonly [Name in keyof Specs & string]: GroupMethod<Specs[Name]> };
}

/** The method table's keys of a group: `pools.list`, `pools.get`, … */
export type GroupKey<G extends MethodGroup<string, any>> = `${G['group']}.${keyof G['methods'] & string}`;

/** The method table's entries of a group. */
export type GroupTable<G extends MethodGroup<string, any>> = {
  readonly [Name in keyof G['methods'] & string as `${G['group']}.${Name}`]: G['methods'][Name];
};

const kebabCase = (word: string) => word.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`);

/** The IAM action a method of the group gets when it names none. */
export function defaultAction(group: string, name: string, kind: 'query' | 'mutation'): string {
  return `compute:${kebabCase(group)}:${kind === 'query' ? 'read' : name}`;
}

/** Declares a group: its name, what its methods share, and each method under its name. */
export function defineGroup<
  const Group extends string,
  const Specs extends Record<string, MethodSpec<any, any>>,
>(group: Group, options: GroupOptions, specs: Specs): MethodGroup<Group, Specs> {
  const methods: Record<string, MethodDefinition> = {};
  for (const [name, spec] of Object.entries(specs)) {
    const { kind, summary, access, ...rest } = spec;
    // Field order as a method declared whole had it, so nothing derived from a definition changes.
    methods[name] = {
      group,
      name,
      kind,
      summary,
      module: options.module,
      access: access ?? { action: defaultAction(group, name, kind) },
      ...rest,
    } as MethodDefinition;
  }
  return { group, methods } as unknown as MethodGroup<Group, Specs>;
}

/** A group's entries of the method table, keyed `group.name`, in declaration order. */
export function tableOf<G extends MethodGroup<string, any>>(group: G): GroupTable<G> {
  const table: Record<string, MethodDefinition> = {};
  for (const [name, definition] of Object.entries(group.methods as Record<string, MethodDefinition>)) {
    table[`${group.group}.${name}`] = definition;
  }
  return table as GroupTable<G>;
}
