/**
 * The internal link between replicas: a replica that does not hold a node's session opens one
 * WebSocket per stream, with mutual TLS (both ends present gateway certificates from the machine
 * CA), to `{basePath}/gateway/link` on the replica that does. The first message names the node and
 * the target; then bytes go as binary frames and `ack`, `resize`, `close`, `opened` and `end` as
 * JSON, relayed as they are to and from the daemon's session, so flow control stays end to end.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, type WebSocketServer } from 'ws';
import { z } from 'zod';
import type { FlowStream, StreamSink, StreamTransport } from './flow-stream.js';
import { STREAM_DISCONNECT_BYTES } from '@better-compute/core';
import type { NodeStreamTarget } from './node-streams.js';
import { type GatewayTls, peerIdentity } from './tls.js';

export interface LinkOptions {
  tls: GatewayTls;
}

/** What the link needs of the gateway it serves on: opening a stream on a session it holds. */
export interface StreamOpener {
  openStream(nodeId: string, target: NodeStreamTarget, sink: StreamSink): StreamTransport | null;
}

const size = { cols: z.number().int().min(1).max(1000), rows: z.number().int().min(1).max(1000) };
const instanceId = z.string().regex(/^inst_[A-Za-z0-9]{1,64}$/);
/** A stream target, checked wherever one arrives from outside the process. */
export const nodeStreamTarget = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('node-console'), ...size }).strict(),
  z.object({ kind: z.literal('instance-console'), instanceId, ...size }).strict(),
  z
    .object({
      kind: z.literal('instance-exec'),
      instanceId,
      // Empty: the guest's login shell (what `exec` without a command asks for).
      argv: z.array(z.string().max(4096)).max(256),
      tty: z.boolean(),
      ...size,
    })
    .strict(),
  z
    .object({ kind: z.literal('instance-port'), instanceId, port: z.number().int().min(1).max(65535) })
    .strict(),
  z
    .object({ kind: z.literal('sandbox-ssh'), sandboxId: z.string().regex(/^sbx_[A-Za-z0-9]{1,64}$/) })
    .strict(),
]);

const openMessage = z
  .object({
    t: z.literal('open'),
    nodeId: z.string().regex(/^node_[A-Za-z0-9]{1,64}$/),
    target: nodeStreamTarget,
  })
  .strict();
const laterMessage = z.discriminatedUnion('t', [
  z
    .object({
      t: z.literal('ack'),
      bytes: z
        .number()
        .int()
        .min(1)
        .max(1 << 30),
    })
    .strict(),
  z.object({ t: z.literal('resize'), ...size }).strict(),
  z.object({ t: z.literal('close'), reason: z.string().max(200).nullable() }).strict(),
]);
const replyMessage = z.discriminatedUnion('t', [
  z.object({ t: z.literal('opened') }).strict(),
  z
    .object({
      t: z.literal('ack'),
      bytes: z
        .number()
        .int()
        .min(1)
        .max(1 << 30),
    })
    .strict(),
  z
    .object({
      t: z.literal('end'),
      exitStatus: z.number().int().min(0).max(255).nullable(),
      error: z
        .object({ code: z.string().max(64), message: z.string().max(1000) })
        .strict()
        .optional(),
    })
    .strict(),
]);

function parse<T>(schema: z.ZodType<T>, data: unknown): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(String(data)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The serving end: only a peer with a gateway certificate, and only with TLS configured. */
export function handleLinkUpgrade(
  wss: WebSocketServer,
  request: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  gateway: StreamOpener,
  options: { log: (line: string) => void; tls: LinkOptions | undefined },
): void {
  const peer = peerIdentity(request);
  if (!options.tls || peer.kind !== 'gateway') {
    socket.end('HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    return;
  }
  wss.handleUpgrade(request, socket, head, (ws) => {
    ws.on('error', () => ws.terminate());
    let transport: StreamTransport | null = null;
    let ended = false;
    const reply = (message: Record<string, unknown>) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
    };
    const finish = (message: Record<string, unknown>) => {
      if (ended) return;
      ended = true;
      reply(message);
      ws.close(1000);
    };
    ws.on('close', () => {
      if (!ended) transport?.close('the link closed');
      ended = true;
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return void transport?.send(data as Buffer);
      if (!transport) {
        const open = parse(openMessage, data);
        if (!open)
          return finish({
            t: 'end',
            exitStatus: null,
            error: { code: 'INVALID_ARGUMENT', message: 'the link opened with no node and target' },
          });
        transport = gateway.openStream(open.nodeId, open.target as NodeStreamTarget, {
          opened: () => reply({ t: 'opened' }),
          data: (chunk) => {
            if (ws.readyState !== WebSocket.OPEN) return;
            // The far replica reads what it acknowledges; a link this far behind has stopped.
            if (ws.bufferedAmount > STREAM_DISCONNECT_BYTES) {
              transport?.close('the link fell behind');
              return finish({
                t: 'end',
                exitStatus: null,
                error: { code: 'SLOW_READER', message: 'the link fell 16 MiB behind' },
              });
            }
            ws.send(chunk, { binary: true });
          },
          acked: (bytes) => reply({ t: 'ack', bytes }),
          ended: (end) => finish({ t: 'end', ...end }),
        });
        if (!transport)
          finish({
            t: 'end',
            exitStatus: null,
            error: { code: 'UNAVAILABLE', message: "this gateway does not hold the node's session" },
          });
        return;
      }
      const message = parse(laterMessage, data);
      if (!message) return;
      if (message.t === 'ack') transport.ack(message.bytes);
      else if (message.t === 'resize') transport.resize(message.cols, message.rows);
      else transport.close(message.reason ?? undefined);
    });
  });
  void options.log;
}

/** The calling end: opens the link to `url` (the holding replica) and attaches it to `stream`. */
export function openLink(
  url: string,
  basePath: string,
  tls: GatewayTls,
  nodeId: string,
  target: NodeStreamTarget,
  stream: FlowStream,
): void {
  const address = new URL(url);
  address.protocol = address.protocol === 'https:' ? 'wss:' : 'ws:';
  address.pathname = `${address.pathname.replace(/\/+$/, '')}${basePath}/gateway/link`;
  const ws = new WebSocket(address, {
    cert: tls.certificatePem,
    key: tls.privateKeyPem,
    ca: tls.caPems,
    maxPayload: 1 << 20,
    handshakeTimeout: 10_000,
  });
  const send = (message: Record<string, unknown>) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
  };
  stream.attach({
    send: (chunk) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(chunk, { binary: true });
    },
    ack: (bytes) => send({ t: 'ack', bytes }),
    resize: (cols, rows) => send({ t: 'resize', cols, rows }),
    close: (reason) => {
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else send({ t: 'close', reason: reason?.slice(0, 200) ?? null });
    },
  });
  ws.on('open', () => send({ t: 'open', nodeId, target }));
  ws.on('error', () => {});
  ws.on('message', (data, isBinary) => {
    if (isBinary) return stream.data(Buffer.from(data as Buffer));
    const message = parse(replyMessage, data);
    if (!message) return;
    if (message.t === 'opened') stream.opened();
    else if (message.t === 'ack') stream.acked(message.bytes);
    else stream.ended({ exitStatus: message.exitStatus, ...(message.error ? { error: message.error } : {}) });
  });
  ws.on('close', () =>
    stream.ended({
      exitStatus: null,
      error: { code: 'UNAVAILABLE', message: "the link to the node's gateway closed" },
    }),
  );
}
