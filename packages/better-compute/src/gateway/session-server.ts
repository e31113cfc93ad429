/**
 * The gateway role: holds one WebSocket session per connected node daemon, on the API's own HTTP
 * server at `{basePath}/gateway/session`. The daemon authenticates with its node credential
 * (`Authorization: Bearer node_….SECRET`), proven by the fleet's own heartbeat route; it then
 * sends `hello` (version, capabilities, inventory) and heartbeats over the session. The gateway
 * delivers the node's commands in order, each signed by the command root, and records what the
 * daemon reports. Commands live in the database until they finish, so a dropped session or a
 * restarted gateway loses nothing: the next session gets what is still open. A member of a
 * destructive batch travels with its batch's approvals and leaf proof (`quorum`), and `welcome`
 * carries the deployment's approver chain, so the daemon runs it only if the approver set it pinned
 * approved it (docs/quorum.md).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { ComputeInstance } from '../types.js';
import { listenOn } from '@better-compute/db';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import {
  advanceCommand,
  COMMANDS_CHANNEL,
  type CommandRow,
  expireCommand,
  failUnsent,
  markSent,
  openCommands,
  recordNodeSession,
} from '../modules/commands/index.js';
import { createApproverLoader, quorumAttachments } from '../modules/batches/index.js';
import { nodeTenant } from '../modules/fleet/index.js';
import { instanceExited } from '../modules/vps/index.js';
import { releasePinStatements } from '../modules/releases/index.js';
import { wakeNodeWorkflows } from '../modules/workflows/index.js';
import { type CommandSigner, envelopeBytes } from './signer.js';
import { createCommandSecrets } from './command-secrets.js';
import { createSiteReportIntake } from './site-reports.js';
import { createReleasePieces } from './release-pieces.js';
import { pushBootEntriesTo, PXE_CAPABILITY } from '../modules/metal/index.js';
import { type DaemonMessage, parseDaemonMessage } from './protocol.js';
import type { StreamSink, StreamTransport } from './flow-stream.js';
import type { NodeStreamTarget } from './node-streams.js';
import { answerCertificateRequest, type GatewayPki } from './node-certificates.js';
import { liveReplicaUrls, removeReplica, REPLICA_STAMP_MS, stampReplica } from './replicas.js';
import { createSessionStreams, type SessionStreams } from './session-streams.js';
import { peerIdentity } from './tls.js';
import { handleLinkUpgrade, type LinkOptions } from './link.js';

/** How often the gateway looks for new commands and cancellations when nothing woke it. */
const POLL_MS = 200;
const MAX_FRAME_BYTES = 1 << 20;

export interface GatewayOptions {
  compute: ComputeInstance;
  /** Signs commands; without one, sessions and heartbeats work and commands wait queued. */
  commandSigner?: CommandSigner | undefined;
  log: (line: string) => void;
  now?: () => Date;
  /** The machine CA that issues node certificates over the session; without it, none are issued. */
  pki?: GatewayPki | undefined;
  /** This replica's address for daemons and other replicas; recorded and sent to daemons at welcome. */
  url?: string | undefined;
  /** The internal link's TLS (this replica's gateway certificate); without it the link is refused. */
  link?: LinkOptions | undefined;
  /**
   * The client's address of an upgrade (the host's rule for trusted proxies). A session's first
   * heartbeat carries it, so credentials refused there are limited per address like the fleet's
   * public routes (docs/rate-limits.md); the session's later heartbeats are proven already.
   */
  clientAddress?: ((request: IncomingMessage) => string | null) | undefined;
}

export interface Gateway {
  readonly id: string;
  /** Node ids with a session on this gateway. */
  sessions(): string[];
  /** Wakes a node's session to look for commands now (in-process callers after queueing one). */
  wake(nodeId: string): void;
  /** Opens a stream on a node's session held here; null when this replica does not hold it. */
  openStream(nodeId: string, target: NodeStreamTarget, sink: StreamSink): StreamTransport | null;
  /** The capabilities a held node's daemon said in its hello; null when not held here. */
  capabilities(nodeId: string): string[] | null;
  close(): Promise<void>;
}

