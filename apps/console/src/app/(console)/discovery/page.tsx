'use client';
/**
 * PXE discovery (the console guide's section of that name): the console's side of discovering new
 * machines. A machine whose BMC cannot name its NICs is enrolled with only its product UUID and waits
 * until a person confirms its PXE MAC. A site picker over the session tenant's sites; the table of
 * what the site's agents saw PXE-booting in the last 24 hours, what needs a decision first
 * (console-kit's pxeCandidates); Refresh; Confirm on a candidate row; and "Bind a MAC by hand" for a
 * machine whose MAC is on its label or its BMC.
 *
 * Nothing here binds a MAC by itself: discovery data is unauthenticated DHCP, so every binding asks
 * first in the browser's own confirmation, naming the MAC and the machine, and only then calls
 * metal.confirmMac. The buttons are not gated by IAM in advance: the API decides, and a refusal is
 * shown where the person acted. Every word from the server is rendered as text, never as markup.
 */
import { useEffect, useState, type FormEvent } from 'react';
import {
  bindByHandInput,
  createPxeDiscoveryView,
  describeDiscovery,
  pxeConfirmQuestion,
  type MetalMachine,
  type PxeDiscovery,
  type PxeDiscoveryView,
} from '@better-compute/console-kit';
import { useAction, useStore } from '@better-compute/console-kit/react';
import { safeCell } from '@better-compute/core';
import { useConsole } from '@/components/console-context';
import { ErrorNote, when } from '@/components/ui';

const KIND_LABELS: Record<PxeDiscovery['kind'], string> = {
  candidate: 'candidate',
  unknown: 'unknown machine',
  enrolled: 'enrolled',
};

/** The browser's confirmation, in the guide's words; false when the person dismisses it. */
const askToBind = (mac: string, machineId: string) => window.confirm(pxeConfirmQuestion(mac, machineId));

export default function DiscoveryPage() {
  const { client, live, session } = useConsole();
  const [view] = useState(() => createPxeDiscoveryView(client, { tenantId: session.tenantId }));
  const sites = useStore(view.sites);
  const siteId = useStore(view.site);
  const discovered = useStore(view.discovered);
  const [bound, setBound] = useState<MetalMachine | null>(null);
  useEffect(() => void view.load(), [view]);
  // A machine enrolled, or its MAC confirmed elsewhere, changes the rows' kinds: read them again.
  useEffect(() => (live ? view.connect(live) : undefined), [live, view]);

  // Another site's rows stay in the store until the chosen site's answer replaces them: not shown.
  const current = discovered.data?.siteId === siteId ? discovered.data : null;
  const rows = current?.items ?? [];
  const loading =
    discovered.status === 'idle' ||
    discovered.status === 'loading' ||
    (current === null && discovered.status !== 'error');
  return (
    <>
      <h1>PXE discovery</h1>
      <p className="note">
        What your sites’ agents saw PXE-booting in the last 24 hours from MACs with no boot entry. Discovery
        data is unauthenticated DHCP, so nothing here is bound until you confirm it: a candidate sent the UUID
        of a machine enrolled without MACs; an unknown machine is never answered or enrolled from here.
      </p>
      <form className="inline" aria-label="Choose a site" onSubmit={(event) => event.preventDefault()}>
        <label>
          Site
          <select
            name="site"
            value={siteId ?? ''}
            disabled={sites.items.length === 0}
            onChange={(event) => void view.selectSite(event.target.value)}
          >
            {sites.items.map((site) => (
              <option key={site.id} value={site.id}>
                {safeCell(site.name)} ({site.id})
              </option>
            ))}
          </select>
        </label>
        {sites.nextCursor ? (
          <button
            type="button"
            className="secondary"
            disabled={sites.refreshing}
            onClick={() => void view.sites.loadMore()}
          >
            More sites
          </button>
        ) : null}
        <button
          type="button"
          className="secondary"
          disabled={siteId === null || loading}
          onClick={() => void view.refresh()}
        >
          Refresh
        </button>
      </form>
      <ErrorNote error={sites.error} />
      {bound ? (
        <p role="status" data-bound={bound.id}>
          Bound {bound.macs.join(', ')} as the PXE MAC of {safeCell(bound.name)} ({bound.id}): it boots from
          it now.
        </p>
      ) : null}

      <h2>Seen PXE-booting</h2>
      {sites.status === 'ready' && sites.items.length === 0 ? (
        <p className="note">This tenant has no sites, so there is nothing to discover.</p>
      ) : loading ? (
        <p aria-busy="true">Loading what the site’s agents saw…</p>
      ) : (
        <>
          <ErrorNote error={discovered.error} />
          {rows.length === 0 ? (
            discovered.error ? null : (
              <p className="note">Nothing seen PXE-booting at this site in the last 24 hours.</p>
            )
          ) : (
            <table>
              <caption className="skip">Seen PXE-booting</caption>
              <thead>
                <tr>
                  <th scope="col">MAC</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Machine</th>
                  <th scope="col">UUID sent</th>
                  <th scope="col">Last seen</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <DiscoveryRow key={row.mac} view={view} row={row} onBound={setBound} />
                ))}
              </tbody>
            </table>
          )}
        </>
      )}

      <BindByHand view={view} onBound={setBound} />
    </>
  );
}

