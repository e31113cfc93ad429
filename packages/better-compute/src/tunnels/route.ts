/**
 * The tunnel route, `{basePath}/tunnels/{ticket}`: a WebSocket upgrade on the API's HTTP server
 * (docs/tunnels.md). The request must carry the ticket in its path and the credential that opened
 * it (`Authorization: Bearer`, or a browser's session cookie from an allowed origin); the ticket is
 * checked (signature, audience, expiry, same person and credential), the call decided again, and
 * the ticket spent in the database before anything opens, so it works once on any replica. The
 * socket then relays to a NodeStreams stream: binary frames carry bytes both ways, text frames
 * carry control (`resize` from the client; `exit` and `error` to it). While it is open, every IAM
 * change re-decides it through the live hub, so a revoked session or credential closes it.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  ComputeError,
  cookieValue,
  type Identity,
  isLoopbackOrigin,
  isRefusedCredential,
  rateLimited,
  type RateLimiter,
  SESSION_COOKIE,
} from '@better-compute/core';
import { WebSocket, WebSocketServer } from 'ws';
import type { NodeStreams, NodeStreamTarget } from '../gateway/node-streams.js';
import { createGate } from '../http/gate.js';
import type { LiveStream } from '../live/hub.js';
import { createKeyLoader } from '../modules/ssh-certs/index.js';
import { sandboxOwner } from '../modules/sandboxes/index.js';
import {
  endTunnel,
  readTicket,
  spendTicket,
  targetKind,
  type TicketClaims,
} from '../modules/tunnels/index.js';
import type { ComputeInstance } from '../types.js';
import { relay } from './relay.js';

/** The largest frame a client may send: a terminal's keystrokes and a forwarded stream's chunks. */
const MAX_FRAME_BYTES = 1 << 20;
const TICKET_SEGMENT = /^[A-Za-z0-9._-]{1,2048}$/;

export interface TunnelRouteOptions {
  compute: ComputeInstance;
  /** The streams to nodes (the gateway's); without them every tunnel ends UNAVAILABLE. */
  streams?: NodeStreams | undefined;
  /** Answer 404 to upgrades of other paths (when no gateway listens on this server). */
  refuseOtherUpgrades?: boolean;
  log: (line: string) => void;
  now?: () => Date;
  /**
   * The per-address limit of upgrades: each is admitted by its client's address before anything
   * is checked, and a refused credential or ticket counts against the address (docs/rate-limits.md).
   * Without it, no per-address limit.
   */
  addressLimit?:
    { limiter: RateLimiter; clientAddress: (request: IncomingMessage) => string | null } | undefined;
}

export interface TunnelRoute {
  /** Tunnels open in this process. */
  open(): number;
  close(): Promise<void>;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  503: 'Service Unavailable',
};

/** An HTTP answer on a socket that asked to upgrade: the error envelope, then the socket closed. */
function refuse(socket: Duplex, error: ComputeError): void {
  const status =
    {
      UNAUTHENTICATED: 401,
      ACCESS_DENIED: 403,
      NOT_FOUND: 404,
      INVALID_ARGUMENT: 400,
      RATE_LIMITED: 429,
      TENANT_SUSPENDED: 403,
    }[error.code as string] ?? 503;
  const retryAfterMs = error.code === 'RATE_LIMITED' ? error.details?.retryAfterMs : undefined;
  const body = JSON.stringify({
    error: {
      code: error.code,
      message: error.message,
      ...(typeof retryAfterMs === 'number' ? { details: { retryAfterMs, limit: error.details?.limit } } : {}),
      ...(error.hint ? { hint: error.hint } : {}),
    },
  });
  const retryAfter =
    typeof retryAfterMs === 'number' ? `retry-after: ${Math.max(1, Math.ceil(retryAfterMs / 1000))}\r\n` : '';
  if (socket.writable)
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\nconnection: close\r\n${retryAfter}content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  socket.destroy();
}

function header(request: IncomingMessage, name: string): string | null {
  const value = request.headers[name];
  return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
}

