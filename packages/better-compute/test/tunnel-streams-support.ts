/**
 * Node streams for the tunnel suites until the gateway's own reach this branch: each stream runs a
 * real program on this machine (`sh -c SCRIPT`, stdin and stdout piped) where the daemon would
 * attach a pty, with the contract's flow control mapped onto the pipes. It stands in for the
 * gateway and the daemon only; the route, the relay, the WebSocket and the CLI under test are the
 * real ones. Each open is recorded with its target and the resizes it received.
 */
import { spawn } from 'node:child_process';
import { ComputeError } from '@better-compute/core';
import type {
  NodeStream,
  NodeStreamEnd,
  NodeStreams,
  NodeStreamTarget,
} from '../src/gateway/node-streams.js';

export interface OpenedStream {
  nodeId: string;
  target: NodeStreamTarget;
  resizes: [number, number][];
  /** How often the route paused the program's output (its client fell behind). */
  pauses: number;
  closedBy: string | null;
}

export function programStreams(script: () => string): NodeStreams & { opened: OpenedStream[] } {
  const opened: OpenedStream[] = [];
  return {
    opened,
    async open(nodeId, target) {
      if (target.kind !== 'node-console')
        throw new ComputeError('UNSUPPORTED', `${target.kind} is not served here`, {
          details: { reason: 'daemon-capability' },
        });
      const record: OpenedStream = { nodeId, target, resizes: [], pauses: 0, closedBy: null };
      opened.push(record);
      const child = spawn('/bin/sh', ['-c', script()], { stdio: ['pipe', 'pipe', 'pipe'] });
      const endListeners: ((end: NodeStreamEnd) => void)[] = [];
      let ended: NodeStreamEnd | null = null;
      child.on('close', (code, signal) => {
        ended = { exitStatus: code ?? (signal ? 128 + 15 : null) };
        for (const listener of endListeners) listener(ended);
      });
      child.stdin!.on('error', () => undefined);
      const stream: NodeStream = {
        id: `stream-${opened.length}`,
        write: (chunk) => child.stdin!.write(chunk),
        onDrain: (listener) => void child.stdin!.on('drain', listener),
        onData(listener) {
          child.stdout!.on('data', (chunk: Buffer) => listener(new Uint8Array(chunk)));
          child.stderr!.on('data', (chunk: Buffer) => listener(new Uint8Array(chunk)));
        },
        pause() {
          record.pauses += 1;
          child.stdout!.pause();
        },
        resume: () => void child.stdout!.resume(),
        resize: (cols, rows) => void record.resizes.push([cols, rows]),
        onEnd(listener) {
          if (ended) listener(ended);
          else endListeners.push(listener);
        },
        close(reason) {
          record.closedBy = reason ?? 'closed';
          child.kill('SIGTERM');
        },
      };
      return stream;
    },
  };
}
