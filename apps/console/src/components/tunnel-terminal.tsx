'use client';
/**
 * A terminal in the page over a tunnel: a node's root console or an instance's serial console.
 * `open` asks the API for a single-use ticket (tunnels.open); the WebSocket goes to this origin's
 * tunnel route, which the browser authenticates with the session cookie and its own Origin. Keys
 * go to the remote as bytes, the window size follows the panel, and the remote's end (its exit
 * status, or the reason the tunnel closed) is said under the terminal. xterm.js is loaded only
 * here, in the browser.
 */
import { useEffect, useRef, useState } from 'react';
import '@xterm/xterm/css/xterm.css';
import { ErrorNote } from '@/components/ui';

type Control =
  | { t: 'exit'; status: number | null; error?: { code: string; message: string } }
  | { t: 'error'; code: string; message: string };

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
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('Connecting…');
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    let disposed = false;
    let ws: WebSocket | undefined;
    let cleanup = () => {};
    void (async () => {
      try {
        const [{ Terminal }, { FitAddon }, { ticket }] = await Promise.all([
          import('@xterm/xterm'),
          import('@xterm/addon-fit'),
          open(),
        ]);
        if (disposed || !host.current) return;
        const terminal = new Terminal({ cursorBlink: true, fontSize: 14, lineHeight: 1.2, scrollback: 5000 });
        const fit = new FitAddon();
        terminal.loadAddon(fit);
        terminal.open(host.current);
        fit.fit();
        const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
        ws = new WebSocket(
          `${scheme}//${window.location.host}/api/compute/tunnels/${encodeURIComponent(ticket)}`,
        );
        ws.binaryType = 'arraybuffer';
        const socket = ws;
        const encoder = new TextEncoder();
        const sendSize = () => {
          if (socket.readyState === WebSocket.OPEN)
            socket.send(JSON.stringify({ t: 'resize', cols: terminal.cols, rows: terminal.rows }));
        };
        socket.onopen = () => {
          setStatus('Connected. Closing this panel detaches; the remote keeps running.');
          sendSize();
          terminal.focus();
        };
        socket.onmessage = (message) => {
          if (message.data instanceof ArrayBuffer) {
            terminal.write(new Uint8Array(message.data));
            return;
          }
          let control: Control;
          try {
            control = JSON.parse(String(message.data)) as Control;
          } catch {
            return;
          }
          if (control.t === 'exit')
            setStatus(
              control.error
                ? `Ended: ${control.error.message}`
                : `The remote program exited${control.status === null ? '' : ` with status ${control.status}`}.`,
            );
          else if (control.t === 'error') setStatus(`Ended: ${control.message}`);
        };
        socket.onclose = () =>
          setStatus((current) =>
            current.startsWith('Connected') || current === 'Connecting…' ? 'The tunnel closed.' : current,
          );
        const typed = terminal.onData((data) => {
          if (socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
        });
        const resized = terminal.onResize(sendSize);
        const observer = new ResizeObserver(() => fit.fit());
        observer.observe(host.current);
        cleanup = () => {
          observer.disconnect();
          typed.dispose();
          resized.dispose();
          terminal.dispose();
        };
      } catch (failure) {
        if (!disposed) {
          setError(failure);
          setStatus('Not connected.');
        }
      }
    })();
    return () => {
      disposed = true;
      ws?.close(1000);
      cleanup();
    };
  }, [open]);

  return (
    <section className="terminal-panel" aria-label={`Terminal: ${label}`}>
      <p role="status">{status}</p>
      <ErrorNote error={error} />
      <div ref={host} className="terminal" data-testid="terminal" />
      <button type="button" onClick={onClosed}>
        Close the terminal
      </button>
    </section>
  );
}
