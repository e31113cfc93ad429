'use client';
/**
 * Sites and projects of the session's tenant. Sites (where machines live): the list, a create form
 * drawn from the API's own schema (name, region, description, labels),
 * Edit (name, region, description; sent with the version shown, so a change made meanwhile is
 * refused as CONFLICT instead of overwritten) and Delete after a confirmation (the API refuses a site
 * that ever had a pool). Projects: active or archived, a create form, and Archive after a
 * confirmation (there is no unarchive). Both lists page on the server and are kept live by `site.*`
 * and `project.*` events. The server's refusal of a form is shown on the field it concerns
 * (console-kit's fieldErrorsOf); buttons are enabled only when Better IAM says the person may, and
 * the API decides every call.
 */
import { useEffect, useState } from 'react';
import type { CallOutput } from '@better-compute/client';
import { describeAction, fieldErrorsOf, ListStore, stateList } from '@better-compute/console-kit';
import { useAction, useList, usePermission, useStore } from '@better-compute/console-kit/react';
import { safeCell } from '@better-compute/core';
import { useConsole } from '@/components/console-context';
import {
  ConfirmButton,
  disabledReason,
  ErrorNote,
  Field,
  IdRef,
  PagedTable,
  StateFilter,
  when,
} from '@/components/ui';
import { idempotencyKey } from '@/lib/api';
import { SchemaForm, useSchemaForm } from '@/components/schema-form';

type Site = CallOutput<'sites.get'>;
type Project = CallOutput<'projects.get'>;
type ProjectFilter = 'active' | 'archived' | 'all';
const PROJECT_FILTERS: readonly ProjectFilter[] = ['active', 'archived', 'all'];
const PROJECT_FILTER_LABELS: Record<ProjectFilter, string> = {
  active: 'Active',
  archived: 'Archived',
  all: 'All',
};
const isProjectFilter = (value: string): value is ProjectFilter =>
  (PROJECT_FILTERS as readonly string[]).includes(value);

export default function SitesPage() {
  return (
    <>
      <h1>Sites and projects</h1>
      <Sites />
      <Projects />
    </>
  );
}

function Sites() {
  const { client, permissions, live } = useConsole();
  const [store] = useState(
    () =>
      new ListStore<Site>({
        load: (cursor) => client.sites.list({ limit: 50, ...(cursor ? { cursor } : {}) }),
        readOne: (siteId) => client.sites.get({ siteId }),
        insertAt: 'end',
      }),
  );
  // A site's events (created, updated, deleted) re-read that one site; a deleted one leaves the list.
  useEffect(() => live?.track('site', store), [live, store]);
  const state = useList(store);
  const canCreate = usePermission(permissions, describeAction('sites', 'create'));
  // Drawn from the API's own schema of sites.create: its fields' kinds and help are the server's.
  const create = useSchemaForm<Site>('sites.create', {
    only: ['name', 'region', 'description', 'labels'],
    nameField: 'name',
    clearOnSuccess: true,
    submit: async (input) => {
      const site = await client.sites.create({
        ...(input as { name: string }),
        idempotencyKey: idempotencyKey(),
      });
      store.upsert(site);
      return site;
    },
  });
  return (
    <section aria-labelledby="sites">
      <h2 id="sites">Sites</h2>
      <p className="note">
        Where machines live: a data centre, a rack row, a cloud region. Pools belong to a site.
      </p>
      <SchemaForm
        id="new-site"
        form={create.form}
        loadError={create.error}
        label="New site"
        submitLabel="Create site"
        disabled={canCreate !== true}
        disabledTitle={disabledReason(true, '', canCreate)}
      />
      <PagedTable
        state={state}
        caption="Sites"
        columns={['Site', 'Region', 'Description', 'Labels', 'Actions']}
        empty="No sites yet."
        onMore={() => void store.loadMore()}
        row={(site) => <SiteRow key={site.id} site={site} store={store} />}
      />
    </section>
  );
}

function SiteRow({ site, store }: { site: Site; store: ListStore<Site> }) {
  const { client, permissions } = useConsole();
  const canUpdate = usePermission(permissions, describeAction('sites', 'update', site.id));
  const canDelete = usePermission(permissions, describeAction('sites', 'delete', site.id));
  const [editing, setEditing] = useState(false);
  const remove = useAction(async () => {
    const answer = await client.sites.delete({ siteId: site.id, ifVersion: site.version });
    store.remove(site.id);
    return answer;
  });
  const labels = Object.entries(site.labels);
  return (
    <tr data-site={site.id}>
      <td>
        <strong data-site-name="">{safeCell(site.name)}</strong>
        <br />
        <IdRef id={site.id} />
      </td>
      <td>{site.region ? safeCell(site.region) : '—'}</td>
      <td>{site.description ? safeCell(site.description) : ''}</td>
      <td>{labels.length ? labels.map(([key, value]) => safeCell(`${key}=${value}`)).join(', ') : '—'}</td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            aria-expanded={editing}
            aria-label={`Edit ${site.name}`}
            disabled={canUpdate !== true}
            title={disabledReason(true, '', canUpdate)}
            onClick={() => setEditing(!editing)}
          >
            {editing ? 'Close' : 'Edit'}
          </button>
          <ConfirmButton
            label="Delete"
            title={`Delete ${site.name}`}
            disabled={canDelete !== true || remove.pending}
            reason={disabledReason(true, '', canDelete)}
            question={`Delete the site ${safeCell(site.name)} (${site.id})? Only a site that never had a pool can be deleted; this cannot be undone.`}
            confirmLabel="Delete site"
            onConfirm={() => remove.run(undefined)}
          />
        </div>
        <ErrorNote error={remove.error} />
        {editing ? <EditSite site={site} store={store} onDone={() => setEditing(false)} /> : null}
      </td>
    </tr>
  );
}

