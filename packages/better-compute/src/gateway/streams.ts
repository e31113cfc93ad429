/**
 * `createNodeStreams`: the `NodeStreams` of this process, built once per process (serve builds it
 * beside its gateway; a host that embeds compute can build its own). A stream opens on the local
 * session when this process holds the node, and otherwise over the internal mTLS link to the live
 * replica recorded as holding it (`compute.node_sessions.gateway_id`).
 */
import { randomUUID } from 'node:crypto';
import { ComputeError } from '@better-compute/core';
import type { ComputeInstance } from '../types.js';
import { FlowStream } from './flow-stream.js';
import { nodeStreamTarget, openLink } from './link.js';
import {
  type NodeStream,
  type NodeStreams,
  type NodeStreamTarget,
  TARGET_CAPABILITY,
} from './node-streams.js';
import { sessionLocation } from './replicas.js';
import type { Gateway } from './session-server.js';
import type { GatewayTls } from './tls.js';

/** How long the daemon has to attach a target before the open fails. */
const OPEN_TIMEOUT_MS = 15_000;

export interface NodeStreamsOptions {
  compute: Pick<ComputeInstance, 'database' | 'config'>;
  /** This process's gateway, when it runs the gateway role. */
  gateway?: Gateway | undefined;
  /** This replica's gateway certificate, for the link to other replicas; without it only local sessions. */
  tls?: GatewayTls | undefined;
  now?: () => Date;
}

const unavailable = (nodeId: string, why: string, hint: string) =>
  new ComputeError('UNAVAILABLE', `node ${nodeId} cannot be reached: ${why}`, {
    hint,
    details: { nodeId },
  });

function checkCapability(nodeId: string, target: NodeStreamTarget, capabilities: string[]) {
  const needed = TARGET_CAPABILITY[target.kind];
  if (!capabilities.includes(needed))
    throw new ComputeError(
      'UNSUPPORTED',
      `the daemon of node ${nodeId} cannot serve ${target.kind} streams`,
      {
        hint: `The node's daemon does not report the ${needed} capability; upgrade it or use another node.`,
        details: { reason: 'daemon-capability', nodeId, capability: needed, target: target.kind },
      },
    );
}

export function createNodeStreams(options: NodeStreamsOptions): NodeStreams {
  const now = options.now ?? (() => new Date());
  const db = options.compute.database.db as never;
  const basePath = options.compute.config.basePath;

  return {
    async open(nodeId, target, openOptions = {}): Promise<NodeStream> {
      const checked = nodeStreamTarget.safeParse(target);
      if (!checked.success || !/^node_[A-Za-z0-9]{1,64}$/.test(nodeId))
        throw new ComputeError('INVALID_ARGUMENT', 'the node id or the stream target is malformed', {
          hint: 'Pass a node id (node_…) and one of the targets node-streams.ts describes.',
          details: { nodeId: nodeId.slice(0, 80) },
        });
      openOptions.signal?.throwIfAborted();
      const stream = new FlowStream(`stm_${randomUUID().replaceAll('-', '')}`);
      const local = options.gateway?.capabilities(nodeId);
      if (local) {
        checkCapability(nodeId, target, local);
        const transport = options.gateway!.openStream(nodeId, target, stream);
        if (!transport)
          throw unavailable(nodeId, 'its session has too many streams open', 'Close a stream and try again.');
        stream.attach(transport);
      } else {
        const location = await sessionLocation(db, nodeId, now());
        const down = 'Check that its daemon runs (bcd status on the node) and reaches a gateway.';
        if (!location || location.gatewayId === options.gateway?.id)
          throw unavailable(nodeId, 'it has no session on any gateway', down);
        if (!location.url) throw unavailable(nodeId, 'the gateway that held its session is gone', down);
        checkCapability(nodeId, target, location.capabilities);
        if (!options.tls)
          throw unavailable(
            nodeId,
            'its session is on another gateway replica and this replica has no gateway certificate to link with',
            'Serve every replica with --tls-cert and --tls-key (better-compute pki issue-gateway).',
          );
        openLink(location.url, basePath, options.tls, nodeId, target, stream);
      }
      const timer = setTimeout(
        () =>
          stream.ended({
            exitStatus: null,
            error: { code: 'UNAVAILABLE', message: 'the daemon did not answer' },
          }),
        OPEN_TIMEOUT_MS,
      );
      const abort = () => stream.close('aborted');
      openOptions.signal?.addEventListener('abort', abort, { once: true });
      try {
        await stream.ready;
        return stream;
      } catch {
        const end = await new Promise<Parameters<Parameters<NodeStream['onEnd']>[0]>[0]>((resolve) =>
          stream.onEnd(resolve),
        );
        const code = end.error?.code ?? 'UNAVAILABLE';
        const message = end.error?.message ?? 'the stream ended before it opened';
        if (openOptions.signal?.aborted)
          throw new ComputeError('UNAVAILABLE', `opening a stream to ${nodeId} was aborted`);
        if (code === 'UNSUPPORTED')
          throw new ComputeError(
            'UNSUPPORTED',
            `node ${nodeId} refused the ${target.kind} stream: ${message}`,
            {
              hint: 'The daemon has no such target yet; a runtime registers it.',
              details: { reason: 'daemon-target', nodeId, target: target.kind },
            },
          );
        if (code === 'UNAVAILABLE')
          throw unavailable(nodeId, message, 'Check that its daemon runs and reaches a gateway.');
        throw new ComputeError(
          'UNAVAILABLE',
          `node ${nodeId} could not open the ${target.kind} stream: ${message}`,
          {
            details: { nodeId, code },
          },
        );
      } finally {
        clearTimeout(timer);
        openOptions.signal?.removeEventListener('abort', abort);
      }
    },
  };
}
