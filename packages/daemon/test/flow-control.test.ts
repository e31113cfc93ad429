/**
 * The flow-control accounting on both ends, driven byte by byte: the caller's stream (a paused
 * reader is disconnected at 16 MiB behind, its backlog dropped; writes stop at 4 MiB unacknowledged
 * and drain under 1 MiB) and the daemon's send window (pauses its target, resumes it, and gives
 * up on a reader past the bound), and the daemon's acknowledgements of what a target took, never of
 * what it still holds. The end-to-end behaviour with a real pty is in node-streams.test.ts.
 */
import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { FlowStream } from '../../better-compute/src/gateway/flow-stream.js';
import { STREAM_DISCONNECT_BYTES } from '@better-compute/core';
import * as daemonFlow from '../src/streams/flow.js';
import { attachDuplex } from '../src/streams/instance-targets.js';
import { createStreamMux } from '../src/streams/mux.js';
import { registerStreamTarget } from '../src/streams/registry.js';

const MiB = 1024 * 1024;

function recordingStream() {
  const sent: number[] = [];
  const acks: number[] = [];
  const closes: (string | undefined)[] = [];
  const stream = new FlowStream('stm_test');
  stream.attach({
    send: (chunk) => sent.push(chunk.byteLength),
    ack: (bytes) => acks.push(bytes),
    resize: () => {},
    close: (reason) => closes.push(reason),
  });
  stream.opened();
  return { stream, sent, acks, closes };
}

describe('flow control', () => {
  it('a paused reader is not acknowledged for, and is disconnected 16 MiB behind with its backlog dropped', async () => {
    const { stream, acks, closes } = recordingStream();
    let read = 0;
    stream.onData((chunk) => (read += chunk.byteLength));
    stream.pause();
    const ended = new Promise<any>((resolve) => stream.onEnd(resolve));
    for (let i = 0; i < 16; i++) stream.data(Buffer.alloc(MiB));
    expect(stream.backlog.queued).toBe(16 * MiB);
    stream.data(Buffer.alloc(1));
    expect(await ended).toMatchObject({ exitStatus: null, error: { code: 'SLOW_READER' } });
    expect(stream.backlog.queued).toBe(0);
    expect(closes).toEqual(['slow reader']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(read).toBe(0);
    expect(acks).toEqual([]);
  });

  it('a reading reader is acknowledged for what it read, once per turn', async () => {
    const { stream, acks } = recordingStream();
    let read = 0;
    stream.onData((chunk) => (read += chunk.byteLength));
    stream.data(Buffer.alloc(1000));
    stream.data(Buffer.alloc(24));
    await new Promise((resolve) => setImmediate(resolve));
    expect(read).toBe(1024);
    expect(acks).toEqual([1024]);
  });

  it('writes stop above the high-water mark and drain under the low-water mark, in frames of 64 KiB', () => {
    const { stream, sent } = recordingStream();
    let drained = 0;
    stream.onDrain(() => (drained += 1));
    expect(stream.write(Buffer.alloc(4 * MiB))).toBe(true);
    expect(stream.write(Buffer.alloc(1))).toBe(false);
    expect(Math.max(...sent)).toBe(64 * 1024);
    stream.acked(3 * MiB);
    expect(drained).toBe(0);
    stream.acked(MiB - 1);
    expect(drained).toBe(1);
  });

  it('the daemon pauses its target above 4 MiB, resumes it under 1 MiB, and calls a reader 16 MiB behind overrun', () => {
    const events: string[] = [];
    const window = new daemonFlow.SendWindow(
      () => events.push('pause'),
      () => events.push('resume'),
    );
    expect(window.sent(4 * MiB)).toBe(true);
    expect(window.sent(1)).toBe(false);
    window.acked(2 * MiB);
    expect(events).toEqual(['pause']);
    window.acked(2 * MiB);
    expect(events).toEqual(['pause', 'resume']);
    window.acked(10 * MiB);
    expect(window.outstanding).toBe(0);
    window.sent(STREAM_DISCONNECT_BYTES + 1);
    expect(window.overrun()).toBe(true);
  });

  it('bytes for a target still connecting are held unacknowledged, past 1 MiB, and acknowledged once it takes them', async () => {
    let open!: (duplex: Duplex) => void;
    const opening = new Promise<Duplex>((resolve) => (open = resolve));
    registerStreamTarget('test-late-port', (_request, output) =>
      attachDuplex(opening, output, 'a late port'),
    );
    const messages: Record<string, unknown>[] = [];
    const mux = createStreamMux({ sendJson: (m) => messages.push(m), sendBinary: () => {}, log: () => {} });
    mux.onMessage({ t: 'stream.open', sid: 1, target: { kind: 'test-late-port' } });
    // An upload of 6 MiB arrives while the guest's port is still being dialled.
    for (let i = 0; i < 96; i++) mux.onBinary(daemonFlow.dataFrame(1, Buffer.alloc(64 * 1024, i)));
    await new Promise((resolve) => setImmediate(resolve));
    const acked = () =>
      messages.filter((m) => m.t === 'stream.ack').reduce((sum, m) => sum + (m.bytes as number), 0);
    expect(messages.filter((m) => m.t === 'stream.end')).toEqual([]);
    expect(acked()).toBe(0);
    let received = 0;
    // A port that reads what it is sent and answers nothing, taking its time.
    const target = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, done) {
        received += chunk.byteLength;
        setImmediate(done);
      },
    });
    open(target);
    for (let i = 0; i < 200 && acked() < 6 * MiB; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(acked()).toBe(6 * MiB);
    expect(received).toBe(6 * MiB);
    mux.closeAll();
  });
});