function DiscoveryRow({
  view,
  row,
  onBound,
}: {
  view: PxeDiscoveryView;
  row: PxeDiscovery;
  onBound: (machine: MetalMachine) => void;
}) {
  const confirm = useAction(async (machineId: string) => {
    const machine = await view.confirmMac(machineId, row.mac);
    onBound(machine);
    return machine;
  });
  const text = describeDiscovery(row);
  const machineId = row.kind === 'candidate' ? row.machineId : null;
  return (
    <tr data-mac={row.mac} data-kind={row.kind}>
      <td>
        <code>{row.mac}</code>
      </td>
      <td>
        {KIND_LABELS[row.kind]}
        <br />
        <span className="note">{text.meaning}</span>
      </td>
      <td>{text.machine}</td>
      <td>
        <code>{text.uuid}</code>
      </td>
      <td>
        {when(row.lastSeenAt)}
        <br />
        <span className="note">
          seen {row.timesSeen} time(s) since {when(row.firstSeenAt)}
        </span>
      </td>
      <td>
        {machineId ? (
          <button
            type="button"
            className="danger"
            disabled={confirm.pending}
            aria-label={`Confirm ${row.mac} for ${machineId}`}
            onClick={() => {
              if (askToBind(row.mac, machineId)) void confirm.run(machineId);
            }}
          >
            Confirm
          </button>
        ) : null}
        <ErrorNote error={confirm.error} />
      </td>
    </tr>
  );
}

/**
 * For a machine enrolled without MACs whose PXE MAC is known from its label or its BMC. The button
 * enables once both fields are well formed (the machine id is a node id, docs/decisions/
 * console-pxe-discovery.md); the same confirmation and call as a candidate's Confirm.
 */
function BindByHand({ view, onBound }: { view: PxeDiscoveryView; onBound: (machine: MetalMachine) => void }) {
  const [machineId, setMachineId] = useState('');
  const [mac, setMac] = useState('');
  const input = bindByHandInput(machineId, mac);
  const bind = useAction(async (target: { machineId: string; mac: string }) => {
    const machine = await view.confirmMac(target.machineId, target.mac);
    onBound(machine);
    setMachineId('');
    setMac('');
    return machine;
  });
  function submit(event: FormEvent) {
    event.preventDefault();
    if (!input.machineId || !input.mac) return;
    if (askToBind(input.mac, input.machineId)) void bind.run({ machineId: input.machineId, mac: input.mac });
  }
  const machineProblem = machineId.trim() && !input.machineId ? 'A machine id looks like node_01…' : '';
  const macProblem =
    mac.trim() && !input.mac
      ? "Six hex pairs separated by : or -, like 52:54:00:12:34:56 (a network card's, not multicast)"
      : '';
  return (
    <section aria-labelledby="bind-by-hand">
      <h2 id="bind-by-hand">Bind a MAC by hand</h2>
      <p className="note">
        For a machine enrolled without MACs whose PXE MAC you know from its label or its BMC. The machine then
        boots from that MAC.
      </p>
      <form className="inline" aria-label="Bind a MAC by hand" onSubmit={submit}>
        <label>
          Machine id (node_…)
          <input
            name="machineId"
            value={machineId}
            size={30}
            autoComplete="off"
            aria-invalid={machineProblem ? true : undefined}
            onChange={(event) => setMachineId(event.target.value)}
          />
        </label>
        <label>
          MAC
          <input
            name="mac"
            value={mac}
            size={18}
            autoComplete="off"
            aria-invalid={macProblem ? true : undefined}
            onChange={(event) => setMac(event.target.value)}
          />
        </label>
        <button type="submit" className="danger" disabled={!input.ready || bind.pending}>
          Bind MAC
        </button>
      </form>
      {machineProblem ? <p className="note">{machineProblem}</p> : null}
      {macProblem ? <p className="note">{macProblem}</p> : null}
      <div data-bind-error="">
        <ErrorNote error={bind.error} />
      </div>
    </section>
  );
}
