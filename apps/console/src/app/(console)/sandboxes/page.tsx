'use client';
/**
 * Sandboxes: your sandboxes (or everyone's in the tenant), live, with their lifetime counting down;
 * create from a template, +30 min, a snapshot, delete after asking; the `sandbox exec` command for a
 * shell (OpenSSH through a tunnel, never in the browser). Below, the tenant's templates with their
 * warm pools: create, Warm +1 / −1, delete after asking; each template's volumes with Detach (after
 * asking), and an Attach a volume form (a ready volume of the template's pool, a mount path,
 * read-only). The template buttons are enabled only when Better IAM says the person may (advisory:
 * the API decides every call); refusals show in place, a refused field beside the field.
 */
import { useEffect, useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import { isComputeClientError } from '@better-compute/client';
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
import { ChoiceField, ConfirmButton, disabledReason, ErrorNote, PagedTable } from '@/components/ui';
import { idempotencyKey } from '@/lib/api';

type Sandbox = CallOutput<'sandboxes.create'>;
type Template = CallOutput<'sandboxTemplates.get'>;
type Volume = CallOutput<'sandboxVolumes.get'>;

const NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;

/** Whole seconds left until `iso`, ticking every second; 0 once it has passed. */
function useSecondsLeft(iso: string | null): number | null {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!iso) return;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [iso]);
  return iso ? Math.max(0, Math.floor((Date.parse(iso) - now) / 1000)) : null;
}

function countdown(seconds: number): string {
  if (seconds <= 0) return 'expired';
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return `${h > 0 ? `${h} h ` : ''}${m} min ${String(s).padStart(2, '0')} s left`;
}

export default function SandboxesPage() {
  const { client, live } = useConsole();
  const [everyone, setEveryone] = useState(false);
  const [store, setStore] = useState(() => sandboxStore(client, false));
  useEffect(() => setStore(sandboxStore(client, everyone)), [client, everyone]);
  useEffect(() => live?.track('sandbox', store), [live, store]);
  const state = useList(store);
  const [templates] = useState(
    () =>
      new ListStore<Template>({
        load: (cursor) => client.sandboxTemplates.list({ limit: 100, ...(cursor ? { cursor } : {}) }),
        readOne: (templateId) => client.sandboxTemplates.get({ templateId }),
      }),
  );
  useEffect(() => live?.track('sandboxTemplate', templates), [live, templates]);
  // A warm pool's counts change with its sandboxes' events, not the template's: re-read the list then.
  useEffect(
    () =>
      live?.track('sandbox', {
        get loaded() {
          return templates.loaded;
        },
        refresh: () => templates.refresh(),
      }),
    [live, templates],
  );
  const templateState = useList(templates);
  const names = new Map(templateState.items.map((template) => [template.id, template.name]));
  // A deployment without a snapshot store says so once; the button goes for the rest of the session.
  const [snapshotsOff, setSnapshotsOff] = useState(false);

  const [templateId, setTemplateId] = useState('');
  useEffect(() => {
    if (!templateId && templateState.items[0]) setTemplateId(templateState.items[0].id);
  }, [templateId, templateState.items]);
  const create = useAction(async () => {
    const made = await client.sandboxes.create({
      templateId,
      waitSeconds: 20,
      idempotencyKey: idempotencyKey(),
    });
    store.upsert(made);
    return made;
  });

  function submit(event: FormEvent) {
    event.preventDefault();
    void create.run(undefined);
  }

  return (
    <>
      <h1>Sandboxes</h1>
      {templateState.status === 'ready' && templateState.items.length === 0 ? (
        <p className="note">No sandbox templates yet: a tenant administrator creates them below.</p>
      ) : null}
      <form className="inline" onSubmit={submit} aria-label="New sandbox">
        <ChoiceField
          label="Template"
          name="template"
          items={templateState.items}
          value={templateId}
          onChange={setTemplateId}
          text={(template) => template.name}
        />
        <button type="submit" disabled={!templateId || create.pending}>
          Create sandbox
        </button>
        <label>
          <input type="checkbox" checked={everyone} onChange={(e) => setEveryone(e.target.checked)} />{' '}
          Everyone’s sandboxes
        </label>
      </form>
      <ErrorNote error={create.error} />
      <PagedTable
        state={state}
        caption="Sandboxes"
        columns={['Sandbox', 'Template', 'State', 'Lifetime', 'Actions']}
        empty="No sandboxes."
        onMore={() => void store.loadMore()}
        row={(sandbox) => (
          <SandboxRow
            key={sandbox.id}
            sandbox={sandbox}
            templateName={names.get(sandbox.templateId) ?? sandbox.templateId}
            store={store}
            snapshotsOff={snapshotsOff}
            onSnapshotsOff={() => setSnapshotsOff(true)}
          />
        )}
      />
      <Templates store={templates} />
    </>
  );
}

