/**
 * A terminal over a tunnel, with no framework: a node's root console, an instance's serial console.
 * `mountTerminal` asks for a single-use ticket (`tunnels.open`, through the caller's `open`), opens
 * the WebSocket to the console's tunnel route (which a browser authenticates with its session
 * cookie and its own Origin), sends keys to the remote as bytes and the window size as it follows
 * the element, and says the remote's end (its exit status, or why the tunnel closed) in its status.
 *
 * xterm.js is the caller's to load (`xterm`), so console-kit depends on no terminal library and a
 * page loads it only when a terminal opens; include `@xterm/xterm/css/xterm.css` in the page.
 */
import { Subscribable, type Readable } from './subscribable.js';

/** What the part needs of xterm.js's `Terminal` (`@xterm/xterm` 5 or 6). */
export interface XtermTerminal {
  readonly cols: number;
  readonly rows: number;
  loadAddon(addon: XtermFitAddon): void;
  open(element: HTMLElement): void;
  write(data: Uint8Array | string): void;
  focus(): void;
  onData(listener: (data: string) => void): { dispose(): void };
  onResize(listener: () => void): { dispose(): void };
  dispose(): void;
}

/** What the part needs of `@xterm/addon-fit`'s `FitAddon`. */
export interface XtermFitAddon {
  fit(): void;
  activate(terminal: never): void;
  dispose(): void;
}

/** The two classes, as `import('@xterm/xterm')` and `import('@xterm/addon-fit')` give them. */
export interface Xterm {
  Terminal: new (options: {
    cursorBlink?: boolean;
    fontSize?: number;
    lineHeight?: number;
    scrollback?: number;
  }) => XtermTerminal;
  FitAddon: new () => XtermFitAddon;
}

export type TerminalPhase = 'connecting' | 'connected' | 'ended' | 'failed';

export interface TerminalStatus {
  phase: TerminalPhase;
  /** What to tell the person, in words. */
  text: string;
  /** Why it could not connect (the ticket's refusal, a library that did not load), else null. */
  error: unknown;
}

export interface TerminalOptions {
  /** Asks the API for a single-use ticket: `() => client.tunnels.open({ nodeId, op: 'console' })`. */
  open(): Promise<{ ticket: string }>;
  /** Loads xterm.js: `async () => ({ ...(await import('@xterm/xterm')), ...(await import('@xterm/addon-fit')) })`. */
  xterm(): Promise<Xterm>;
  /** The tunnel's WebSocket address for a ticket; default this origin's `/api/compute/tunnels/{ticket}`. */
  tunnelUrl?: ((ticket: string) => string) | undefined;
}

export interface TerminalPart extends Readable<TerminalStatus> {
  /** Detaches: closes the WebSocket (the remote keeps running) and removes the terminal. */
  close(): void;
}

type Control =
  | { t: 'exit'; status: number | null; error?: { code: string; message: string } }
  | { t: 'error'; code: string; message: string };

export const TERMINAL_CONNECTED_TEXT = 'Connected. Closing this panel detaches; the remote keeps running.';

/** The default tunnel address: this page's origin, ws: or wss: as the page is. */
function originTunnelUrl(ticket: string): string {
  const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${window.location.host}/api/compute/tunnels/${encodeURIComponent(ticket)}`;
}

/** What a control message says of the remote's end. */
export function endText(control: Control): string {
  if (control.t === 'error') return `Ended: ${control.message}`;
  if (control.error) return `Ended: ${control.error.message}`;
  return `The remote program exited${control.status === null ? '' : ` with status ${control.status}`}.`;
}

class Terminal extends Subscribable<TerminalStatus> implements TerminalPart {
  #closed = false;
  #socket: WebSocket | undefined;
  #dispose = () => {};

  constructor(host: HTMLElement, options: TerminalOptions) {
    super({ phase: 'connecting', text: 'Connecting…', error: null });
    void this.#start(host, options);
  }

  #say(phase: TerminalPhase, text: string, error: unknown = null) {
    if (!this.#closed) this.set({ phase, text, error });
  }

  async #start(host: HTMLElement, options: TerminalOptions) {
    try {
      const [{ Terminal: Xterm, FitAddon }, { ticket }] = await Promise.all([
        options.xterm(),
        options.open(),
      ]);
      if (this.#closed) return;
      const terminal = new Xterm({ cursorBlink: true, fontSize: 14, lineHeight: 1.2, scrollback: 5000 });
      const fit = new FitAddon();
      terminal.loadAddon(fit);
      terminal.open(host);
      fit.fit();
      const socket = new WebSocket((options.tunnelUrl ?? originTunnelUrl)(ticket));
      socket.binaryType = 'arraybuffer';
      this.#socket = socket;
      const encoder = new TextEncoder();
      const sendSize = () => {
        if (socket.readyState === WebSocket.OPEN)
          socket.send(JSON.stringify({ t: 'resize', cols: terminal.cols, rows: terminal.rows }));
      };
      socket.onopen = () => {
        this.#say('connected', TERMINAL_CONNECTED_TEXT);
        sendSize();
        terminal.focus();
      };
      socket.onmessage = (message: MessageEvent) => {
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
        if (control.t === 'exit' || control.t === 'error') this.#say('ended', endText(control));
      };
      // A close after the remote said how it ended keeps those words.
      socket.onclose = () => {
        if (this.get().phase !== 'ended') this.#say('ended', 'The tunnel closed.');
      };
      const typed = terminal.onData((data) => {
        if (socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
      });
      const resized = terminal.onResize(sendSize);
      const observer = new ResizeObserver(() => fit.fit());
      observer.observe(host);
      this.#dispose = () => {
        observer.disconnect();
        typed.dispose();
        resized.dispose();
        terminal.dispose();
      };
    } catch (failure) {
      this.#say('failed', 'Not connected.', failure);
    }
  }

  close = (): void => {
    if (this.#closed) return;
    this.#closed = true;
    this.#socket?.close(1000);
    this.#dispose();
  };
}

/**
 * A terminal in `host` over a tunnel, until `close()`. Its status (`get()`, `subscribe`) says
 * connecting, connected, how the remote ended, or why it could not connect.
 *
 * @example
 * import '@xterm/xterm/css/xterm.css';
 * const terminal = mountTerminal(document.querySelector('#console')!, {
 *   open: () => client.tunnels.open({ nodeId: 'node_…', op: 'console' }),
 *   xterm: async () => ({ ...(await import('@xterm/xterm')), ...(await import('@xterm/addon-fit')) }),
 * });
 * terminal.subscribe(() => (statusLine.textContent = terminal.get().text));
 * // later: terminal.close();
 */
export function mountTerminal(host: HTMLElement, options: TerminalOptions): TerminalPart {
  return new Terminal(host, options);
}
