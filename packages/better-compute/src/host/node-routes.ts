/**
 * The upgrades that reach nodes, on an HTTP server that already serves the API: the gateway's
 * session route (daemons hold their sessions on it) and the tunnel route (consoles, forwarded ports
 * and sandbox logins, relayed to the node's session here or on another replica). `serve` attaches
 * them by role; a server that embeds the API, such as the web console's, attaches both with
 * `attachNodeRoutes`.
 */
import { EventEmitter } from 'node:events';
import { DEFAULT_RATE_LIMIT, RateLimiter } from '@better-compute/core';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { CommandSigner } from '../gateway/signer.js';
import type { GatewayPki } from '../gateway/node-certificates.js';
import type { NodeStreams } from '../gateway/node-streams.js';
import { attachGateway, type Gateway } from '../gateway/session-server.js';
import type { GatewayTls } from '../gateway/tls.js';
import type { PkiBundle } from '../pki/bundle.js';
import { attachTunnels, type TunnelRoute } from '../tunnels/route.js';
import type { ComputeInstance } from '../types.js';
import { configuredClientAddress } from './client-address.js';

export interface NodeRoutesOptions {
  compute: ComputeInstance;
  /** The tunnel route (this server answers the API). */
  api: boolean;
  /**
   * The gateway's session route, at `url`: the address daemons and other replicas reach it at. It
   * signs commands with `commandSigner`, else with the bundle's command root.
   */
  gateway: { url: string; commandSigner?: CommandSigner | undefined } | false;
  /** The PKI bundle: node certificates, and the tunnel ticket key. */
  bundle?: PkiBundle | undefined;
  tls?: GatewayTls | undefined;
  /** The streams tunnels relay to; default this process's own (createNodeStreams). */
  nodeStreams?: NodeStreams | undefined;
  onNodeStreams?: ((streams: NodeStreams) => void) | undefined;
  /**
   * Pages served beside the API (the web console): their own upgrades (Next.js's hot reload) reach
   * them first; the gateway would refuse every path it does not know.
   */
  pages?: { upgrade?(request: IncomingMessage, socket: Duplex, head: Buffer): boolean } | undefined;
  log: (line: string) => void;
}

export interface NodeRoutes {
  gateway: Gateway | undefined;
  /** Closes the open tunnels, then the daemons' sessions. */
  close(): Promise<void>;
}

/**
 * The server as the routes below see it for upgrades: the pages take theirs first, and only the
 * rest reach the routes (which use nothing of the server but its upgrade listeners). An upgrade
 * no route listens for any more (they have closed) is dropped rather than left hanging.
 */
function upgradesAfterPages(
  server: Server,
  pages: NodeRoutesOptions['pages'],
): { routed: Server; detach(): void } {
  const take = pages?.upgrade?.bind(pages);
  if (!take) return { routed: server, detach() {} };
  const rest = new EventEmitter();
  const forward = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!take(request, socket, head) && !rest.emit('upgrade', request, socket, head)) socket.destroy();
  };
  server.on('upgrade', forward);
  return { routed: rest as unknown as Server, detach: () => void server.off('upgrade', forward) };
}

export async function attachNodeRoutes(server: Server, options: NodeRoutesOptions): Promise<NodeRoutes> {
  const { compute, log, tls } = options;
  // The client's address of an upgrade, by the deployment's trusted proxies; the tunnel upgrades
  // are limited by it with the configuration's address buckets, counted apart from the API's calls
  // (a node session's first heartbeat is one of those: it goes through the API's own limit).
  const clientAddress = configuredClientAddress(compute.config);
  const { rateLimit } = compute.config;
  const limiter = rateLimit === false ? undefined : new RateLimiter({ ...DEFAULT_RATE_LIMIT, ...rateLimit });
  const { routed, detach } = upgradesAfterPages(server, options.pages);
  const pki: GatewayPki | undefined = options.bundle
    ? { bundle: options.bundle, secret: compute.config.secret }
    : undefined;
  // Without a signer of its own, the gateway signs with the bundle's command root.
  const commandSigner =
    options.gateway && !options.gateway.commandSigner && options.bundle
      ? await (
          await import('../pki/command-root.js')
        ).bundleCommandSigner(options.bundle.path, compute.config.secret, { db: compute.database.db, log })
      : options.gateway
        ? options.gateway.commandSigner
        : undefined;
  const gateway = options.gateway
    ? attachGateway(routed, {
        compute,
        commandSigner,
        log,
        pki,
        url: options.gateway.url,
        link: tls ? { tls } : undefined,
        clientAddress,
      })
    : undefined;
  const { createNodeStreams } = await import('../gateway/streams.js');
  const streams = options.nodeStreams ?? createNodeStreams({ compute, gateway, tls });
  options.onNodeStreams?.(streams);
  const tunnels: TunnelRoute | undefined = options.api
    ? attachTunnels(routed, {
        compute,
        streams,
        refuseOtherUpgrades: !gateway,
        log,
        addressLimit: limiter ? { limiter, clientAddress } : undefined,
      })
    : undefined;
  return {
    gateway,
    async close() {
      await tunnels?.close();
      await gateway?.close();
      detach();
    },
  };
}
