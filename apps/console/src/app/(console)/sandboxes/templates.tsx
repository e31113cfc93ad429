'use client';
/**
 * The Sandboxes page's templates: each with its warm pool (create, Warm +1 / −1, delete after
 * asking) and its volumes (Detach after asking, and an Attach a volume form: a ready volume of the
 * template's pool, a mount path, read-only, the guest's device path shown). Buttons are enabled only
 * when Better IAM says the person may (advisory: the API decides every call); refusals show in
 * place, a refused field beside the field.
 */
import { useEffect, useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import {
  describeAction,
  fieldErrorsOf,
  isMountPath,
  ListStore,
  volumesWithAttached,
  volumesWithDetached,
} from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { useVpsChoices, VpsChoiceFields } from '@/components/vps-choices';
import {
  ChoiceField,
  ConfirmButton,
  disabledReason,
  ErrorNote,
  FieldError,
  IdRef,
  PagedTable,
} from '@/components/ui';
import { idempotencyKey } from '@/lib/api';

type Template = CallOutput<'sandboxTemplates.get'>;
type Volume = CallOutput<'sandboxVolumes.get'>;

const NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;

export function Templates({ store }: { store: ListStore<Template> }) {
  const { client } = useConsole();
  const state = useList(store);
  const choices = useVpsChoices();
  const { poolId, flavorId, imageId, error: choicesError } = choices;
  const [name, setName] = useState('');
  const [warmMin, setWarmMin] = useState(0);
  const [maxHours, setMaxHours] = useState(4);
  const create = useAction(async () => {
    const maxTtlSeconds = Math.round(maxHours * 3600);
    const made = await client.sandboxTemplates.create({
      name,
      poolId,
      flavorId,
      imageId,
      warmMin,
      maxTtlSeconds,
      defaultTtlSeconds: Math.min(3600, maxTtlSeconds),
      idempotencyKey: idempotencyKey(),
    });
    store.upsert(made);
    setName('');
    return made;
  });
  const ready = NAME.test(name) && poolId && flavorId && imageId && maxHours >= 1 / 60;

  function submit(event: FormEvent) {
    event.preventDefault();
    void create.run(undefined);
  }

  return (
    <section aria-labelledby="templates">
      <h2 id="templates">Templates</h2>
      <form className="inline" onSubmit={submit} aria-label="New template">
        <label>
          Name
          <input
            name="templateName"
            value={name}
            onChange={(e) => setName(e.target.value.trim())}
            size={12}
          />
        </label>
        <VpsChoiceFields choices={choices} prefix="template" />
        <label>
          Warm minimum
          <input
            name="warmMin"
            type="number"
            min={0}
            max={64}
            value={warmMin}
            onChange={(e) => setWarmMin(Number(e.target.value))}
          />
        </label>
        <label>
          Longest lifetime (hours)
          <input
            name="maxHours"
            type="number"
            min={1}
            max={168}
            value={maxHours}
            onChange={(e) => setMaxHours(Number(e.target.value))}
          />
        </label>
        <button type="submit" disabled={!ready || create.pending}>
          Create template
        </button>
      </form>
      <ErrorNote error={create.error ?? choicesError} />
      <PagedTable
        state={state}
        caption="Sandbox templates"
        columns={['Template', 'Pool, flavor, image', 'Volumes', 'Lifetime', 'Warm pool', 'Actions']}
        empty="No templates."
        onMore={() => void store.loadMore()}
        row={(template) => (
          <TemplateRow
            key={template.id}
            template={template}
            store={store}
            poolName={choices.pools.find((pool) => pool.id === template.poolId)?.name}
            imageName={choices.images.find((image) => image.id === template.imageId)?.name}
          />
        )}
      />
      <AttachVolume store={store} templates={state.items} />
    </section>
  );
}

function TemplateRow({
  template,
  store,
  poolName,
  imageName,
}: {
  template: Template;
  store: ListStore<Template>;
  /** Names where the page knows them; the id otherwise. */
  poolName: string | undefined;
  imageName: string | undefined;
}) {
  const { client } = useConsole();
  const warm = useAction(async (delta: number) => {
    const min = Math.max(0, Math.min(64, template.warm.min + delta));
    const next = await client.sandboxTemplates.update({
      templateId: template.id,
      warmMin: min,
      warmMax: Math.max(min, template.warm.max),
    });
    store.upsert(next);
    return next;
  });
  const remove = useAction(async () => {
    const gone = await client.sandboxTemplates.delete({ templateId: template.id });
    store.remove(template.id);
    return gone;
  });
  const { permissions } = useConsole();
  const canUpdate = usePermission(permissions, describeAction('sandboxTemplates', 'update', template.id));
  const canDelete = usePermission(permissions, describeAction('sandboxTemplates', 'delete', template.id));
  // The API replaces the whole list: every other volume goes back as it was, at this version.
  const detach = useAction(async (volumeId: string) => {
    const next = await client.sandboxTemplates.update({
      templateId: template.id,
      ifVersion: template.version,
      volumes: volumesWithDetached(template.volumes, volumeId),
    });
    store.upsert(next);
    return next;
  });
  const hasVolumes = template.volumes.length > 0;
  return (
    <tr data-template={template.id}>
      <td>
        {template.name}
        <br />
        <IdRef id={template.id} />
      </td>
      <td>
        <IdRef id={template.poolId} name={poolName} />, <IdRef id={template.flavorId} />,{' '}
        <IdRef id={template.imageId} name={imageName} /> ({template.runtime})
      </td>
      <td>
        {hasVolumes ? (
          <ul className="plain" aria-label={`Volumes of ${template.name}`}>
            {template.volumes.map((volume) => (
              <li key={volume.volumeId} data-template-volume={volume.volumeId}>
                {volume.name} at <code>{volume.path}</code>
                {volume.readOnly ? ' (read-only)' : ''}{' '}
                <ConfirmButton
                  label="Detach"
                  title={`Detach ${volume.name} from ${template.name}`}
                  disabled={canUpdate !== true || detach.pending}
                  reason={disabledReason(true, '', canUpdate)}
                  question={`Detach the volume ${volume.name} from the template ${template.name}? Sandboxes made from it from now on do not mount it; its data stays on the volume.`}
                  confirmLabel="Detach volume"
                  onConfirm={() => detach.run(volume.volumeId)}
                />
              </li>
            ))}
          </ul>
        ) : (
          <span className="note">none</span>
        )}
      </td>
      <td>
        {Math.round(template.defaultTtlSeconds / 60)} min by default, at most{' '}
        {Math.round((template.maxTtlSeconds / 3600) * 10) / 10} h
      </td>
      <td data-warm={`${template.warm.ready}/${template.warm.min}`}>
        {template.warm.ready} ready, {template.warm.starting} starting (min {template.warm.min}, max{' '}
        {template.warm.max})
      </td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            disabled={hasVolumes || template.warm.min >= 64 || canUpdate !== true || warm.pending}
            title={
              hasVolumes ? 'A template with volumes keeps no warm pool' : disabledReason(true, '', canUpdate)
            }
            aria-label={`Warm +1 ${template.name}`}
            onClick={() => void warm.run(1)}
          >
            Warm +1
          </button>
          <button
            type="button"
            className="secondary"
            disabled={template.warm.min === 0 || canUpdate !== true || warm.pending}
            title={disabledReason(template.warm.min > 0, 'The warm pool is empty', canUpdate)}
            aria-label={`Warm −1 ${template.name}`}
            onClick={() => void warm.run(-1)}
          >
            Warm −1
          </button>
          <ConfirmButton
            label="Delete"
            title={`Delete template ${template.name}`}
            disabled={canDelete !== true || remove.pending}
            reason={disabledReason(true, '', canDelete)}
            question={`Delete the template ${template.name}? Its warm sandboxes are retired; a template with live sandboxes is refused.`}
            confirmLabel="Delete template"
            onConfirm={() => remove.run(undefined)}
          />
        </div>
        <ErrorNote error={warm.error ?? remove.error ?? detach.error} />
      </td>
    </tr>
  );
}

/**
 * Attach a volume: a template, a ready volume of its pool (everyone's volumes of the tenant; empty
 * without the right to list them), a mount path (/data unless changed; it must start with /) and
 * Read-only. Sends the template's whole volume list with the new one last, at the template's
 * version; a template with a warm pool has it turned off in the same call, since the server keeps
 * none beside volumes (the form says so first). The server's refusal of the path or the volume shows
 * beside that field.
 */
function AttachVolume({ store, templates }: { store: ListStore<Template>; templates: readonly Template[] }) {
  const { client, permissions } = useConsole();
  const [templateId, setTemplateId] = useState('');
  const template = templates.find((item) => item.id === templateId) ?? templates[0];
  const [volumes, setVolumes] = useState<Volume[]>([]);
  useEffect(() => {
    let gone = false;
    client.sandboxVolumes
      .list({ all: true, limit: 100 })
      .then((page) => {
        if (!gone) setVolumes(page.items);
      })
      // Without the right to list everyone's volumes, the picker is empty (the guide's rule).
      .catch(() => {
        if (!gone) setVolumes([]);
      });
    return () => {
      gone = true;
    };
    // Re-read when the templates change: an attach or detach changes what each volume is mounted by.
  }, [client, templates]);
  const mounted = new Set(template?.volumes.map((volume) => volume.volumeId) ?? []);
  const choices = volumes.filter(
    (volume) => volume.state === 'ready' && volume.poolId === template?.poolId && !mounted.has(volume.id),
  );
  const [volumeId, setVolumeId] = useState('');
  const volume = choices.find((item) => item.id === volumeId) ?? choices[0];
  const [path, setPath] = useState('/data');
  const [readOnly, setReadOnly] = useState(false);
  const canUpdate = usePermission(
    permissions,
    template ? describeAction('sandboxTemplates', 'update', template.id) : null,
  );
  // Naming a volume in a template is decided on the volume as compute:sandboxes:attach.
  const canAttach = usePermission(
    permissions,
    volume
      ? {
          action: 'compute:sandboxes:attach',
          resource: describeAction('sandboxVolumes', 'get', volume.id).resource,
        }
      : null,
  );
  const index = template?.volumes.length ?? 0;
  const attach = useAction(async () => {
    if (!template || !volume) return null;
    const { volumes: list } = volumesWithAttached(template.volumes, {
      volumeId: volume.id,
      path,
      readOnly,
    });
    const next = await client.sandboxTemplates.update({
      templateId: template.id,
      ifVersion: template.version,
      volumes: list,
      ...(template.warm.max > 0 ? { warmMin: 0, warmMax: 0 } : {}),
    });
    store.upsert(next);
    return next;
  });
  const pathField = `volumes.${index}.path`;
  const volumeField = `volumes.${index}`;
  const { fields, rest } = fieldErrorsOf(attach.error, [pathField, volumeField]);
  const pathError = fields[pathField] ?? (path && !isMountPath(path) ? 'must start with /' : undefined);
  const volumeError = fields[volumeField];
  // Both checks must allow it: refused when either says no, unknown while either is.
  const allowed =
    canUpdate === false || canAttach === false
      ? false
      : canUpdate === undefined || canAttach === undefined
        ? undefined
        : true;
  const ready = Boolean(template && volume && isMountPath(path));

  function submit(event: FormEvent) {
    event.preventDefault();
    void attach.run(undefined);
  }

  if (templates.length === 0) return null;
  return (
    <>
      <h3 id="attach-volume">Attach a volume</h3>
      <form className="inline" onSubmit={submit} aria-labelledby="attach-volume" noValidate>
        <ChoiceField
          label="Template"
          name="attachTemplate"
          items={templates}
          value={template?.id ?? ''}
          onChange={(id) => {
            setTemplateId(id);
            setVolumeId('');
          }}
          text={(item) => item.name}
        />
        <label>
          Volume
          <select
            name="attachVolume"
            value={volume?.id ?? ''}
            onChange={(e) => setVolumeId(e.target.value)}
            aria-invalid={volumeError ? true : undefined}
            aria-describedby={volumeError ? 'attach-volume-error' : undefined}
          >
            {choices.map((item) => (
              <option key={item.id} value={item.id}>
                {item.name} ({item.sizeGiB} GiB)
              </option>
            ))}
          </select>
          <FieldError id="attach-volume-error" name="volume" error={volumeError} />
        </label>
        <label>
          Mount path
          <input
            name="mountPath"
            value={path}
            onChange={(e) => setPath(e.target.value)}
            size={14}
            aria-invalid={pathError ? true : undefined}
            aria-describedby={pathError ? 'attach-path-error' : undefined}
          />
          <FieldError id="attach-path-error" name="path" error={pathError} />
        </label>
        <label>
          <input type="checkbox" checked={readOnly} onChange={(e) => setReadOnly(e.target.checked)} />{' '}
          Read-only
        </label>
        <button
          type="submit"
          disabled={!ready || allowed !== true || attach.pending}
          title={disabledReason(ready, 'Pick a template, a ready volume of its pool and a path', allowed)}
        >
          Attach volume
        </button>
      </form>
      {template && choices.length === 0 ? (
        <p className="note">No ready volume of this template’s pool to attach.</p>
      ) : null}
      {template && template.warm.max > 0 ? (
        <p className="note">
          Attaching turns {template.name}’s warm pool off: a template with volumes keeps none.
        </p>
      ) : null}
      <ErrorNote error={rest} />
    </>
  );
}
