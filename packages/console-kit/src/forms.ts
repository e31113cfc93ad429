/**
 * Forms drawn from the API's own description of a method: the deployment's OpenAPI document
 * (`{basePath}/openapi.json`) holds each method's input as JSON Schema with the method table's
 * field descriptions, so a form built from it names, explains and types its fields as the server
 * takes them, and cannot drift from the server. The form checks only what it must to build the
 * input (a required field left empty, a number that is not one, a label line without `=`); every
 * other rule is the server's, and its refusal comes back on the field it concerns (fieldErrorsOf).
 * Framework-free: a `FormStore` is a store like the others (`subscribe`, `get`).
 */
import { fieldErrorsOf } from './field-errors.js';
import { Subscribable } from './subscribable.js';

type Json = Record<string, unknown>;

/** What a form needs of an OpenAPI document: its paths and component schemas. */
export interface ApiDocument {
  paths: Record<string, unknown>;
  components?: { schemas?: Record<string, unknown> };
}

/** How a field is entered; each maps to one input element and one way of reading it. */
export type FieldKind =
  | 'text'
  /** A long text (more than 200 characters allowed). */
  | 'textarea'
  | 'integer'
  | 'number'
  | 'boolean'
  /** One of `choices`. */
  | 'choice'
  /** A list of strings, one per line. */
  | 'list'
  /** A map of strings, `key=value` per line (labels). */
  | 'labels'
  /** Anything else, as JSON. */
  | 'json';

export interface FormField {
  /** The input's property name; a server refusal naming it lands on this field. */
  name: string;
  label: string;
  /** The method table's description of the field, shown as its help. */
  description: string;
  kind: FieldKind;
  required: boolean;
  /** Empty sends null (the schema takes null, as a quota's limit does to clear it). */
  nullable: boolean;
  choices?: string[];
  /** The schema's default, as the form shows it. */
  defaultValue?: string | boolean;
}

/** What a form holds of a field: text as typed, or a checkbox's state. */
export type FormValue = string | boolean;

/** Fields no person types: the client fills the tenant and the idempotency key, a page the version. */
const FILLED_BY_THE_CLIENT = ['tenantId', 'idempotencyKey', 'ifVersion'];

