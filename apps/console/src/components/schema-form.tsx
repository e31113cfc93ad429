'use client';
/**
 * A form drawn from the deployment's own API document (console-kit's createForm): its fields, their
 * kinds and their help come from the method's input schema as the server serves it, and the
 * server's refusal is shown on the field it concerns. Pages name the method and the fields they
 * show; the document is fetched once per page load.
 */
import { useEffect, useRef, useState, type FormEvent } from 'react';
import {
  createForm,
  type ApiDocument,
  type FormField,
  type FormFieldsOptions,
  type FormOptions,
  type FormStore,
} from '@better-compute/console-kit';
import { useStore } from '@better-compute/console-kit/react';
import { ErrorNote, FieldError } from '@/components/ui';

let documentLoad: Promise<ApiDocument> | undefined;

/** The API's OpenAPI document, fetched once (a failure is tried again on the next form). */
function loadApiDocument(): Promise<ApiDocument> {
  documentLoad ??= fetch('/api/compute/openapi.json', { credentials: 'same-origin' })
    .then(async (response) => {
      if (!response.ok) throw new Error(`the API document answered ${response.status}`);
      return (await response.json()) as ApiDocument;
    })
    .catch((error: unknown) => {
      documentLoad = undefined;
      throw error;
    });
  return documentLoad;
}

/**
 * The form for `method` once the API document is in (undefined before), made once per component.
 * `submit` is read at each submit, so it may close over the page's current state.
 */
export function useSchemaForm<T>(
  method: string,
  options: FormFieldsOptions & Omit<FormOptions<T>, 'fields'>,
): { form: FormStore<T> | undefined; error: unknown } {
  const [form, setForm] = useState<FormStore<T>>();
  const [error, setError] = useState<unknown>(null);
  const latest = useRef(options);
  useEffect(() => {
    latest.current = options;
  });
  useEffect(() => {
    let current = true;
    loadApiDocument().then(
      (document) => {
        if (current)
          setForm(
            createForm<T>(document, method, {
              ...latest.current,
              submit: (input) => latest.current.submit(input),
            }),
          );
      },
      (failure: unknown) => current && setError(failure),
    );
    return () => {
      current = false;
    };
  }, [method]);
  return { form, error };
}

function FieldInput({
  field,
  id,
  value,
  error,
  onChange,
}: {
  field: FormField;
  id: string;
  value: string | boolean;
  error: string | undefined;
  onChange: (value: string | boolean) => void;
}) {
  const common = {
    name: field.name,
    required: field.required,
    title: field.description || undefined,
    'aria-invalid': error ? true : undefined,
    'aria-describedby': error ? `${id}-error` : undefined,
  };
  const text = typeof value === 'string' ? value : '';
  switch (field.kind) {
    case 'boolean':
      return (
        <input
          {...common}
          type="checkbox"
          checked={value === true}
          onChange={(e) => onChange(e.target.checked)}
        />
      );
    case 'choice':
      return (
        <select {...common} value={text} onChange={(e) => onChange(e.target.value)}>
          {field.required ? null : <option value="">—</option>}
          {field.choices!.map((choice) => (
            <option key={choice} value={choice}>
              {choice}
            </option>
          ))}
        </select>
      );
    case 'textarea':
    case 'list':
    case 'labels':
    case 'json':
      return (
        <textarea
          {...common}
          rows={field.kind === 'textarea' ? 2 : 3}
          placeholder={
            field.kind === 'labels'
              ? 'key=value, one per line'
              : field.kind === 'list'
                ? 'one per line'
                : undefined
          }
          value={text}
          onChange={(e) => onChange(e.target.value)}
        />
      );
    default:
      return (
        <input
          {...common}
          inputMode={field.kind === 'integer' ? 'numeric' : field.kind === 'number' ? 'decimal' : undefined}
          value={text}
          onChange={(e) => onChange(e.target.value)}
        />
      );
  }
}

/**
 * The form's fields, each with its label, help (the schema's description, as the input's title)
 * and the error placed on it; the submit button; and what no field could carry below the form.
 */
export function SchemaForm<T>({
  id,
  form,
  loadError,
  label,
  submitLabel,
  disabled,
  disabledTitle,
  className = 'inline',
}: {
  id: string;
  form: FormStore<T> | undefined;
  loadError?: unknown;
  label: string;
  submitLabel: string;
  disabled?: boolean;
  disabledTitle?: string | undefined;
  className?: string;
}) {
  if (!form)
    return loadError ? (
      <ErrorNote error={loadError} />
    ) : (
      <p className="note" aria-busy="true">
        Loading the form…
      </p>
    );
  return (
    <SchemaFormFields
      id={id}
      form={form}
      label={label}
      submitLabel={submitLabel}
      disabled={disabled}
      disabledTitle={disabledTitle}
      className={className}
    />
  );
}

function SchemaFormFields<T>({
  id,
  form,
  label,
  submitLabel,
  disabled,
  disabledTitle,
  className,
}: {
  id: string;
  form: FormStore<T>;
  label: string;
  submitLabel: string;
  disabled: boolean | undefined;
  disabledTitle: string | undefined;
  className: string;
}) {
  const state = useStore(form);
  function submit(event: FormEvent) {
    event.preventDefault();
    void form.submit();
  }
  return (
    <>
      <form id={id} className={className} onSubmit={submit} aria-label={label} noValidate>
        {form.fields.map((field) => {
          const error = state.errors[field.name];
          const fieldId = `${id}-${field.name}`;
          return (
            <label key={field.name} className={field.kind === 'boolean' ? 'check' : undefined}>
              {field.label}
              <FieldInput
                field={field}
                id={fieldId}
                value={state.values[field.name] ?? ''}
                error={error}
                onChange={(value) => form.change(field.name, value)}
              />
              <FieldError id={`${fieldId}-error`} name={field.name} error={error} />
            </label>
          );
        })}
        <button type="submit" disabled={disabled || state.pending} title={disabledTitle}>
          {submitLabel}
        </button>
      </form>
      <ErrorNote error={state.formError} />
    </>
  );
}
