'use client';
/**
 * Bare-metal machines (docs/metal.md): the session tenant's machines, every site's or one site's,
 * paged by the server and kept live by the `metal.*` events (their subject is `machine/…`). Each row
 * shows the machine's provision state (with the state a running transition ends in), its power
 * state, what the last inspection found and the last error, and a button for each verb its
 * `allowed` list offers: the server fills it from core's allowedVerbs, so the page keeps no copy of
 * the transition table (console-kit's machineButtons).
 *
 * Provide, retire, abort and power off ask first in the browser's own confirmation, naming the
 * machine and what happens (console-kit's machineQuestion), and call only on yes. A button is
 * enabled only when Better IAM says the person may (`compute:nodes:provision` on the machine,
 * advisory); the API decides every call, and its refusal (INVALID_STATE, CONFLICT, the quorum's
 * refusal of power off) is shown in the row. Every word from the server is rendered as text.
 *
 * Machines ticked in their rows can be given one verb together (metal.bulk, with a reason): it
 * starts on each at once, or, for power off and reset while the destructive-batch quorum is on,
 * becomes one batch for the approvers (the Destructive batches page). Nothing starts unless every
 * machine allows the verb.
 */
import { type FormEvent, useEffect, useMemo, useState } from 'react';
import type { CallOutput, ComputeClient } from '@better-compute/client';
import {
  BULK_VERBS,
  bulkQuestion,
  type BulkVerb,
  describeAction,
  cleaningText,
  inventoryText,
  isGone,
  ListStore,
  machineButtons,
  machineQuestion,
  machineStateText,
  type MachineButton,
  type MachineMethod,
  type MetalMachine,
  type TrackedStore,
} from '@better-compute/console-kit';
import { useAction, useList, usePermission } from '@better-compute/console-kit/react';
import { safeCell } from '@better-compute/core';
import { useConsole } from '@/components/console-context';
import { disabledReason, ErrorNote, IdRef, PagedTable, when } from '@/components/ui';

type Site = CallOutput<'sites.get'>;

/** The machines of one site (every site's for ''), and what keeps them current. */
interface MachineList {
  store: ListStore<MetalMachine>;
  tracked: TrackedStore;
  /** Puts a machine the server answered into the list, or out of it when it is another site's. */
  place(machine: MetalMachine): MetalMachine;
}

function machineList(client: ComputeClient, siteId: string): MachineList {
  const store = new ListStore<MetalMachine>({
    load: (cursor) =>
      client.metal.list({ limit: 50, ...(siteId ? { siteId } : {}), ...(cursor ? { cursor } : {}) }),
    readOne: (machineId) => client.metal.get({ machineId }),
    // The server pages by id, oldest first: a machine enrolled now belongs at the end.
    insertAt: 'end',
  });
  const place = (machine: MetalMachine) => {
    if (!siteId || machine.siteId === siteId) store.upsert(machine);
    else store.remove(machine.id);
    return machine;
  };
  // An event names only the machine: one enrolled at another site must not join a site's list.
  const tracked: TrackedStore = {
    get loaded() {
      return store.loaded;
    },
    refresh: () => store.refresh(),
    async refreshItem(machineId) {
      if (!store.loaded) return;
      try {
        place(await client.metal.get({ machineId }));
      } catch (error) {
        if (isGone(error)) store.remove(machineId);
      }
    },
  };
  return { store, tracked, place };
}

/** The call behind each verb's button; the power buttons are metal.power with their action. */
const VERB_CALLS: Record<
  Exclude<MachineMethod, 'power'>,
  (client: ComputeClient, machineId: string) => Promise<MetalMachine>
> = {
  manage: (client, machineId) => client.metal.manage({ machineId }),
  inspect: (client, machineId) => client.metal.inspect({ machineId }),
  provide: (client, machineId) => client.metal.provide({ machineId }),
  retire: (client, machineId) => client.metal.retire({ machineId }),
  abort: (client, machineId) => client.metal.abort({ machineId }),
  recover: (client, machineId) => client.metal.recover({ machineId }),
};
const POWER_CALLS = { 'power-on': 'on', 'power-off': 'off', 'power-status': 'status' } as const;

function run(client: ComputeClient, machineId: string, button: MachineButton): Promise<MetalMachine> {
  if (button.method !== 'power') return VERB_CALLS[button.method](client, machineId);
  const action = POWER_CALLS[button.action as keyof typeof POWER_CALLS];
  return client.metal.power({ machineId, action });
}

