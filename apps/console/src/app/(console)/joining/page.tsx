'use client';
/**
 * Joining machines: join tokens for a pool (the secret is shown once) and the join requests that
 * machines made with them, approved or rejected here. Both lists follow their events live.
 */
import { useEffect, useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import { describeAction, ListStore, type LiveConsole } from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { useConsole } from '@/components/console-context';
import {
  ConfirmButton,
  disabledReason,
  ErrorNote,
  IdRef,
  PagedTable,
  usePoolNames,
  when,
} from '@/components/ui';
import { idempotencyKey } from '@/lib/api';

type JoinToken = CallOutput<'joinTokens.list'>['items'][number];
type JoinRequest = CallOutput<'joinRequests.list'>['items'][number];

export default function JoiningPage() {
  const { live } = useConsole();
  return (
    <>
      <h1>Joining machines</h1>
      {live ? <Joining live={live} /> : <p aria-busy="true">Loading…</p>}
    </>
  );
}

function Joining({ live }: { live: LiveConsole }) {
  const { client } = useConsole();
  const [tokens] = useState(
    () =>
      new ListStore<JoinToken>({
        load: (cursor) => client.joinTokens.list({ limit: 50, ...(cursor ? { cursor } : {}) }),
      }),
  );
  const [requests] = useState(
    () =>
      new ListStore<JoinRequest>({
        load: (cursor) => client.joinRequests.list({ limit: 50, ...(cursor ? { cursor } : {}) }),
      }),
  );
  // Neither group has a `get`: an event about one refreshes the first page.
  useEffect(() => live.track('joinToken', tokens), [live, tokens]);
  useEffect(() => live.track('joinRequest', requests), [live, requests]);
  const tokensState = useList(tokens);
  const requestsState = useList(requests);
  const poolNames = usePoolNames(live);
  return (
    <>
      <NewToken live={live} tokens={tokens} />
      <h2>Join tokens</h2>
      <PagedTable
        state={tokensState}
        caption="Join tokens"
        columns={['Token', 'Pool', 'Uses left', 'Pre-approved', 'State', 'Expires', 'Actions']}
        empty="No join tokens."
        onMore={() => void tokens.loadMore()}
        row={(token) => <TokenRow key={token.id} token={token} tokens={tokens} poolNames={poolNames} />}
      />
      <h2>Join requests</h2>
      <PagedTable
        state={requestsState}
        caption="Join requests"
        columns={['Machine', 'Pool', 'State', 'Asked', 'Actions']}
        empty="No machine has asked to join."
        onMore={() => void requests.loadMore()}
        row={(request) => (
          <RequestRow key={request.id} request={request} requests={requests} poolNames={poolNames} />
        )}
      />
    </>
  );
}

function NewToken({ live, tokens }: { live: LiveConsole; tokens: ListStore<JoinToken> }) {
  const { client, permissions } = useConsole();
  const pools = useList(live.pools);
  const owned = pools.items.filter((pool) => pool.access === 'owner');
  const [poolId, setPoolId] = useState('');
  const [uses, setUses] = useState(1);
  const [hours, setHours] = useState(24);
  const [preApproved, setPreApproved] = useState(false);
  const allowed = usePermission(permissions, describeAction('joinTokens', 'create'));
  const create = useAction(
    (input: { poolId: string; uses: number; lifetimeSeconds: number; preApproved: boolean }) =>
      client.joinTokens.create({ ...input, idempotencyKey: idempotencyKey() }),
  );
  const chosen = poolId || owned[0]?.id || '';
  const valid = chosen !== '' && Number.isInteger(uses) && uses >= 1 && hours * 3600 >= 60 && hours <= 720;

  function submit(event: FormEvent) {
    event.preventDefault();
    void create
      .run({ poolId: chosen, uses, lifetimeSeconds: Math.round(hours * 3600), preApproved })
      .then((made) => made && tokens.upsert(made.joinToken));
  }

  return (
    <section aria-labelledby="new-token">
      <h2 id="new-token">New join token</h2>
      <form className="inline" onSubmit={submit}>
        <label>
          Pool
          <select name="tokenPool" value={chosen} onChange={(e) => setPoolId(e.target.value)}>
            {owned.map((pool) => (
              <option key={pool.id} value={pool.id}>
                {pool.name} ({pool.id})
              </option>
            ))}
          </select>
        </label>
        <label>
          Machines it admits
          <input
            name="uses"
            type="number"
            min={1}
            max={100000}
            value={uses}
            onChange={(e) => setUses(Number(e.target.value))}
          />
        </label>
        <label>
          Valid for (hours)
          <input
            name="lifetime"
            type="number"
            min={1}
            max={720}
            value={hours}
            onChange={(e) => setHours(Number(e.target.value))}
          />
        </label>
        <label className="check">
          <input
            name="preApproved"
            type="checkbox"
            checked={preApproved}
            onChange={(e) => setPreApproved(e.target.checked)}
          />
          &nbsp;Pre-approved (machines become nodes without a request to approve)
        </label>
        <button
          type="submit"
          disabled={!valid || allowed !== true || create.pending}
          title={disabledReason(valid, 'Choose a pool you own', allowed)}
        >
          Create token
        </button>
      </form>
      <ErrorNote error={create.error} />
      {create.result ? (
        <div className="once" role="status">
          Join token {create.result.joinToken.id}, shown this once: <code>{create.result.token}</code>
          <br />
          On the machine, save it to a file only root can read, then run{' '}
          <code>
            bcd join --url {typeof window === 'undefined' ? '' : window.location.origin} --token-file FILE
          </code>{' '}
          (a token never goes on a command line).
        </div>
      ) : null}
    </section>
  );
}

function TokenRow({
  token,
  tokens,
  poolNames,
}: {
  token: JoinToken;
  tokens: ListStore<JoinToken>;
  poolNames: ReadonlyMap<string, string>;
}) {
  const { client, permissions } = useConsole();
  const active = token.state === 'active';
  const allowed = usePermission(
    permissions,
    active ? describeAction('joinTokens', 'revoke', token.id) : null,
  );
  const revoke = useAction(() => client.joinTokens.revoke({ joinTokenId: token.id }), tokens);
  return (
    <tr>
      <td>
        <IdRef id={token.id} />
        <br />
        <span className="note">{token.description}</span>
      </td>
      <td>
        <IdRef id={token.poolId} name={poolNames.get(token.poolId)} />
      </td>
      <td>
        {token.usesLeft} / {token.usesAllowed}
      </td>
      <td>{token.preApproved ? 'yes' : 'no'}</td>
      <td>{token.state}</td>
      <td>{when(token.expiresAt)}</td>
      <td>
        <ConfirmButton
          label="Revoke"
          title={`Revoke ${token.id}`}
          disabled={!active || allowed !== true || revoke.pending}
          reason={disabledReason(active, `The token is ${token.state}`, allowed)}
          question={`Revoke the join token ${token.id}? No machine can join with it any more, and the join requests made with it that wait are rejected.`}
          confirmLabel="Revoke token"
          onConfirm={() => revoke.run(undefined)}
        />
        <ErrorNote error={revoke.error} />
      </td>
    </tr>
  );
}

function RequestRow({
  request,
  requests,
  poolNames,
}: {
  request: JoinRequest;
  requests: ListStore<JoinRequest>;
  poolNames: ReadonlyMap<string, string>;
}) {
  const { client, permissions } = useConsole();
  const pending = request.state === 'pending';
  const canApprove = usePermission(
    permissions,
    pending ? describeAction('joinRequests', 'approve', request.id) : null,
  );
  const canReject = usePermission(
    permissions,
    pending ? describeAction('joinRequests', 'reject', request.id) : null,
  );
  const approve = useAction(() => client.joinRequests.approve({ joinRequestId: request.id }));
  const reject = useAction(() =>
    client.joinRequests.reject({ joinRequestId: request.id, reason: 'rejected from the console' }),
  );
  const settle = () => void requests.refresh();
  return (
    <tr>
      <td>
        <IdRef id={request.id} name={request.hostname} />
      </td>
      <td>
        <IdRef id={request.poolId} name={poolNames.get(request.poolId)} />
      </td>
      <td>
        {request.state}
        {request.nodeId ? ` as ${request.nodeId}` : ''}
        {request.reason ? ` (${request.reason})` : ''}
      </td>
      <td>{when(request.createdAt)}</td>
      <td>
        <div className="row">
          <button
            type="button"
            disabled={!pending || canApprove !== true || approve.pending}
            title={disabledReason(pending, `The request is ${request.state}`, canApprove)}
            aria-label={`Approve ${request.hostname}`}
            onClick={() => void approve.run(undefined).then(settle)}
          >
            Approve
          </button>
          <ConfirmButton
            label="Reject"
            title={`Reject ${request.hostname}`}
            disabled={!pending || canReject !== true || reject.pending}
            reason={disabledReason(pending, `The request is ${request.state}`, canReject)}
            question={`Reject ${request.hostname} (${request.id})? The machine does not join; it must ask again with a new token.`}
            confirmLabel="Reject machine"
            onConfirm={() => reject.run(undefined).then(settle)}
          />
        </div>
        <ErrorNote error={approve.error ?? reject.error} />
      </td>
    </tr>
  );
}
