'use client';
/**
 * Instances: the tenant's VPS instances, live; a create form (a VPS pool, one of its flavors, an
 * image, a host name, an optional SSH key, and whether the guest may reach beyond its node); Start, Stop and Delete, the last two after a
 * confirmation that names what happens. Console opens a running instance's serial console in the
 * page, over a tunnel decided as compute:instances:exec on the instance.
 */
import { useCallback, useEffect, useMemo, useState, type FormEvent } from 'react';
import type { CallOutput } from '@better-compute/client';
import { describeAction, ListStore } from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { INSTANCE_EXEC_ACTION } from '@better-compute/core/methods';
import { useConsole } from '@/components/console-context';
import { TunnelTerminal } from '@/components/tunnel-terminal';
import { useVpsChoices, VpsChoiceFields } from '@/components/vps-choices';
import { ConfirmButton, disabledReason, ErrorNote, IdRef, PagedTable, when } from '@/components/ui';
import { idempotencyKey } from '@/lib/api';

type Instance = CallOutput<'instances.get'>;

/** What instances.create accepts as a name: one DNS label, checked before the button enables. */
const HOST_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** One OpenSSH public key line; a private key or several lines never leave the page. */
const PUBLIC_KEY =
  /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}( [A-Za-z0-9 @._+=:-]*)?$/;

export default function InstancesPage() {
  const { client, permissions, live } = useConsole();
  const [store] = useState(
    () =>
      new ListStore<Instance>({
        load: (cursor) => client.instances.list({ limit: 50, ...(cursor ? { cursor } : {}) }),
        readOne: (instanceId) => client.instances.get({ instanceId }),
      }),
  );
  // Instance events (created, running, stopped, failed, deleted) re-read the one instance.
  useEffect(() => live?.track('instance', store), [live, store]);
  const state = useList(store);
  const canCreate = usePermission(permissions, describeAction('instances', 'create'));
  const [consoleOf, setConsoleOf] = useState<Instance | null>(null);
  const openConsole = useCallback(
    () => client.tunnels.open({ instanceId: consoleOf!.id, op: 'console' }),
    [client, consoleOf],
  );

  const [name, setName] = useState('');
  const [sshKey, setSshKey] = useState('');
  const [egress, setEgress] = useState(true);
  const choices = useVpsChoices();
  const { pools, poolId, flavorId, imageId, error: choicesError } = choices;

  const create = useAction((input: Parameters<typeof client.instances.create>[0]) =>
    client.instances.create(input),
  );
  const key = sshKey.trim();
  const keyProblem =
    key && !PUBLIC_KEY.test(key) ? 'Paste one OpenSSH public key line (never a private key).' : '';
  const nameProblem = name && !HOST_NAME.test(name) ? 'A host name: lower-case letters, digits and -.' : '';
  const ready = poolId && flavorId && imageId && HOST_NAME.test(name) && !keyProblem;

  function submit(event: FormEvent) {
    event.preventDefault();
    void create
      .run({
        poolId,
        flavorId,
        imageId,
        name,
        sshKeys: key ? [key] : [],
        egress,
        idempotencyKey: idempotencyKey(),
      })
      .then((made) => {
        if (!made) return;
        store.upsert(made);
        setName('');
      });
  }

  return (
    <>
      <h1>Instances</h1>
      {pools.length === 0 && !choicesError ? (
        <p className="note">
          No VPS pool is offered to this tenant yet; an operator creates one and its flavors.
        </p>
      ) : null}
      <form className="inline" onSubmit={submit} aria-label="New instance">
        <VpsChoiceFields
          choices={choices}
          flavorText={(flavor) =>
            `${flavor.name} (${flavor.vcpus} vCPU, ${flavor.memoryMiB} MiB, ${flavor.diskGiB} GiB${flavor.gpus ? `, ${flavor.gpus} GPU` : ''})`
          }
        />
        <label>
          Host name
          <input
            name="name"
            required
            value={name}
            onChange={(e) => setName(e.target.value.trim())}
            size={16}
          />
        </label>
        <label>
          SSH public key (optional)
          <input name="sshKey" value={sshKey} onChange={(e) => setSshKey(e.target.value)} size={40} />
        </label>
        <label title="Without it, the guest opens no connection beyond its node; only the node reaches it">
          <input type="checkbox" checked={egress} onChange={(e) => setEgress(e.target.checked)} /> Outbound
          internet (NAT)
        </label>
        <button
          type="submit"
          disabled={!ready || canCreate !== true || create.pending}
          title={keyProblem || nameProblem || disabledReason(true, '', canCreate)}
        >
          Create instance
        </button>
      </form>
      {keyProblem || nameProblem ? <p className="note">{keyProblem || nameProblem}</p> : null}
      <ErrorNote error={create.error ?? choicesError} />
      <PagedTable
        state={state}
        caption="Instances"
        columns={['Instance', 'Shape', 'State', 'Address', 'Actions']}
        empty="No instances yet."
        onMore={() => void store.loadMore()}
        row={(instance) => (
          <InstanceRow key={instance.id} instance={instance} store={store} onConsole={setConsoleOf} />
        )}
      />
      {consoleOf ? (
        <TunnelTerminal
          key={consoleOf.id}
          label={`the serial console of ${consoleOf.name}`}
          open={openConsole}
          onClosed={() => setConsoleOf(null)}
        />
      ) : null}
    </>
  );
}