export default function MachinesPage() {
  const { client, live } = useConsole();
  const [sites] = useState(
    () =>
      new ListStore<Site>({
        load: (cursor) => client.sites.list({ limit: 100, ...(cursor ? { cursor } : {}) }),
        readOne: (siteId) => client.sites.get({ siteId }),
        insertAt: 'end',
      }),
  );
  const [siteId, setSiteId] = useState('');
  const list = useMemo(() => machineList(client, siteId), [client, siteId]);
  useEffect(() => live?.track('machine', list.tracked), [live, list]);
  // A site renamed or made elsewhere shows in the picker and the Site column.
  useEffect(() => live?.track('site', sites), [live, sites]);
  const state = useList(list.store);
  const siteState = useList(sites);
  const siteNames = useMemo(
    () => new Map(siteState.items.map((site) => [site.id, site.name])),
    [siteState.items],
  );
  const [selected, setSelected] = useState<ReadonlySet<string>>(() => new Set());
  const toggle = (machineId: string, on: boolean) =>
    setSelected((was) => {
      const next = new Set(was);
      if (on) next.add(machineId);
      else next.delete(machineId);
      return next;
    });
  return (
    <>
      <h1>Bare-metal machines</h1>
      <p className="note">
        Machines enrolled by their BMC at your sites (better-compute metal enroll), which each site’s agent
        reaches. A button is a verb the machine’s state allows now; provide, retire, abort and power off ask
        first.
      </p>
      <form className="inline" aria-label="Choose a site" onSubmit={(event) => event.preventDefault()}>
        <label>
          Site
          <select name="site" value={siteId} onChange={(event) => setSiteId(event.target.value)}>
            <option value="">All sites</option>
            {siteState.items.map((site) => (
              <option key={site.id} value={site.id}>
                {safeCell(site.name)} ({site.id})
              </option>
            ))}
          </select>
        </label>
        {siteState.nextCursor ? (
          <button
            type="button"
            className="secondary"
            disabled={siteState.refreshing}
            onClick={() => void sites.loadMore()}
          >
            More sites
          </button>
        ) : null}
      </form>
      <ErrorNote error={siteState.error} />
      <BulkForm machineIds={[...selected]} place={list.place} onStarted={() => setSelected(new Set())} />
      <PagedTable
        state={state}
        caption="Machines"
        columns={['Machine', 'Site', 'Provision state', 'Power', 'Last inspection', 'Last error', 'Actions']}
        empty={
          siteId
            ? 'No machines at this site.'
            : 'No machines enrolled yet: better-compute metal enroll adds one (docs/metal.md).'
        }
        onMore={() => void list.store.loadMore()}
        row={(machine) => (
          <MachineRow
            key={machine.id}
            machine={machine}
            siteName={siteNames.get(machine.siteId)}
            place={list.place}
            selected={selected.has(machine.id)}
            onSelect={(on) => toggle(machine.id, on)}
          />
        )}
      />
    </>
  );
}

function MachineRow({
  machine,
  siteName,
  place,
  selected,
  onSelect,
}: {
  machine: MetalMachine;
  siteName: string | undefined;
  place: (machine: MetalMachine) => MetalMachine;
  selected: boolean;
  onSelect: (on: boolean) => void;
}) {
  const { client } = useConsole();
  const act = useAction(async (button: MachineButton) => place(await run(client, machine.id, button)));
  const found = inventoryText(machine.inventory);
  const cleaned = cleaningText(machine.cleaning);
  const buttons = machineButtons(machine.allowed);
  /** Asks first where the action loses something; calls only on yes. */
  const press = (button: MachineButton) => {
    const question = machineQuestion(machine, button.action);
    if (question === null || window.confirm(question)) void act.run(button);
  };
  return (
    <tr data-machine={machine.id}>
      <td>
        <input
          type="checkbox"
          aria-label={`Select ${safeCell(machine.name)}`}
          checked={selected}
          onChange={(event) => onSelect(event.target.checked)}
        />{' '}
        <strong data-machine-name="">{safeCell(machine.name)}</strong>
        <br />
        <IdRef id={machine.id} />
      </td>
      <td>
        <IdRef id={machine.siteId} name={siteName === undefined ? undefined : safeCell(siteName)} />
      </td>
      <td data-state={machine.provisionState} data-target={machine.targetState ?? ''}>
        {machineStateText(machine)}
        <br />
        <span className="note">since {when(machine.stateChangedAt)}</span>
      </td>
      <td data-power={machine.powerState}>{machine.powerState}</td>
      <td data-inventory={found ? 'inspected' : 'none'}>
        {found ? (
          <>
            {found.processors}
            <br />
            {found.memory}
            <br />
            {found.disks}
            <br />
            <span className="note">inspected {when(machine.inspectedAt)}</span>
          </>
        ) : (
          <span className="note">not inspected</span>
        )}
        {cleaned ? (
          <>
            <br />
            <span className="note" data-cleaning={machine.cleaning?.failed ? 'failed' : 'erased'}>
              {cleaned}, {when(machine.cleanedAt)}
            </span>
          </>
        ) : null}
      </td>
      <td data-last-error={machine.lastError ?? ''}>
        {machine.lastError ? safeCell(machine.lastError) : '—'}
      </td>
      <td>
        {buttons.length ? (
          <div className="row">
            {buttons.map((button) => (
              <ActionButton
                key={button.action}
                machine={machine}
                button={button}
                busy={act.pending}
                onPress={() => press(button)}
              />
            ))}
          </div>
        ) : (
          <span className="note">Nothing to do while it is {machine.provisionState}.</span>
        )}
        <ErrorNote error={act.error} />
      </td>
    </tr>
  );
}