export function attachTunnels(server: Server, options: TunnelRouteOptions): TunnelRoute {
  const { compute, log } = options;
  const now = options.now ?? (() => new Date());
  const prefix = `${compute.config.basePath}/tunnels/`;
  const keys = createKeyLoader({ pki: compute.config.pki, secret: compute.config.secret });
  const gate = createGate(compute.iam, compute.config.trustedOrigins);
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  const open = new Set<() => void>();
  let closing = false;

  /** The credential the upgrade carries; a cookie only from an allowed origin. */
  function credentialOf(request: IncomingMessage): string {
    const origin = header(request, 'origin');
    const host = header(request, 'host');
    const own = host && !/[/?#@\\\s]/.test(host) ? `http://${host}` : null;
    const trusted =
      compute.config.trustedOrigins ??
      (own && isLoopbackOrigin(own) ? [own, own.replace('http:', 'https:')] : []);
    // A browser always sends Origin on a WebSocket: one from another site is refused outright.
    if (origin !== null && !trusted.includes(origin))
      throw new ComputeError('ACCESS_DENIED', 'tunnels open only from the console’s own origin', {
        details: { reason: 'origin' },
        hint: 'Open the tunnel from an origin listed in trustedOrigins, or from the CLI.',
      });
    const authorization = header(request, 'authorization');
    if (authorization !== null) {
      const match = /^Bearer\s+(\S{1,4096})$/i.exec(authorization.trim());
      if (!match)
        throw new ComputeError('UNAUTHENTICATED', 'the Authorization header must be "Bearer <token>"');
      return match[1]!;
    }
    const cookie = cookieValue(header(request, 'cookie'), SESSION_COOKIE);
    if (cookie && origin !== null) return cookie;
    throw new ComputeError('UNAUTHENTICATED', 'a tunnel needs the credential that opened it', {
      hint: 'Send "Authorization: Bearer <token>" with the ticket (the CLI does), or open it from the signed-in console.',
    });
  }

  /** Whether the identity may still hold the tunnel: its tenant and the action on the target. */
  async function decide(identity: Identity, claims: TicketClaims): Promise<void> {
    await gate.checkTenant(identity, claims.tenantId);
    const resource: { type: string; id: string; tenantId: string; ownerId?: string } = claims.sandboxId
      ? { type: 'compute-sandbox', id: claims.sandboxId, tenantId: claims.tenantId }
      : claims.instanceId === null
        ? { type: 'compute-node', id: claims.nodeId, tenantId: claims.tenantId }
        : { type: 'compute-instance', id: claims.instanceId, tenantId: claims.tenantId };
    // A sandbox is a personal resource: its owner is read so `compute:sandboxes:exec@own` applies.
    if (claims.sandboxId) {
      const ownerId = await sandboxOwner(compute.database.db as never, claims.tenantId, {
        sandboxId: claims.sandboxId,
      });
      if (ownerId) resource.ownerId = ownerId;
    }
    const [decision] = await compute.iam.authorize(identity, [{ action: claims.action, resource }]);
    if (!decision?.allowed)
      throw new ComputeError(
        'ACCESS_DENIED',
        `${claims.action} is no longer allowed on ${resource.type} ${resource.id}`,
        {
          details: { action: claims.action, reason: decision?.reason ?? 'no decision' },
        },
      );
  }

  /** Everything before the upgrade: who, which ticket, still allowed, spent now. */
  async function admit(request: IncomingMessage, ticket: string) {
    const token = credentialOf(request);
    const identity = await gate.identify(token);
    const key = await keys.get('execTicket');
    const claims = readTicket(ticket, key.publicKey, key.trustDomain, now());
    if (claims.principal !== identity.principalId || claims.credential !== identity.credentialId)
      throw new ComputeError('ACCESS_DENIED', 'this tunnel ticket was issued to another credential', {
        details: { reason: 'ticket-holder' },
        hint: 'Open the tunnel with the credential that called tunnels.open.',
      });
    await decide(identity, claims);
    const spent = await spendTicket(compute.database.db as never, claims, now());
    if (!spent)
      throw new ComputeError('UNAUTHENTICATED', 'this tunnel ticket was already used or has expired', {
        details: { reason: 'ticket-spent' },
        hint: 'Open a new tunnel; each ticket opens one connection.',
      });
    return { token, claims };
  }

  function targetOf(claims: TicketClaims): NodeStreamTarget {
    const kind = targetKind(claims);
    switch (kind) {
      case 'node-console':
        return { kind, cols: claims.cols, rows: claims.rows };
      case 'instance-console':
        return { kind, instanceId: claims.instanceId!, cols: claims.cols, rows: claims.rows };
      case 'instance-exec':
        return {
          kind,
          instanceId: claims.instanceId!,
          argv: [],
          cols: claims.cols,
          rows: claims.rows,
          tty: true,
        };
      case 'instance-port':
        return { kind, instanceId: claims.instanceId!, port: claims.port! };
      case 'sandbox-ssh':
        return { kind, sandboxId: claims.sandboxId! };
    }
  }

  function serveTunnel(ws: WebSocket, token: string, claims: TicketClaims): void {
    const abort = new AbortController();
    let ended = false;
    // Whether the node's end was attached: a refusal before it keeps its code at the client.
    let opened = false;
    const finish = (exitStatus: number | null, reason: string | null) => {
      if (ended) return;
      ended = true;
      open.delete(shutdown);
      compute.live.remove(watcher);
      abort.abort();
      void endTunnel(compute.database.db as never, claims.id, { at: now(), exitStatus, reason }).catch(
        (error: unknown) =>
          log(`tunnels: recording the end of ${claims.id} failed: ${(error as Error).message}`),
      );
    };
    const fail = (error: ComputeError, code = 4000) => {
      if (ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({ t: 'error', code: error.code, message: error.message, opened }));
        ws.close(code, error.code);
      }
      finish(null, `${error.code}: ${error.message}`);
    };
    let detach: (() => void) | null = null;
    const shutdown = () => fail(new ComputeError('UNAVAILABLE', 'the server is restarting'), 1012);
    open.add(shutdown);
    // Re-decided at every IAM change (the hub listens on every replica) and on its timer.
    const watcher: LiveStream = {
      tenantId: claims.tenantId,
      cursor: null,
      deliver() {},
      async reauthorize() {
        if (ended) return;
        try {
          await decide(await gate.identify(token), claims);
        } catch (error) {
          const failure =
            error instanceof ComputeError ? error : new ComputeError('INTERNAL', 'internal error');
          if (failure.code === 'UNAVAILABLE' || failure.code === 'INTERNAL') return;
          detach?.();
          fail(failure, 4403);
        }
      },
      end: shutdown,
    };
    void compute.live.add(watcher);
    // What the client sends before the node's end is attached waits in the socket, not lost.
    ws.pause();
    ws.on('close', () => {
      detach?.();
      finish(null, 'the client closed the tunnel');
    });
    if (!options.streams)
      return fail(new ComputeError('UNAVAILABLE', 'this server has no gateway to reach nodes through'), 1011);
    options.streams
      .open(claims.nodeId, targetOf(claims), { signal: abort.signal })
      .then((stream) => {
        if (ended) return stream.close('the client left before the stream opened');
        opened = true;
        detach = relay(ws, stream, {
          onEnd: (end) => {
            if (ws.readyState === WebSocket.OPEN) {
              ws.send(
                JSON.stringify({
                  t: 'exit',
                  status: end.exitStatus,
                  ...(end.error ? { error: end.error } : {}),
                }),
              );
              ws.close(1000, 'ended');
            }
            finish(end.exitStatus, end.error ? `${end.error.code}: ${end.error.message}` : null);
          },
        });
      })
      .catch((error: unknown) => {
        const failure =
          error instanceof ComputeError
            ? error
            : new ComputeError('UNAVAILABLE', 'the node could not be reached');
        if (!(error instanceof ComputeError))
          log(`tunnels: opening ${claims.id} failed: ${(error as Error)?.message}`);
        fail(failure, 1011);
      });
  }

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const pathname = (request.url ?? '/').split('?')[0]!;
    if (!pathname.startsWith(prefix)) {
      if (options.refuseOtherUpgrades)
        refuse(socket, new ComputeError('NOT_FOUND', `no WebSocket route ${pathname.slice(0, 100)}`));
      return;
    }
    socket.on('error', () => socket.destroy());
    if (closing) return refuse(socket, new ComputeError('UNAVAILABLE', 'the server is restarting'));
    const limit = options.addressLimit;
    const address = limit?.clientAddress(request) ?? null;
    if (address) {
      const refused = limit!.limiter.admitAddress(address);
      if (refused) return refuse(socket, rateLimited(refused.waitMs, refused.limit));
    }
    const ticket = pathname.slice(prefix.length);
    if (!TICKET_SEGMENT.test(ticket)) {
      if (address) limit!.limiter.addressFailed(address);
      return refuse(socket, new ComputeError('UNAUTHENTICATED', 'the tunnel ticket is malformed'));
    }
    admit(request, ticket)
      .then(({ token, claims }) => {
        if (socket.destroyed) return;
        wss.handleUpgrade(request, socket, head, (ws) => {
          ws.on('error', () => ws.terminate());
          serveTunnel(ws, token, claims);
        });
      })
      .catch((error: unknown) => {
        if (address && isRefusedCredential(error)) limit!.limiter.addressFailed(address);
        if (!(error instanceof ComputeError))
          log(`tunnels: admitting a tunnel failed: ${(error as Error)?.message}`);
        refuse(
          socket,
          error instanceof ComputeError
            ? error
            : new ComputeError('UNAVAILABLE', 'the tunnel could not open; retry shortly'),
        );
      });
  };
  server.on('upgrade', onUpgrade);

  return {
    open: () => open.size,
    async close() {
      closing = true;
      server.off('upgrade', onUpgrade);
      for (const shutdown of [...open]) shutdown();
      // A socket still closing (its peer went without the closing handshake) would hold the
      // server's close for the WebSocket close timeout: the process is stopping, so it goes now.
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
