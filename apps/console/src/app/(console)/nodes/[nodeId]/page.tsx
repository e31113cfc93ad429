'use client';
/**
 * One node: what it is, its workflows and commands (node-operations.tsx), and the Break-glass SSH panel for platform administrators: a short-lived
 * OpenSSH certificate for your own public key (shown once), and who holds access to the node, with
 * Revoke after a confirmation. The certificate opens the node's sshd only; the API decides each call.
 */
import { useCallback, useEffect, useMemo, useState, type FormEvent } from 'react';
import { useParams } from 'next/navigation';
import Link from 'next/link';
import type { CallOutput } from '@better-compute/client';
import { isComputeClientError } from '@better-compute/client';
import { describeAction, isGone, ListStore } from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { NODE_CONSOLE_ACTION } from '@better-compute/core/methods';
import { useConsole } from '@/components/console-context';
import { TunnelTerminal } from '@/components/tunnel-terminal';
import {
  ConfirmButton,
  disabledReason,
  ErrorNote,
  IdRef,
  PagedTable,
  usePoolNames,
  when,
} from '@/components/ui';
import { NodeOperations } from './node-operations';

type Node = CallOutput<'nodes.get'>;
type SshCert = CallOutput<'nodes.listSshCerts'>['items'][number];

const NODE_ID = /^node_[0-9a-z]{26}$/;
/** Key types a certificate can be made for; a private key, several lines or anything else is refused here. */
const PUBLIC_KEY =
  /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\r\n]*)?$/;
const ACCOUNT = /^[a-z_][a-z0-9_-]{0,31}$/;
const LIFETIMES = [5, 15, 30, 60];

/** What is wrong with a pasted public key, in words; empty when it can be sent. */
function publicKeyProblem(text: string): string {
  const key = text.trim();
  if (!key) return '';
  if (key.includes('PRIVATE KEY'))
    return 'That is a private key: paste the .pub file, never the private key.';
  if (/[\r\n]/.test(key)) return 'Paste one line: the whole public key, nothing else.';
  if (!PUBLIC_KEY.test(key))
    return 'Not an OpenSSH public key of a supported type (ssh-ed25519, ecdsa, rsa).';
  return '';
}

export default function NodePage() {
  const { nodeId } = useParams<{ nodeId: string }>();
  const { client, live } = useConsole();
  const poolNames = usePoolNames(live);
  const [node, setNode] = useState<Node | null>(null);
  const [error, setError] = useState<unknown>(null);
  const valid = NODE_ID.test(nodeId);
  useEffect(() => {
    if (!valid) return;
    client.nodes.get({ nodeId }).then(setNode).catch(setError);
  }, [client, nodeId, valid]);
  if (!valid) return <p className="error">{nodeId} is not a node id.</p>;
  return (
    <>
      <p>
        {/* The id pressable only once the API answered with the node: a page it refuses offers
            nothing to press, and its address is all there is to show. */}
        <Link href="/nodes">Nodes</Link> /{' '}
        {node ? <IdRef id={nodeId} name={node.name} /> : <code>{nodeId}</code>}
      </p>
      <h1>{node?.name ?? 'Node'}</h1>
      <ErrorNote error={error} />
      {/* A node this person may not read (another tenant's, or gone) offers nothing to press, and
          nothing is offered before the node is read: no button shows for a node the API refuses. */}
      {isGone(error) ? null : node === null ? (
        error ? null : (
          <p aria-busy="true" className="note">
            Reading the node…
          </p>
        )
      ) : (
        <>
          <p>
            Pool <IdRef id={node.poolId} name={poolNames.get(node.poolId)} />, {node.state}, {node.freeGpus}{' '}
            of {node.gpuCount} GPUs free, last heartbeat {when(node.lastHeartbeatAt)}.
          </p>
          <NodeConsole
            nodeId={nodeId}
            nodeName={node.name ?? nodeId}
            online={!['joining', 'offline', 'retired'].includes(node.state)}
          />
          <NodeOperations nodeId={nodeId} />
          <BreakGlass nodeId={nodeId} nodeName={node.name ?? nodeId} />
        </>
      )}
    </>
  );
}

/**
 * The node's root console in the page: a pty on the node through a single-use tunnel, decided as
 * compute:nodes:console on the node (tunnels.open with op console).
 */
function NodeConsole({ nodeId, nodeName, online }: { nodeId: string; nodeName: string; online: boolean }) {
  const { client, permissions } = useConsole();
  const [attached, setAttached] = useState(false);
  const check = useMemo(
    () => ({ action: NODE_CONSOLE_ACTION, resource: describeAction('nodes', 'cordon', nodeId).resource }),
    [nodeId],
  );
  const allowed = usePermission(permissions, check);
  const open = useCallback(() => client.tunnels.open({ nodeId, op: 'console' }), [client, nodeId]);
  return (
    <section aria-labelledby="node-console">
      <h2 id="node-console">Console</h2>
      <p>A root shell on {nodeName}, as the node's daemon runs it. Everything you type runs as root.</p>
      {attached ? (
        <TunnelTerminal
          label={`the root console of ${nodeName}`}
          open={open}
          onClosed={() => setAttached(false)}
        />
      ) : (
        <button
          type="button"
          disabled={!online || allowed !== true}
          title={disabledReason(online, 'The node is not online', allowed)}
          onClick={() => setAttached(true)}
        >
          Open the root console
        </button>
      )}
    </section>
  );
}