/** Rename, move or describe a site; sent with the version shown (ifVersion). */
function EditSite({ site, store, onDone }: { site: Site; store: ListStore<Site>; onDone: () => void }) {
  const { client } = useConsole();
  const [name, setName] = useState(site.name);
  const [region, setRegion] = useState(site.region ?? '');
  const [description, setDescription] = useState(site.description);
  const update = useAction(async () => {
    const updated = await client.sites.update({
      siteId: site.id,
      ifVersion: site.version,
      ...(name.trim() !== site.name ? { name: name.trim() } : {}),
      ...(region.trim() !== (site.region ?? '') ? { region: region.trim() || null } : {}),
      ...(description !== site.description ? { description } : {}),
    });
    store.upsert(updated);
    onDone();
    return updated;
  });
  const { fields, rest } = fieldErrorsOf(update.error, ['name', 'region', 'description'], 'name');
  const form = `edit-${site.id}`;
  return (
    <form
      className="inline"
      aria-label={`Edit site ${site.name}`}
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        void update.run(undefined);
      }}
    >
      <Field form={form} name="name" label="Name" value={name} onChange={setName} error={fields.name} />
      <Field
        form={form}
        name="region"
        label="Region"
        value={region}
        onChange={setRegion}
        error={fields.region}
      />
      <Field
        form={form}
        name="description"
        label="Description"
        value={description}
        onChange={setDescription}
        error={fields.description}
      />
      <button type="submit" disabled={update.pending}>
        Save
      </button>
      <ErrorNote error={rest} />
    </form>
  );
}

function Projects() {
  const { client, permissions, live } = useConsole();
  const [projects] = useState(() =>
    stateList<Project, ProjectFilter>({
      filter: 'active',
      load: (state, cursor) =>
        client.projects.list({ limit: 50, ...(state ? { state } : {}), ...(cursor ? { cursor } : {}) }),
      readOne: (projectId) => client.projects.get({ projectId }),
    }),
  );
  // A project's events (created, archived) re-read it; one that left the filter's state leaves the list.
  useEffect(() => live?.track('project', projects.tracked), [live, projects]);
  const filter = useStore(projects.filter);
  const state = useList(projects.list);
  const canCreate = usePermission(permissions, describeAction('projects', 'create'));
  const create = useSchemaForm<Project>('projects.create', {
    nameField: 'name',
    clearOnSuccess: true,
    submit: async (input) => {
      const project = await client.projects.create({
        ...(input as { name: string }),
        idempotencyKey: idempotencyKey(),
      });
      projects.place(project);
      return project;
    },
  });
  return (
    <section aria-labelledby="projects">
      <h2 id="projects">Projects</h2>
      <p className="note">Projects group a tenant&apos;s work, and scope who may do what to it.</p>
      <SchemaForm
        id="new-project"
        form={create.form}
        loadError={create.error}
        label="New project"
        submitLabel="Create project"
        disabled={canCreate !== true}
        disabledTitle={disabledReason(true, '', canCreate)}
      />
      <StateFilter
        label="Filter projects"
        value={filter}
        filters={PROJECT_FILTERS}
        labels={PROJECT_FILTER_LABELS}
        isFilter={isProjectFilter}
        onChange={(next) => void projects.setFilter(next)}
      />
      <PagedTable
        state={state}
        caption="Projects"
        columns={['Project', 'Description', 'State', 'Created', 'Actions']}
        empty={filter === 'all' ? 'No projects yet.' : `No ${filter} projects.`}
        onMore={() => void projects.list.loadMore()}
        row={(project) => <ProjectRow key={project.id} project={project} place={projects.place} />}
      />
    </section>
  );
}

function ProjectRow({ project, place }: { project: Project; place: (project: Project) => Project }) {
  const { client, permissions } = useConsole();
  const active = project.state === 'active';
  const canArchive = usePermission(
    permissions,
    active ? describeAction('projects', 'archive', project.id) : null,
  );
  const archive = useAction(async () => {
    return place(await client.projects.archive({ projectId: project.id, ifVersion: project.version }));
  });
  return (
    <tr data-project={project.id}>
      <td>
        <strong data-project-name="">{safeCell(project.name)}</strong>
        <br />
        <IdRef id={project.id} />
      </td>
      <td>{project.description ? safeCell(project.description) : ''}</td>
      <td data-state={project.state}>
        {project.state}
        {project.archivedAt ? <span className="note">, {when(project.archivedAt)}</span> : null}
      </td>
      <td>{when(project.createdAt)}</td>
      <td>
        {active ? (
          <ConfirmButton
            label="Archive"
            title={`Archive ${project.name}`}
            disabled={canArchive !== true || archive.pending}
            reason={disabledReason(true, '', canArchive)}
            question={`Archive the project ${safeCell(project.name)} (${project.id})? It stays listed as archived; there is no way to make it active again.`}
            confirmLabel="Archive project"
            onConfirm={() => archive.run(undefined)}
          />
        ) : (
          <span className="note">—</span>
        )}
        <ErrorNote error={archive.error} />
      </td>
    </tr>
  );
}
