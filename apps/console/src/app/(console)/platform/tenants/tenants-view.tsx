'use client';
/** The platform's tenants (root tenant only): list, create, suspend and reactivate, through Better IAM. */
import { useState, type FormEvent } from 'react';
import { ListStore, type Page } from '@better-compute/console-kit';
import { useAction, useList } from '@better-compute/console-kit/react';
import { ConfirmButton, ErrorNote, PagedTable, when } from '@/components/ui';
import { iamCall } from '@/lib/api';

interface Tenant {
  id: string;
  parentId: string | null;
  name: string;
  state: 'active' | 'suspended' | 'deleted';
  createdAt: string;
}

export function TenantsView() {
  const [store] = useState(
    () =>
      new ListStore<Tenant>({
        load: (cursor) => iamCall<Page<Tenant>>('tenants/list', { limit: 50, ...(cursor ? { cursor } : {}) }),
        insertAt: 'end',
      }),
  );
  const state = useList(store);
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const create = useAction(
    (input: { id: string; name: string }) => iamCall<Tenant>('tenants/create', input),
    store,
  );
  const change = useAction(
    ({ verb, tenantId }: { verb: 'suspend' | 'reactivate'; tenantId: string }) =>
      iamCall<Tenant>(`tenants/${verb}`, { id: tenantId }),
    store,
  );
  const idValid = /^[a-z][a-z0-9-]{1,62}$/.test(id);

  function submit(event: FormEvent) {
    event.preventDefault();
    void create.run({ id, name: name.trim() || id }).then((made) => made && (setId(''), setName('')));
  }

  return (
    <>
      <h1>Tenants</h1>
      <form className="inline" onSubmit={submit} aria-label="New tenant">
        <label>
          Tenant id (lowercase letters, digits and -)
          <input
            name="tenantId"
            required
            value={id}
            onChange={(e) => setId(e.target.value)}
            aria-invalid={id !== '' && !idValid}
          />
        </label>
        <label>
          Name
          <input name="tenantName" value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <button type="submit" disabled={!idValid || create.pending}>
          Create tenant
        </button>
      </form>
      <ErrorNote error={create.error ?? change.error} />
      <PagedTable
        state={state}
        caption="Tenants"
        columns={['Tenant', 'Parent', 'State', 'Created', 'Actions']}
        empty="No tenants."
        onMore={() => void store.loadMore()}
        row={(tenant) => (
          <tr key={tenant.id}>
            <td>
              {tenant.name} <code>{tenant.id}</code>
            </td>
            <td>{tenant.parentId ?? '—'}</td>
            <td>{tenant.state}</td>
            <td>{when(tenant.createdAt)}</td>
            <td>
              {tenant.id === 'root' || tenant.state === 'deleted' ? null : tenant.state === 'active' ? (
                <ConfirmButton
                  label="Suspend"
                  title={`Suspend ${tenant.id}`}
                  question={`Suspend ${tenant.id}? Its people and keys are refused until it is reactivated; its reservations stay.`}
                  confirmLabel="Suspend tenant"
                  onConfirm={() => change.run({ verb: 'suspend', tenantId: tenant.id })}
                />
              ) : (
                <button
                  type="button"
                  className="secondary"
                  onClick={() => void change.run({ verb: 'reactivate', tenantId: tenant.id })}
                >
                  Reactivate
                </button>
              )}
            </td>
          </tr>
        )}
      />
    </>
  );
}
