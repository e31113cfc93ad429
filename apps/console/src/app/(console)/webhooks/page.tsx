'use client';
/**
 * Webhooks: the tenant's endpoints, a create form drawn from webhooks.create's schema (the signing
 * secret is shown once), ping and delete.
 */
import { useEffect, useState } from 'react';
import type { CallOutput } from '@better-compute/client';
import { describeAction, ListStore } from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { ConfirmButton, disabledReason, ErrorNote, IdRef, PagedTable, when } from '@/components/ui';
import { idempotencyKey } from '@/lib/api';
import { SchemaForm, useSchemaForm } from '@/components/schema-form';

type Webhook = CallOutput<'webhooks.get'>;

export default function WebhooksPage() {
  const { client, permissions, live } = useConsole();
  const [store] = useState(
    () =>
      new ListStore<Webhook>({
        load: (cursor) => client.webhooks.list({ limit: 50, ...(cursor ? { cursor } : {}) }),
        readOne: (webhookId) => client.webhooks.get({ webhookId }),
      }),
  );
  // Webhook events re-read the one webhook, as the built-in stores do for their own kinds.
  useEffect(() => live?.track('webhook', store), [live, store]);
  const state = useList(store);
  const canCreate = usePermission(permissions, describeAction('webhooks', 'create'));
  // Drawn from webhooks.create's schema; the signing secret of the one just made is shown once.
  const [created, setCreated] = useState<CallOutput<'webhooks.create'>>();
  const create = useSchemaForm('webhooks.create', {
    only: ['url', 'events', 'description'],
    labels: { url: 'Endpoint URL', events: 'Event types' },
    kinds: { url: 'text' },
    values: { events: 'reservation.*' },
    clearOnSuccess: true,
    submit: async (input) => {
      const made = await client.webhooks.create({
        ...(input as { url: string; events: string[] }),
        idempotencyKey: idempotencyKey(),
      });
      store.upsert(made.webhook);
      setCreated(made);
      return made;
    },
  });

  return (
    <>
      <h1>Webhooks</h1>
      <SchemaForm
        id="new-webhook"
        form={create.form}
        loadError={create.error}
        label="New webhook"
        submitLabel="Add webhook"
        disabled={canCreate !== true}
        disabledTitle={disabledReason(true, '', canCreate)}
      />
      {created ? (
        <div className="once" role="status">
          Signing secret for {created.webhook.id}, shown this once: <code>{created.secret}</code>
          <br />
          <button
            type="button"
            className="secondary"
            onClick={() => void navigator.clipboard?.writeText(created.secret)}
          >
            Copy
          </button>
        </div>
      ) : null}
      <PagedTable
        state={state}
        caption="Webhooks"
        columns={['Webhook', 'Endpoint', 'Events', 'State', 'Actions']}
        empty="No webhooks yet."
        onMore={() => void store.loadMore()}
        row={(webhook) => <WebhookRow key={webhook.id} webhook={webhook} store={store} />}
      />
    </>
  );
}

function WebhookRow({ webhook, store }: { webhook: Webhook; store: ListStore<Webhook> }) {
  const { client, permissions } = useConsole();
  const canPing = usePermission(permissions, describeAction('webhooks', 'ping', webhook.id));
  const canDelete = usePermission(permissions, describeAction('webhooks', 'delete', webhook.id));
  const ping = useAction(() => client.webhooks.ping({ webhookId: webhook.id }));
  const remove = useAction(async () => {
    const answer = await client.webhooks.delete({ webhookId: webhook.id });
    store.remove(webhook.id);
    return answer;
  });
  return (
    <tr>
      <td>
        <IdRef id={webhook.id} />
        <br />
        <span className="note">{webhook.description}</span>
      </td>
      <td>{webhook.url}</td>
      <td>{webhook.events.join(', ')}</td>
      <td>
        {webhook.enabled
          ? 'enabled'
          : `disabled${webhook.disabledReason ? `: ${webhook.disabledReason}` : ''}`}
        {webhook.failingSince ? (
          <span className="note"> (failing since {when(webhook.failingSince)})</span>
        ) : null}
      </td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            disabled={!webhook.enabled || canPing !== true || ping.pending}
            title={disabledReason(webhook.enabled, 'The webhook is disabled', canPing)}
            aria-label={`Ping ${webhook.id}`}
            onClick={() => void ping.run(undefined)}
          >
            Ping
          </button>
          <ConfirmButton
            label="Delete"
            title={`Delete ${webhook.id}`}
            disabled={canDelete !== true || remove.pending}
            reason={disabledReason(true, '', canDelete)}
            question={`Delete the webhook ${webhook.id}? ${webhook.url} gets no more deliveries, and the ones waiting are dropped.`}
            confirmLabel="Delete webhook"
            onConfirm={() => remove.run(undefined)}
          />
        </div>
        {ping.result ? <p className="note">Ping queued.</p> : null}
        <ErrorNote error={ping.error ?? remove.error} />
      </td>
    </tr>
  );
}