/** One verb's button: enabled only when Better IAM allows its method on the machine (advisory). */
function ActionButton({
  machine,
  button,
  busy,
  onPress,
}: {
  machine: MetalMachine;
  button: MachineButton;
  busy: boolean;
  onPress: () => void;
}) {
  const { permissions } = useConsole();
  const allowed = usePermission(permissions, describeAction('metal', button.method, machine.id));
  return (
    <button
      type="button"
      className={button.confirm ? 'danger' : 'secondary'}
      disabled={allowed !== true || busy}
      title={disabledReason(true, '', allowed)}
      aria-label={`${button.label} ${machine.name}`}
      onClick={onPress}
    >
      {button.label}
    </button>
  );
}

/**
 * One verb on the ticked machines (metal.bulk) with a reason; the verbs that lose something ask
 * first, naming how many machines. The API decides; its refusal (a machine whose state does not
 * allow the verb: nothing starts) is shown here.
 */
function BulkForm({
  machineIds,
  place,
  onStarted,
}: {
  machineIds: string[];
  place: (machine: MetalMachine) => MetalMachine;
  onStarted: () => void;
}) {
  const { client, permissions } = useConsole();
  const allowed = usePermission(permissions, describeAction('metal', 'bulk'));
  const [verb, setVerb] = useState<BulkVerb>('manage');
  const [reason, setReason] = useState('');
  const bulk = useAction((input: { verb: BulkVerb; machineIds: string[]; reason: string }) =>
    client.metal.bulk({ ...input, idempotencyKey: `console-${crypto.randomUUID()}` }),
  );
  const ready = machineIds.length > 0 && reason.trim() !== '';
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const question = bulkQuestion(verb, machineIds.length);
    if (question !== null && !window.confirm(question)) return;
    void bulk.run({ verb, machineIds, reason: reason.trim() }).then((done) => {
      if (!done) return;
      done.machines.forEach(place);
      onStarted();
    });
  };
  const done = bulk.result;
  return (
    <form className="inline" aria-label="Run a verb on the selected machines" onSubmit={submit}>
      <label>
        Verb
        <select name="verb" value={verb} onChange={(event) => setVerb(event.target.value as BulkVerb)}>
          {BULK_VERBS.map((option) => (
            <option key={option.verb} value={option.verb}>
              {option.label}
            </option>
          ))}
        </select>
      </label>
      <label>
        Reason
        <input
          name="reason"
          value={reason}
          maxLength={500}
          placeholder="rack 12 bring-up"
          onChange={(event) => setReason(event.target.value)}
        />
      </label>
      <button
        type="submit"
        disabled={!ready || allowed !== true || bulk.pending}
        title={disabledReason(ready, 'Tick machines and give a reason', allowed)}
      >
        Run on {machineIds.length} selected
      </button>
      <ErrorNote error={bulk.error} />
      {done ? (
        <p role="status" data-bulk={done.mode}>
          {done.mode === 'batch' && done.batch ? (
            <>
              {done.verb} of {done.machineIds.length} machine(s) is batch <IdRef id={done.batch.id} />,
              waiting for the approvers on <a href="/batches">Destructive batches</a>.
            </>
          ) : (
            <>
              {done.verb} started on {done.machineIds.length} machine(s).
            </>
          )}
        </p>
      ) : null}
    </form>
  );
}
