'use client';
/** Nodes of the tenant's pools: state, GPUs, labels; cordon, uncordon, drain (asks first) and labels. */
import { useState, type FormEvent } from 'react';
import Link from 'next/link';
import { describeAction, type ComputeNode, type LiveConsole } from '@better-compute/console-kit';
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

export default function NodesPage() {
  const { live } = useConsole();
  return (
    <>
      <h1>Nodes</h1>
      {live ? <Nodes live={live} /> : <p aria-busy="true">Loading…</p>}
    </>
  );
}

function Nodes({ live }: { live: LiveConsole }) {
  const state = useList(live.nodes);
  const poolNames = usePoolNames(live);
  return (
    <PagedTable
      state={state}
      caption="Nodes"
      columns={['Node', 'Pool', 'State', 'GPUs free', 'Labels', 'Last heartbeat', 'Actions']}
      empty="No nodes in your tenant’s pools yet."
      onMore={() => void live.nodes.loadMore()}
      row={(node) => <NodeRow key={node.id} live={live} node={node} poolName={poolNames.get(node.poolId)} />}
    />
  );
}

const SCHEDULABLE = new Set(['ready', 'offline']);

function NodeRow({
  live,
  node,
  poolName,
}: {
  live: LiveConsole;
  node: ComputeNode;
  poolName: string | undefined;
}) {
  const { client, permissions } = useConsole();
  const cordoned = node.state === 'cordoned';
  const canCordon = usePermission(
    permissions,
    describeAction('nodes', cordoned ? 'uncordon' : 'cordon', node.id),
  );
  const canDrain = usePermission(permissions, describeAction('nodes', 'drain', node.id));
  const canLabel = usePermission(permissions, describeAction('nodes', 'label', node.id));
  const cordon = useAction(
    () => (cordoned ? client.nodes.uncordon({ nodeId: node.id }) : client.nodes.cordon({ nodeId: node.id })),
    live.nodes,
  );
  const drain = useAction(() => client.nodes.drain({ nodeId: node.id }), live.nodes);
  const label = useAction(
    (set: Record<string, string>) => client.nodes.label({ nodeId: node.id, set }),
    live.nodes,
  );
  const [labelText, setLabelText] = useState('');
  const retired = node.state === 'retired';
  const cordonAllowed = cordoned || SCHEDULABLE.has(node.state);
  const drainAllowed = !retired && node.state !== 'draining' && node.state !== 'drained';
  const parsedLabel = /^([A-Za-z0-9._/-]{1,63})=(.{0,63})$/.exec(labelText.trim());

  function addLabel(event: FormEvent) {
    event.preventDefault();
    if (!parsedLabel) return;
    void label.run({ [parsedLabel[1]!]: parsedLabel[2]! }).then((done) => done && setLabelText(''));
  }

  return (
    <tr data-node={node.id}>
      <td>
        <Link href={`/nodes/${node.id}`}>
          <strong>{node.name}</strong>
        </Link>
        <br />
        <IdRef id={node.id} />
      </td>
      <td>
        <IdRef id={node.poolId} name={poolName} />
      </td>
      <td data-state={node.state}>{node.state}</td>
      <td>
        {node.freeGpus} / {node.gpuCount}
      </td>
      <td>
        {Object.entries(node.labels).map(([key, value]) => (
          <code key={key}>
            {key}={value}{' '}
          </code>
        ))}
      </td>
      <td>{when(node.lastHeartbeatAt)}</td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            disabled={!cordonAllowed || canCordon !== true || cordon.pending}
            title={disabledReason(cordonAllowed, `A ${node.state} node cannot be cordoned`, canCordon)}
            aria-label={`${cordoned ? 'Uncordon' : 'Cordon'} ${node.name}`}
            onClick={() => void cordon.run(undefined)}
          >
            {cordoned ? 'Uncordon' : 'Cordon'}
          </button>
          <ConfirmButton
            label="Drain"
            title={`Drain ${node.name}`}
            disabled={!drainAllowed || canDrain !== true || drain.pending}
            reason={disabledReason(drainAllowed, `The node is ${node.state}`, canDrain)}
            question={`Drain ${node.name} (${node.id})? It takes no new work, and the reservations on it end as their GPUs are taken back.`}
            confirmLabel="Drain node"
            onConfirm={() => drain.run(undefined)}
          />
        </div>
        <form className="inline" onSubmit={addLabel}>
          <label>
            Label (key=value)
            <input
              name="label"
              value={labelText}
              placeholder="rack=r12"
              onChange={(e) => setLabelText(e.target.value)}
              aria-invalid={labelText !== '' && !parsedLabel}
            />
          </label>
          <button
            type="submit"
            className="secondary"
            disabled={!parsedLabel || retired || canLabel !== true || label.pending}
            title={disabledReason(!retired, 'The node is retired', canLabel)}
          >
            Set label
          </button>
        </form>
        <ErrorNote error={cordon.error ?? drain.error ?? label.error} />
      </td>
    </tr>
  );
}
