'use client';
/**
 * People and keys, through Better IAM: the tenant's principals, your API keys (a new key is shown
 * once) and your sessions. The calls are decided by IAM; a refusal is shown in place.
 */
import { useState, type FormEvent } from 'react';
import { ListStore, type Page } from '@better-compute/console-kit';
import { useAction, useList } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import { ConfirmButton, ErrorNote, IdRef, PagedTable, when } from '@/components/ui';
import { iamCall } from '@/lib/api';

interface Principal {
  id: string;
  kind: string;
  email: string | null;
  displayName: string;
  disabled: boolean;
  createdAt: string;
}
interface ApiKey {
  id: string;
  name: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
}
interface Session {
  id: string;
  mfa: boolean;
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
  lastSeenAt: string | null;
}

function iamList<T>(path: string, input: Record<string, unknown> = {}) {
  return new ListStore<T>({
    load: (cursor) => iamCall<Page<T>>(path, { ...input, limit: 50, ...(cursor ? { cursor } : {}) }),
    insertAt: 'start',
  });
}

export default function IamPage() {
  const { session } = useConsole();
  const [people] = useState(() => iamList<Principal>('principals/list'));
  const [keys] = useState(() => iamList<ApiKey>('apiKeys/list'));
  const [sessions] = useState(() => iamList<Session>('sessions/list'));
  const peopleState = useList(people);
  const keysState = useList(keys);
  const sessionsState = useList(sessions);
  const [keyName, setKeyName] = useState('');
  const createKey = useAction((name: string) =>
    iamCall<{ key: string; apiKey: ApiKey }>('apiKeys/create', { name }),
  );
  const [error, setError] = useState<unknown>(null);

  function submitKey(event: FormEvent) {
    event.preventDefault();
    void createKey.run(keyName.trim()).then((made) => {
      if (!made) return;
      keys.upsert(made.apiKey);
      setKeyName('');
    });
  }
  async function revoke(kind: 'apiKeys' | 'sessions', id: string) {
    setError(null);
    try {
      const answer = await iamCall<ApiKey & Session>(
        `${kind}/revoke`,
        kind === 'apiKeys' ? { apiKeyId: id } : { sessionId: id },
      );
      (kind === 'apiKeys' ? keys : sessions).upsert(answer);
    } catch (caught) {
      setError(caught);
    }
  }

  return (
    <>
      <h1>People and keys</h1>
      <ErrorNote error={error} />
      <h2>People of {session.tenantId}</h2>
      <PagedTable
        state={peopleState}
        caption="Principals"
        columns={['Name', 'Kind', 'Email', 'State', 'Since']}
        empty="Nobody here yet."
        onMore={() => void people.loadMore()}
        row={(principal) => (
          <tr key={principal.id}>
            <td>
              <IdRef id={principal.id} name={principal.displayName} />
            </td>
            <td>{principal.kind}</td>
            <td>{principal.email ?? '—'}</td>
            <td>{principal.disabled ? 'disabled' : 'active'}</td>
            <td>{when(principal.createdAt)}</td>
          </tr>
        )}
      />
      <h2>Your API keys</h2>
      <form className="inline" onSubmit={submitKey} aria-label="New API key">
        <label>
          Key name
          <input
            name="keyName"
            required
            maxLength={100}
            value={keyName}
            onChange={(e) => setKeyName(e.target.value)}
          />
        </label>
        <button type="submit" disabled={!keyName.trim() || createKey.pending}>
          Create key
        </button>
      </form>
      <ErrorNote error={createKey.error} />
      {createKey.result ? (
        <div className="once" role="status">
          API key {createKey.result.apiKey.name}, shown this once: <code>{createKey.result.key}</code>
        </div>
      ) : null}
      <PagedTable
        state={keysState}
        caption="API keys"
        columns={['Name', 'Created', 'Last used', 'Expires', 'Actions']}
        empty="No API keys."
        onMore={() => void keys.loadMore()}
        row={(key) => (
          <tr key={key.id}>
            <td>
              <IdRef id={key.id} name={key.name} />
            </td>
            <td>{when(key.createdAt)}</td>
            <td>{when(key.lastUsedAt)}</td>
            <td>{key.revokedAt ? `revoked ${when(key.revokedAt)}` : when(key.expiresAt)}</td>
            <td>
              <ConfirmButton
                label="Revoke"
                title={`Revoke ${key.name}`}
                disabled={key.revokedAt !== null}
                reason={key.revokedAt ? 'Already revoked' : undefined}
                question={`Revoke the API key ${key.name} (${key.id})? Every program using it is refused from its next call.`}
                confirmLabel="Revoke key"
                onConfirm={() => revoke('apiKeys', key.id)}
              />
            </td>
          </tr>
        )}
      />
      <h2>Your sessions</h2>
      <PagedTable
        state={sessionsState}
        caption="Sessions"
        columns={['Session', 'Second factor', 'Signed in', 'Last seen', 'Expires', 'Actions']}
        empty="No sessions."
        onMore={() => void sessions.loadMore()}
        row={(item) => (
          <tr key={item.id}>
            <td>
              <code>{item.id}</code>
            </td>
            <td>{item.mfa ? 'yes' : 'no'}</td>
            <td>{when(item.createdAt)}</td>
            <td>{when(item.lastSeenAt)}</td>
            <td>{item.revokedAt ? `revoked ${when(item.revokedAt)}` : when(item.expiresAt)}</td>
            <td>
              <ConfirmButton
                label="Revoke"
                title={`Revoke session ${item.id}`}
                disabled={item.revokedAt !== null}
                reason={item.revokedAt ? 'Already revoked' : undefined}
                question={`Sign out the session ${item.id}? If it is this browser’s, you are signed out too.`}
                confirmLabel="Revoke session"
                onConfirm={() => revoke('sessions', item.id)}
              />
            </td>
          </tr>
        )}
      />
    </>
  );
}