function InstanceRow({
  instance,
  store,
  onConsole,
}: {
  instance: Instance;
  store: ListStore<Instance>;
  onConsole: (instance: Instance) => void;
}) {
  const { client, permissions } = useConsole();
  const execCheck = useMemo(
    () => ({
      action: INSTANCE_EXEC_ACTION,
      resource: describeAction('instances', 'stop', instance.id).resource,
    }),
    [instance.id],
  );
  const canExec = usePermission(permissions, execCheck);
  const canStart = usePermission(permissions, describeAction('instances', 'start', instance.id));
  const canStop = usePermission(permissions, describeAction('instances', 'stop', instance.id));
  const canDelete = usePermission(permissions, describeAction('instances', 'delete', instance.id));
  const changed = (next: Instance) => {
    store.upsert(next);
    return next;
  };
  const start = useAction(async () => changed(await client.instances.start({ instanceId: instance.id })));
  const stop = useAction(async () => changed(await client.instances.stop({ instanceId: instance.id })));
  const remove = useAction(async () => changed(await client.instances.delete({ instanceId: instance.id })));
  const busy = start.pending || stop.pending || remove.pending;
  const stopped = instance.state === 'stopped';
  const running = instance.state === 'running';
  const deletable = instance.state !== 'deleting' && instance.state !== 'deleted';
  return (
    <tr data-instance={instance.id}>
      <td>
        <IdRef id={instance.id} name={instance.name} />
        <br />
        <span className="note">created {when(instance.createdAt)}</span>
      </td>
      <td>
        {instance.vcpus} vCPU, {instance.memoryMiB} MiB, {instance.diskGiB} GiB
        {instance.gpus ? `, ${instance.gpus} GPU` : ''}
      </td>
      <td data-state={instance.state}>
        {instance.state}
        {instance.reason ? <span className="note">: {instance.reason}</span> : null}
      </td>
      <td>{instance.address ?? <span className="note">none yet</span>}</td>
      <td>
        <div className="row">
          <button
            type="button"
            className="secondary"
            disabled={!stopped || canStart !== true || busy}
            title={disabledReason(stopped, 'Only a stopped instance starts', canStart)}
            aria-label={`Start ${instance.id}`}
            onClick={() => void start.run(undefined)}
          >
            Start
          </button>
          <ConfirmButton
            label="Stop"
            title={`Stop ${instance.id}`}
            disabled={!running || canStop !== true || busy}
            reason={disabledReason(running, 'Only a running instance stops', canStop)}
            question={`Stop ${instance.name} (${instance.id})? The guest is asked to power off and is stopped by force after a minute; its disk stays.`}
            confirmLabel="Stop instance"
            onConfirm={() => stop.run(undefined)}
          />
          <ConfirmButton
            label="Delete"
            title={`Delete ${instance.id}`}
            disabled={!deletable || canDelete !== true || busy}
            reason={disabledReason(deletable, 'It is already being deleted', canDelete)}
            question={`Delete ${instance.name} (${instance.id})? The machine stops, its disk is removed for good, and its place on the node is freed.`}
            confirmLabel="Delete instance"
            onConfirm={() => remove.run(undefined)}
          />
        </div>
        <button
          type="button"
          className="secondary"
          disabled={!running || canExec !== true}
          title={disabledReason(running, 'Only a running instance has a console', canExec)}
          aria-label={`Console of ${instance.id}`}
          onClick={() => onConsole(instance)}
        >
          Console
        </button>
        <ErrorNote error={start.error ?? stop.error ?? remove.error} />
      </td>
    </tr>
  );
}