function sandboxStore(client: ReturnType<typeof useConsole>['client'], all: boolean) {
  return new ListStore<Sandbox>({
    load: (cursor) => client.sandboxes.list({ all, limit: 50, ...(cursor ? { cursor } : {}) }),
    readOne: (sandboxId) => client.sandboxes.get({ sandboxId }),
  });
}

function SandboxRow({
  sandbox,
  templateName,
  store,
  snapshotsOff,
  onSnapshotsOff,
}: {
  sandbox: Sandbox;
  templateName: string;
  store: ListStore<Sandbox>;
  snapshotsOff: boolean;
  onSnapshotsOff: () => void;
}) {
  const { client } = useConsole();
  const left = useSecondsLeft(sandbox.expiresAt);
  const changed = (next: Sandbox) => {
    store.upsert(next);
    return next;
  };
  const extend = useAction(async () =>
    changed(await client.sandboxes.extend({ sandboxId: sandbox.id, bySeconds: 1800 })),
  );
  const snapshot = useAction(async () => {
    try {
      return await client.sandboxes.snapshot({ sandboxId: sandbox.id, idempotencyKey: idempotencyKey() });
    } catch (error) {
      if (isComputeClientError(error) && error.code === 'INVALID_CONFIG') onSnapshotsOff();
      throw error;
    }
  });
  const remove = useAction(async () => changed(await client.sandboxes.delete({ sandboxId: sandbox.id })));
  const live = sandbox.state === 'running' || sandbox.state === 'starting';
  const busy = extend.pending || snapshot.pending || remove.pending;
  const snapshotsUnavailable =
    snapshotsOff || (isComputeClientError(snapshot.error) && snapshot.error.code === 'INVALID_CONFIG');
  return (
    <tr data-sandbox={sandbox.id}>
      <td>
        <code>{sandbox.id}</code>
        <br />
        <span className="note">
          {sandbox.warm ? 'from the warm pool' : 'started cold'}
          {sandbox.fromSnapshotId ? `, restored from ${sandbox.fromSnapshotId}` : ''}
        </span>
      </td>
      <td>{templateName}</td>
      <td data-state={sandbox.state}>
        {sandbox.state}
        {sandbox.reason ? <span className="note">: {sandbox.reason}</span> : null}
        {!sandbox.identityRebound ? (
          <p className="note" role="note">
            Still answers to its source’s SSH identity: exec waits until the source and sibling restores are
            gone, or the node gives it its own.
          </p>
        ) : null}
      </td>
      <td>{left === null ? '' : <span data-left={left}>{countdown(left)}</span>}</td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            disabled={!live || busy}
            aria-label={`Extend ${sandbox.id} by 30 minutes`}
            onClick={() => void extend.run(undefined)}
          >
            +30 min
          </button>
          {snapshotsUnavailable ? null : (
            <button
              type="button"
              className="secondary"
              disabled={sandbox.state !== 'running' || busy}
              aria-label={`Snapshot ${sandbox.id}`}
              onClick={() => void snapshot.run(undefined)}
            >
              Snapshot
            </button>
          )}
          <ConfirmButton
            label="Delete"
            title={`Delete ${sandbox.id}`}
            disabled={!live || busy}
            question={`Delete ${sandbox.id}? It stops and its disk goes; its snapshots go too unless they were kept.`}
            confirmLabel="Delete sandbox"
            onConfirm={() => remove.run(undefined)}
          />
        </div>
        {sandbox.state === 'running' ? (
          <p className="note">
            Shell: <code>better-compute sandbox exec {sandbox.id}</code>
          </p>
        ) : null}
        {snapshot.result ? <p className="note">Snapshot {snapshot.result.id} is being taken.</p> : null}
        {snapshotsUnavailable ? (
          <p className="note">Snapshots are not configured on this deployment.</p>
        ) : null}
        <ErrorNote
          error={
            extend.error ??
            (isComputeClientError(snapshot.error) && snapshot.error.code === 'INVALID_CONFIG'
              ? null
              : snapshot.error) ??
            remove.error
          }
        />
      </td>
    </tr>
  );
}

function Templates({ store }: { store: ListStore<Template> }) {
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
        <code>{template.id}</code>
      </td>
      <td>
        {poolName ?? <code>{template.poolId}</code>}, <code>{template.flavorId}</code>,{' '}
        {imageName ?? <code>{template.imageId}</code>} ({template.runtime})
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
          {volumeError ? (
            <span id="attach-volume-error" className="field-error" data-field-error="volume">
              {volumeError}
            </span>
          ) : null}
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
          {pathError ? (
            <span id="attach-path-error" className="field-error" data-field-error="path">
              {pathError}
            </span>
          ) : null}
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
