/**
 * An event stream's bytes written straight to its connection by a host that holds one (the Node
 * adapter), instead of through the web `ReadableStream` the handler answers with: per watcher and
 * per event, the web stream costs an enqueue, a read's promise and a turn of its reader's loop,
 * which a thousand watchers of one tenant pay a thousand times for every event
 * (docs/live-events.md). A host that cannot take it over (a web-standard server) reads the body as
 * any other.
 */

/** Where a taken-over stream writes. */
export interface DirectSink {
  write(chunk: Uint8Array): void;
  /** Bytes written and not yet sent to the client. */
  readonly backlog: number;
  /** Ends the response (the stream closed). */
  end(): void;
}

/** What a host may do with an offered body. */
export interface DirectStream {
  /** Takes the stream over: what it held goes to `sink` now, and everything after it too. */
  attach(sink: DirectSink): void;
  /** The client left. */
  cancel(): void;
}

const offered = new WeakMap<ReadableStream<Uint8Array>, DirectStream>();

/** Lets a host take `body` over (the body stays a working web stream for any other host). */
export function offerDirect(body: ReadableStream<Uint8Array>, direct: DirectStream): void {
  offered.set(body, direct);
}

/** The takeover a body offers, if any. */
export function directOf(body: ReadableStream<Uint8Array> | null): DirectStream | undefined {
  return body ? offered.get(body) : undefined;
}