/** `subjectTenantId` → `Subject tenant id`, `gpuCount` → `Gpu count`. */
function labelOf(name: string): string {
  const words = name.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function resolve(document: ApiDocument, schema: unknown): Json {
  let current = schema as Json | undefined;
  for (let depth = 0; current && typeof current.$ref === 'string' && depth < 8; depth++) {
    const name = current.$ref.replace(/^#\/components\/schemas\//, '');
    current = document.components?.schemas?.[name] as Json | undefined;
  }
  return current ?? {};
}

function kindOf(schema: Json): { kind: FieldKind; choices?: string[] } {
  const type = schema.type;
  if (Array.isArray(schema.enum) && schema.enum.every((value) => typeof value === 'string'))
    return { kind: 'choice', choices: schema.enum as string[] };
  if (type === 'string')
    return { kind: typeof schema.maxLength === 'number' && schema.maxLength > 200 ? 'textarea' : 'text' };
  if (type === 'integer') return { kind: 'integer' };
  if (type === 'number') return { kind: 'number' };
  if (type === 'boolean') return { kind: 'boolean' };
  if (type === 'array' && (schema.items as Json | undefined)?.type === 'string') return { kind: 'list' };
  if (type === 'object' && (schema.additionalProperties as Json | undefined)?.type === 'string')
    return { kind: 'labels' };
  return { kind: 'json' };
}

export interface FormFieldsOptions {
  /** Where the routes are served (the document's paths start with it); `/api/compute` by default. */
  basePath?: string;
  /** Only these fields, in this order (a form for the common case of a larger input). */
  only?: readonly string[];
  /** Fields to leave out besides the tenant, the idempotency key and the version. */
  omit?: readonly string[];
  /** Labels to use instead of the ones made from the property names. */
  labels?: Readonly<Record<string, string>>;
  /** Kinds to use instead of the schema's (a URL of up to 2,048 characters is still one line). */
  kinds?: Readonly<Record<string, FieldKind>>;
}

/**
 * The fields of `method`'s input, from the deployment's OpenAPI document.
 *
 * @example
 * const document = await (await fetch('/api/compute/openapi.json')).json();
 * formFieldsOf(document, 'sites.create', { only: ['name', 'region', 'description', 'labels'] });
 * // [{ name: 'name', label: 'Name', kind: 'text', required: true,
 * //    description: 'A name: 1-63 lowercase letters, digits and dashes, unique in its tenant', … }, …]
 */
export function formFieldsOf(
  document: ApiDocument,
  method: string,
  options: FormFieldsOptions = {},
): FormField[] {
  const path = `${options.basePath ?? '/api/compute'}/${method.replaceAll('.', '/')}`;
  const operation = (document.paths[path] as Json | undefined)?.post as Json | undefined;
  if (!operation) throw new Error(`the API document has no method ${method} (no POST ${path})`);
  const body = (operation.requestBody as Json | undefined)?.content as Json | undefined;
  const input = resolve(document, (body?.['application/json'] as Json | undefined)?.schema);
  const properties = (input.properties ?? {}) as Record<string, unknown>;
  const required = new Set((input.required as string[] | undefined) ?? []);
  const omitted = new Set([...FILLED_BY_THE_CLIENT, ...(options.omit ?? [])]);
  const names = options.only
    ? options.only.filter((name) => name in properties)
    : Object.keys(properties).filter((name) => !omitted.has(name));
  return names.map((name) => {
    let schema = resolve(document, properties[name]);
    let nullable = false;
    const variants = schema.anyOf as unknown[] | undefined;
    if (Array.isArray(variants)) {
      const real = variants.map((v) => resolve(document, v)).filter((v) => v.type !== 'null');
      nullable = real.length < variants.length;
      if (real.length === 1)
        schema = { ...real[0], description: schema.description, default: schema.default };
    }
    const drawn = kindOf(schema);
    const kind = options.kinds?.[name] ?? drawn.kind;
    if (kind === 'choice' && !drawn.choices) throw new Error(`${method}'s ${name} has no choices to offer`);
    const choices = kind === 'choice' ? drawn.choices : undefined;
    const field: FormField = {
      name,
      label: options.labels?.[name] ?? labelOf(name),
      description: typeof schema.description === 'string' ? schema.description : '',
      kind,
      // A field with a default is filled by the server when left out.
      required: required.has(name) && schema.default === undefined,
      nullable,
    };
    if (choices) field.choices = choices;
    if (typeof schema.default === 'string' || typeof schema.default === 'boolean')
      field.defaultValue = schema.default;
    else if (typeof schema.default === 'number') field.defaultValue = String(schema.default);
    return field;
  });
}

/** The values a form starts with: each field's default, else empty. */
export function initialValues(fields: readonly FormField[]): Record<string, FormValue> {
  return Object.fromEntries(
    fields.map((field) => [field.name, field.defaultValue ?? (field.kind === 'boolean' ? false : '')]),
  );
}

/**
 * The input a form's values make, or the messages of the fields that cannot make one. An empty
 * optional field is left out (the server's default applies); an empty nullable one is null.
 *
 * @example
 * inputOf(fields, { name: 'row-a', labels: 'zone=a\nrack=12', gpus: '' })
 * // { input: { name: 'row-a', labels: { zone: 'a', rack: '12' } }, errors: {} }
 */
export function inputOf(
  fields: readonly FormField[],
  values: Readonly<Record<string, FormValue>>,
): { input: Json; errors: Record<string, string> } {
  const input: Json = {};
  const errors: Record<string, string> = {};
  for (const field of fields) {
    const raw = values[field.name];
    if (field.kind === 'boolean') {
      input[field.name] = raw === true;
      continue;
    }
    const text = typeof raw === 'string' ? raw.trim() : '';
    if (text === '') {
      if (field.nullable) input[field.name] = null;
      else if (field.required) errors[field.name] = `${field.label} is required`;
      continue;
    }
    switch (field.kind) {
      case 'integer':
      case 'number': {
        const value = Number(text);
        if (!Number.isFinite(value) || (field.kind === 'integer' && !Number.isInteger(value)))
          errors[field.name] =
            `${field.label} must be ${field.kind === 'integer' ? 'a whole number' : 'a number'}`;
        else input[field.name] = value;
        break;
      }
      case 'list':
        input[field.name] = text
          .split('\n')
          .map((line) => line.trim())
          .filter(Boolean);
        break;
      case 'labels': {
        const labels: Record<string, string> = {};
        for (const line of text
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean)) {
          const at = line.indexOf('=');
          if (at <= 0) {
            errors[field.name] =
              `${field.label}: write one key=value per line (not ${JSON.stringify(line.slice(0, 40))})`;
            break;
          }
          labels[line.slice(0, at).trim()] = line.slice(at + 1).trim();
        }
        input[field.name] = labels;
        break;
      }
      case 'json':
        try {
          input[field.name] = JSON.parse(text);
        } catch {
          errors[field.name] = `${field.label} must be JSON`;
        }
        break;
      default:
        input[field.name] = text;
    }
  }
  return { input, errors };
}

export interface FormState<T> {
  values: Readonly<Record<string, FormValue>>;
  /** A message per field: the form's own, or the server's refusal placed on its field. */
  errors: Readonly<Record<string, string>>;
  /** What no field could carry (shown above or below the form); null when none. */
  formError: unknown;
  pending: boolean;
  /** The last answer of a submit that succeeded. */
  result: T | undefined;
}

export interface FormOptions<T> {
  fields: readonly FormField[];
  /** Sends the input; its rejection is placed on the fields. */
  submit: (input: Json) => Promise<T>;
  /** The field a name the tenant already holds (ALREADY_EXISTS) concerns. */
  nameField?: string;
  /** Start values besides the defaults (an edit form's current values). */
  values?: Readonly<Record<string, FormValue>>;
  /** After a success: clear the form (a create form) or keep what was sent (an edit form). */
  clearOnSuccess?: boolean;
}

/** A form's values, its errors on their fields, and its submit. */
export class FormStore<T> extends Subscribable<FormState<T>> {
  readonly fields: readonly FormField[];
  readonly #options: FormOptions<T>;
  readonly #start: Record<string, FormValue>;

  constructor(options: FormOptions<T>) {
    const start = { ...initialValues(options.fields), ...options.values };
    super({ values: start, errors: {}, formError: null, pending: false, result: undefined });
    this.fields = options.fields;
    this.#options = options;
    this.#start = start;
  }

  /** Sets a field's value; its error goes, since it may no longer hold. */
  change(name: string, value: FormValue): void {
    const state = this.get();
    const { [name]: _cleared, ...errors } = state.errors;
    this.set({ ...state, values: { ...state.values, [name]: value }, errors });
  }

  /** Builds the input and sends it; resolves with the answer, or undefined when it was refused. */
  async submit(): Promise<T | undefined> {
    const state = this.get();
    if (state.pending) return undefined;
    const { input, errors } = inputOf(this.fields, state.values);
    if (Object.keys(errors).length) {
      this.set({ ...state, errors, formError: null });
      return undefined;
    }
    this.set({ ...state, pending: true, errors: {}, formError: null });
    try {
      const result = await this.#options.submit(input);
      const values = this.#options.clearOnSuccess ? this.#start : this.get().values;
      this.set({ values, errors: {}, formError: null, pending: false, result });
      return result;
    } catch (error) {
      const names = this.fields.map((field) => field.name);
      const placed = fieldErrorsOf(error, names, this.#options.nameField);
      this.set({
        ...this.get(),
        pending: false,
        errors: placed.fields as Record<string, string>,
        formError: placed.rest,
      });
      return undefined;
    }
  }
}

/**
 * A form for `method` from the deployment's API document.
 *
 * @example
 * const form = createForm(document, 'sites.create', {
 *   only: ['name', 'region', 'description', 'labels'],
 *   submit: (input) => client.sites.create({ ...input, idempotencyKey: crypto.randomUUID() }),
 *   nameField: 'name',
 *   clearOnSuccess: true,
 * });
 * form.change('name', 'Bad Name!');
 * await form.submit(); // form.get().errors.name is the server's message about the name
 */
export function createForm<T>(
  document: ApiDocument,
  method: string,
  options: FormFieldsOptions & Omit<FormOptions<T>, 'fields'>,
): FormStore<T> {
  return new FormStore({ ...options, fields: formFieldsOf(document, method, options) });
}