interface Session {
  nodeId: string;
  tenantId: string;
  socket: WebSocket;
  credential: string;
  /** Commands sent on this session (each is sent once per session; the daemon dedups across sessions). */
  sent: Set<string>;
  cancelsSent: Set<string>;
  inbox: Promise<void>;
  capabilities: string[] | null;
  /** Sent its welcome: only then may commands go, which the daemon checks against the root it pins from it. */
  welcomed: boolean;
  streams: SessionStreams;
}

export function attachGateway(server: Server, options: GatewayOptions): Gateway {
  const { compute, log } = options;
  const now = options.now ?? (() => new Date());
  const db = compute.database.db as never as Kysely<ComputeTables>;
  const id = `gw_${randomUUID()}`;
  const path = `${compute.config.basePath}/gateway/session`;
  const linkPath = `${compute.config.basePath}/gateway/link`;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  const sessions = new Map<string, Session>();
  const secrets = createCommandSecrets(compute.config.secret);
  const takeSiteReport = createSiteReportIntake(db, log);
  const servePiece = createReleasePieces(db, log);
  let closing = false;
  // The approver chain daemons follow, read from the deployment's bundle as the batches module does.
  const approvers = createApproverLoader({ pki: compute.config.pki });
  async function approverSets(): Promise<unknown[]> {
    try {
      return [...((await approvers.current())?.chain ?? [])];
    } catch (error) {
      log(`gateway: the approver chain is not usable, so none is sent: ${(error as Error).message}`);
      return [];
    }
  }

  /** The deployment's release pins as a daemon pins them (`{ pins, threshold }`), or null without any. */
  function releasePins(): { pins: string[]; threshold: number } | null {
    const release = compute.config.release;
    if (!release?.pins?.length) return null;
    return { pins: [...release.pins], threshold: release.threshold ?? release.pins.length };
  }

  /** The release-pin statements the deployment accepted, for a welcome; none when it pins no keys. */
  async function pinStatements(): Promise<unknown[]> {
    if (!releasePins()) return [];
    try {
      return await releasePinStatements(db as never);
    } catch (error) {
      log(
        `gateway: the release-pin statements could not be read, so none is sent: ${(error as Error).message}`,
      );
      return [];
    }
  }

  /** The fleet's heartbeat route, in process: it proves the credential and records the node alive. */
  async function heartbeat(credential: string, inventory?: unknown, clientAddress?: string | null) {
    const body = JSON.stringify(
      inventory === undefined ? { nodeCredential: credential } : { nodeCredential: credential, inventory },
    );
    const answer = await compute.dispatch({
      method: 'POST',
      pathname: `${compute.config.basePath}/nodes/heartbeat`,
      origin: 'http://gateway.internal',
      header: (name) => (name === 'content-type' ? 'application/json' : null),
      readBody: async () => body,
      clientAddress,
    });
    const parsed = JSON.parse(answer?.body ?? '{}') as {
      data?: { nodeId: string; state: string; heartbeatIntervalSeconds: number };
      error?: { code: string; message: string };
    };
    return parsed;
  }

  function send(session: Session, message: Record<string, unknown>) {
    if (session.socket.readyState === WebSocket.OPEN) session.socket.send(JSON.stringify(message));
  }

  function sign(row: CommandRow) {
    const envelope = {
      id: row.id,
      nodeId: row.node_id,
      kind: row.kind,
      payload: row.payload,
      issuedAt: new Date(row.created_at).toISOString(),
      expiresAt: new Date(row.expires_at).toISOString(),
    };
    const signature = Buffer.from(options.commandSigner!.sign(envelopeBytes(envelope))).toString('base64');
    return { command: envelope, signature };
  }

  /**
   * One delivery pass for every session this gateway holds: one query reads the open commands of
   * all its nodes in order, each session is sent what it has not been sent, what waited too long
   * expires, and the sent ones are marked in one update. One pass at a time; a wake during a pass
   * runs another right after.
   */
  let passing = false;
  let passAgain = false;
  async function deliver(): Promise<void> {
    if (passing) {
      passAgain = true;
      return;
    }
    passing = true;
    try {
      do {
        passAgain = false;
        const welcomed = [...sessions.values()].filter((s) => s.welcomed).map((s) => s.nodeId);
        if (welcomed.length === 0 || !options.commandSigner) break;
        const rows = await openCommands(db, welcomed);
        const sent: string[] = [];
        const at = now();
        // A batch's members carry its approvals and their leaf proofs; other rows go as they are.
        const quorums = await quorumAttachments(
          db,
          rows.filter((row) => row.batch_id !== null && !sessions.get(row.node_id)?.sent.has(row.id)),
        );
        for (const row of rows) {
          const session = sessions.get(row.node_id);
          if (!session) continue;
          if (row.state === 'queued' && new Date(row.expires_at).getTime() <= at.getTime()) {
            await expireCommand(db, row.node_id, row.id, at);
            continue;
          }
          if (row.cancel_requested && row.state !== 'queued') {
            if (!session.cancelsSent.has(row.id)) {
              session.cancelsSent.add(row.id);
              send(session, { t: 'command.cancel', id: row.id });
            }
            continue;
          }
          if (session.sent.has(row.id)) continue;
          session.sent.add(row.id);
          const quorum = quorums.get(row.id);
          // A sandbox's start gets its secrets' values here, in the signed message only.
          let signed = row;
          if (secrets.needs(row)) {
            const resolved = await secrets.resolve(db, row);
            if ('error' in resolved) {
              await failUnsent(db, row.node_id, row.id, at, `not sent: ${resolved.error}`);
              continue;
            }
            signed = { ...row, payload: resolved.payload };
          }
          send(session, { t: 'command', ...sign(signed), ...(quorum ? { quorum } : {}) });
          if (row.state === 'queued') sent.push(row.id);
        }
        // Cancelled between the read and the send: the daemon holds it, and must drop it.
        const ended = await markSent(db, sent, at);
        const byId = new Map(rows.map((row) => [row.id, row]));
        for (const id of ended) {
          const session = sessions.get(byId.get(id)!.node_id);
          if (session && !session.cancelsSent.has(id)) {
            session.cancelsSent.add(id);
            send(session, { t: 'command.cancel', id });
          }
        }
      } while (passAgain);
    } catch (error) {
      log(`gateway: delivering commands failed: ${(error as Error).message}`);
    } finally {
      passing = false;
    }
  }
  const ticker = setInterval(() => void deliver(), POLL_MS);
  ticker.unref();
  // A command queued anywhere wakes the gateway holding its node at once; the ticker stays for
  // expiries and for a listener that is reconnecting.
  const listening = listenOn(options.compute.database, [COMMANDS_CHANNEL], {
    notification: (_channel, nodeId) => {
      if (sessions.has(nodeId)) void deliver();
    },
  }).catch((error: Error) => {
    log(`gateway: listening for queued commands failed, polling only: ${error.message}`);
    return null;
  });

  /** This replica's row in gateway_replicas, stamped while it runs, so others and daemons find it. */
  const stamp = () =>
    options.url
      ? stampReplica(db as never, id, options.url, now()).catch((error) =>
          log(`gateway: recording this replica failed: ${(error as Error).message}`),
        )
      : Promise.resolve();
  void stamp();
  const stamper = setInterval(() => void stamp(), REPLICA_STAMP_MS);
  stamper.unref();

  async function onMessage(session: Session, message: DaemonMessage) {
    const at = now();
    switch (message.t) {
      case 'hello':
      case 'heartbeat': {
        const beat = await heartbeat(session.credential, message.inventory);
        if (beat.error) {
          send(session, { t: 'error', code: beat.error.code, message: beat.error.message });
          if (beat.error.code === 'UNAUTHENTICATED') session.socket.close(4401, 'node credential revoked');
          else if (!session.welcomed) session.socket.close(1013, 'the hello failed; connect again');
          return;
        }
        if (message.t === 'hello') session.capabilities = message.capabilities;
        await recordNodeSession(db, {
          nodeId: session.nodeId,
          tenantId: session.tenantId,
          gatewayId: id,
          at,
          ...(message.t === 'hello'
            ? { hello: { version: message.version, capabilities: message.capabilities } }
            : {}),
          hardware: message.hardware,
        });
        send(session, {
          t: message.t === 'hello' ? 'welcome' : 'heartbeat.ack',
          nodeId: session.nodeId,
          state: beat.data!.state,
          heartbeatIntervalSeconds: beat.data!.heartbeatIntervalSeconds,
          ...(message.t === 'hello'
            ? {
                commandRoot: options.commandSigner?.publicKeyPem ?? null,
                commandRootRotations: options.commandSigner?.rotations ?? [],
                trustDomain: options.commandSigner?.trustDomain ?? null,
                approverSets: await approverSets(),
                // The release keys a daemon pins at its first session when its join named none.
                releasePins: releasePins(),
                // Their signed changes since: a daemon moves its pins only along these.
                releasePinStatements: await pinStatements(),
                gateways: await liveReplicaUrls(db as never, at).catch(() => []),
                certificates: options.pki ? true : false,
              }
            : {}),
        });
        if (message.t === 'hello') {
          session.welcomed = true;
          // A site agent's provisioning network keeps its boot entries in memory: resent at each hello.
          if (message.capabilities.includes(PXE_CAPABILITY))
            await pushBootEntriesTo(db, session.nodeId, at).catch((error: Error) =>
              log(`gateway: queueing ${session.nodeId}'s boot entries failed: ${error.message}`),
            );
          void deliver();
          // A workflow waiting for this daemon to come back (after an update) goes on now.
          await wakeNodeWorkflows(db, session.nodeId, at);
        }
        return;
      }
      case 'command.started':
        await advanceCommand(db, session.nodeId, message.id, { state: 'running', at });
        return;
      case 'command.result': {
        await advanceCommand(db, session.nodeId, message.id, {
          state: message.state,
          at,
          exitCode: message.exitCode,
          stdout: message.stdout,
          stderr: message.stderr,
          result: message.result,
          error: message.error,
        });
        // Acknowledged whether or not it changed the row: a repeated report finds it final already.
        send(session, { t: 'command.ack', id: message.id });
        return;
      }
      case 'instance.exited': {
        const { outcome } = await instanceExited(compute.database.db as never, session.nodeId, message, at);
        // Acknowledged unless the instance's boot is still being recorded: the node's record goes.
        if (outcome !== 'later') send(session, { t: 'instance.exited.ack', instanceId: message.instanceId });
        return;
      }
      case 'pxe.discovered':
      case 'metal.report': {
        const refusal = await takeSiteReport(session.nodeId, message, at);
        if (refusal) send(session, refusal);
        return;
      }
      case 'release.fetch':
        send(session, await servePiece(session.nodeId, message));
        return;
      case 'stream.opened':
      case 'stream.ack':
      case 'stream.end':
        return; // handled as they arrive
      case 'certificate.request': {
        if (!options.pki) {
          send(session, {
            t: 'certificate.refused',
            message: 'this gateway has no PKI bundle to issue from',
          });
          return;
        }
        try {
          send(session, await answerCertificateRequest(options.pki, session.nodeId, message, at));
        } catch (error) {
          log(`gateway: issuing a certificate to ${session.nodeId} failed: ${(error as Error).message}`);
          send(session, { t: 'certificate.refused', message: 'the gateway could not issue a certificate' });
        }
        return;
      }
    }
  }

  async function open(
    socket: WebSocket,
    credential: string,
    certifiedNode: string | null,
    clientAddress: string | null,
  ) {
    const beat = await heartbeat(credential, undefined, clientAddress);
    if (beat.error?.code === 'RATE_LIMITED') {
      socket.close(4429, 'too many attempts from this address; retry later');
      return;
    }
    if (beat.error || !beat.data) {
      socket.close(4401, 'the node credential is unknown or revoked');
      return;
    }
    const nodeId = beat.data.nodeId;
    const tenantId = await nodeTenant(db, nodeId);
    if (certifiedNode && certifiedNode !== nodeId) {
      socket.close(4403, 'the node certificate names another node');
      return;
    }
    sessions.get(nodeId)?.socket.close(4409, 'replaced by a newer session of this node');
    const session: Session = {
      nodeId,
      tenantId,
      socket,
      credential,
      sent: new Set(),
      cancelsSent: new Set(),
      inbox: Promise.resolve(),
      capabilities: null,
      welcomed: false,
      streams: createSessionStreams({
        sendJson: (message) => send(session, message),
        sendBinary: (frame) => {
          if (socket.readyState === WebSocket.OPEN) socket.send(frame, { binary: true });
        },
      }),
    };
    sessions.set(nodeId, session);
    log(
      `gateway: ${nodeId} connected, authenticated by its ${certifiedNode ? 'node certificate' : 'node credential'}`,
    );
    socket.on('close', () => {
      if (sessions.get(nodeId) === session) sessions.delete(nodeId);
      session.streams.closeAll('UNAVAILABLE', "the node's session to its gateway ended");
    });
    socket.on('message', (data, isBinary) => {
      if (isBinary) {
        session.streams.onBinary(data as Buffer);
        return;
      }
      const message = parseDaemonMessage(data.toString());
      // Stream traffic does not wait behind the session's database work.
      if (message?.t === 'stream.opened' || message?.t === 'stream.ack' || message?.t === 'stream.end') {
        session.streams.onMessage(message);
        return;
      }
      if (!message) {
        send(session, {
          t: 'error',
          code: 'INVALID_ARGUMENT',
          message: 'the message is not one the gateway knows',
        });
        return;
      }
      // One message at a time, in the order the daemon sent them: a result is stored before the
      // next command's start, so timings and states never cross.
      session.inbox = session.inbox
        .then(() => onMessage(session, message))
        .catch((error) => {
          log(`gateway: a message from ${nodeId} failed: ${(error as Error).message}`);
          // A session its hello did not welcome gets no command: closed, the daemon says hello again.
          if (!session.welcomed) session.socket.close(1011, 'the hello failed; connect again');
        });
    });
    send(session, { t: 'ready' });
  }

  function refuse(socket: Duplex, status: number, reason: string) {
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  }

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const pathname = (request.url ?? '/').split('?')[0];
    // Tunnels upgrade on the same server (src/tunnels/route.ts answers them).
    if (pathname?.startsWith(`${compute.config.basePath}/tunnels/`)) return;
    if (pathname === linkPath) {
      if (closing) return refuse(socket, 503, 'Service Unavailable');
      return handleLinkUpgrade(wss, request, socket, head, gateway, { log, tls: options.link });
    }
    if (pathname !== path) return refuse(socket, 404, 'Not Found');
    if (closing) return refuse(socket, 503, 'Service Unavailable');
    // A client certificate, when sent, must be valid and name a node; the node credential is
    // carried as well (the fleet's heartbeat is proven by it) and must be that node's.
    const peer = peerIdentity(request);
    if (peer.kind === 'refused' || peer.kind === 'gateway') return refuse(socket, 403, 'Forbidden');
    const authorization = request.headers.authorization ?? '';
    const match = /^Bearer (node_[A-Za-z0-9_.-]{10,300})$/.exec(authorization);
    if (!match) return refuse(socket, 401, 'Unauthorized');
    const certifiedNode = peer.kind === 'node' ? peer.nodeId : null;
    if (certifiedNode && match[1]!.split('.')[0] !== certifiedNode) return refuse(socket, 403, 'Forbidden');
    const clientAddress = options.clientAddress?.(request) ?? null;
    wss.handleUpgrade(request, socket, head, (ws) => {
      ws.on('error', () => ws.terminate());
      open(ws, match[1]!, certifiedNode, clientAddress).catch((error) => {
        log(`gateway: opening a session failed: ${(error as Error).message}`);
        ws.close(1011, 'internal error');
      });
    });
  };
  server.on('upgrade', onUpgrade);

  const gateway: Gateway = {
    id,
    sessions: () => [...sessions.keys()],
    wake(nodeId) {
      if (sessions.has(nodeId)) void deliver();
    },
    openStream(nodeId, target, sink) {
      const session = sessions.get(nodeId);
      if (!session || session.socket.readyState !== WebSocket.OPEN) return null;
      return session.streams.open(target, sink);
    },
    capabilities: (nodeId) => sessions.get(nodeId)?.capabilities ?? null,
    async close() {
      closing = true;
      clearInterval(ticker);
      clearInterval(stamper);
      await (await listening)?.close();
      if (options.url) await removeReplica(db as never, id).catch(() => {});
      server.off('upgrade', onUpgrade);
      for (const session of sessions.values()) session.socket.close(1012, 'the gateway is restarting');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
  return gateway;
}
