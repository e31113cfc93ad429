'use client';
/**
 * A terminal in the page over a tunnel: a node's root console or an instance's serial console,
 * console-kit's terminal part (`useTerminal`, over `mountTerminal`) in a panel. `open` asks the API
 * for a single-use ticket (tunnels.open); the WebSocket goes to this origin's tunnel route, which
 * the browser authenticates with the session cookie and its own Origin. The remote's end (its exit
 * status, or the reason the tunnel closed) is said under the terminal. xterm.js is loaded only
 * here, in the browser, when a terminal opens.
 */
import '@xterm/xterm/css/xterm.css';
import type { Xterm } from '@better-compute/console-kit';
import { useTerminal } from '@better-compute/console-kit/react';
import { ErrorNote } from '@/components/ui';

/** xterm.js and its fit add-on, loaded on the first terminal. */
const loadXterm = async (): Promise<Xterm> => {
  const [{ Terminal }, { FitAddon }] = await Promise.all([
    import('@xterm/xterm'),
    import('@xterm/addon-fit'),
  ]);
  return { Terminal, FitAddon } as unknown as Xterm;
};

export function TunnelTerminal({
  label,
  open,
  onClosed,
}: {
  /** What the terminal is attached to, for its label: "the root console of gpu-a-01". */
  label: string;
  open: () => Promise<{ ticket: string }>;
  onClosed: () => void;
}) {
  const { host, status } = useTerminal({ open, xterm: loadXterm });
  return (
    <section className="terminal-panel" aria-label={`Terminal: ${label}`}>
      <p role="status">{status.text}</p>
      <ErrorNote error={status.error} />
      <div ref={host} className="terminal" data-testid="terminal" />
      <button type="button" onClick={onClosed}>
        Close the terminal
      </button>
    </section>
  );
}