function BreakGlass({ nodeId, nodeName }: { nodeId: string; nodeName: string }) {
  const { client } = useConsole();
  const [includeExpired, setIncludeExpired] = useState(false);
  const [store, setStore] = useState(() => certStore(client, nodeId, false));
  useEffect(() => setStore(certStore(client, nodeId, includeExpired)), [client, nodeId, includeExpired]);
  const state = useList(store);

  const [publicKey, setPublicKey] = useState('');
  const [account, setAccount] = useState('root');
  const [minutes, setMinutes] = useState(15);
  const issue = useAction(async () => {
    const issued = await client.nodes.issueSshCert({ nodeId, publicKey: publicKey.trim(), account, minutes });
    void store.refresh();
    return issued;
  });
  const keyProblem = publicKeyProblem(publicKey);
  const accountProblem = ACCOUNT.test(account) ? '' : 'A Unix account name, such as root.';
  const needsMfa =
    isComputeClientError(issue.error) &&
    (issue.error.details as { reason?: string } | undefined)?.reason === 'mfa-required';

  function submit(event: FormEvent) {
    event.preventDefault();
    void issue.run(undefined);
  }

  return (
    <section aria-labelledby="break-glass">
      <h2 id="break-glass">Break-glass SSH</h2>
      <form className="inline" onSubmit={submit} aria-label="Issue an SSH certificate">
        <label>
          Your public key
          <input
            name="publicKey"
            value={publicKey}
            onChange={(e) => setPublicKey(e.target.value)}
            size={48}
          />
        </label>
        <label>
          Account
          <input
            name="account"
            value={account}
            onChange={(e) => setAccount(e.target.value.trim())}
            size={10}
          />
        </label>
        <label>
          Lifetime
          <select name="minutes" value={minutes} onChange={(e) => setMinutes(Number(e.target.value))}>
            {LIFETIMES.map((value) => (
              <option key={value} value={value}>
                {value} minutes
              </option>
            ))}
          </select>
        </label>
        <button
          type="submit"
          disabled={!publicKey.trim() || !!keyProblem || !!accountProblem || issue.pending}
          title={keyProblem || accountProblem}
        >
          Issue certificate
        </button>
      </form>
      {keyProblem || accountProblem ? <p className="note">{keyProblem || accountProblem}</p> : null}
      {needsMfa ? (
        <p className="error" role="alert">
          Break-glass access needs a session opened with a second factor: sign out, and sign in again with
          your authenticator code.
        </p>
      ) : (
        <ErrorNote error={issue.error} />
      )}
      {issue.result ? (
        <div className="once" role="status">
          Certificate <IdRef id={issue.result.id} /> for {issue.result.principal}, valid until{' '}
          {when(issue.result.validBefore)}, shown this once:
          <pre>{issue.result.certificate}</pre>
          <button
            type="button"
            className="secondary"
            onClick={() => void navigator.clipboard?.writeText(issue.result!.certificate)}
          >
            Copy
          </button>
          <p className="note">
            Save it beside your key as <code>~/.ssh/id_ed25519-cert.pub</code> (for the key{' '}
            <code>~/.ssh/id_ed25519</code>), then connect with{' '}
            <code>
              ssh -i ~/.ssh/id_ed25519 -l {issue.result.account} {nodeName}
            </code>
            , or run <code>better-compute ssh-cert --node {nodeId} --connect HOST</code> next time.
          </p>
        </div>
      ) : null}
      <h3>Who holds access</h3>
      <label>
        <input
          type="checkbox"
          checked={includeExpired}
          onChange={(e) => setIncludeExpired(e.target.checked)}
        />{' '}
        Include expired
      </label>
      <PagedTable
        state={state}
        caption="SSH certificates for this node"
        columns={['Holder', 'Principal', 'Issued', 'Expires', 'State', 'Actions']}
        empty="Nobody holds a certificate for this node."
        onMore={() => void store.loadMore()}
        row={(cert) => <CertRow key={cert.id} cert={cert} store={store} />}
      />
    </section>
  );
}

function certStore(client: ReturnType<typeof useConsole>['client'], nodeId: string, includeExpired: boolean) {
  return new ListStore<SshCert>({
    load: (cursor) =>
      client.nodes.listSshCerts({ nodeId, includeExpired, limit: 50, ...(cursor ? { cursor } : {}) }),
  });
}

function CertRow({ cert, store }: { cert: SshCert; store: ListStore<SshCert> }) {
  const { client } = useConsole();
  const revoke = useAction(async () => {
    const revoked = await client.nodes.revokeSshCert({
      sshCertId: cert.id,
      reason: 'revoked from the console',
    });
    store.upsert(revoked);
    return revoked;
  });
  const active = cert.state === 'active';
  return (
    <tr data-ssh-cert={cert.id}>
      <td>
        {cert.holderName ?? cert.holder}
        <br />
        <IdRef id={cert.id} />
      </td>
      <td>
        <code>{cert.principal}</code>
      </td>
      <td>{when(cert.issuedAt)}</td>
      <td>{when(cert.validBefore)}</td>
      <td data-state={cert.state}>
        {cert.state}
        {cert.revocationReason ? <span className="note">: {cert.revocationReason}</span> : null}
      </td>
      <td>
        <ConfirmButton
          label="Revoke"
          title={`Revoke ${cert.id}`}
          disabled={!active || revoke.pending}
          reason={active ? undefined : 'Only an active certificate can be revoked'}
          question={`Revoke ${cert.id} of ${cert.holderName ?? cert.holder}? The node refuses it from its next login.`}
          confirmLabel="Revoke certificate"
          onConfirm={() => revoke.run(undefined)}
        />
        <ErrorNote error={revoke.error} />
      </td>
    </tr>
  );
}
