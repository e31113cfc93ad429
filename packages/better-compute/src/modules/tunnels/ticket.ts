/**
 * Tunnel tickets: `bct1.<claims>.<signature>`, the claims base64url JSON and the signature Ed25519
 * by the PKI bundle's exec ticket key over `bct1.<claims>`. Any replica (or gateway) can check one
 * with the public key alone; spending it is the database's job (the tunnels table).
 */
import { type KeyObject, sign, verify } from 'node:crypto';
import { ComputeError } from '@better-compute/core';

const PREFIX = 'bct1';
/** Longer than any ticket this code writes; a longer path segment is refused unread. */
const MAX_TICKET_LENGTH = 2048;

export interface TicketClaims {
  /** The tunnel's id (`tun_…`), the row the ticket is spent on. */
  id: string;
  tenantId: string;
  /** The principal who opened it, and the credential it was opened with. */
  principal: string;
  credential: string;
  nodeId: string;
  instanceId: string | null;
  /** A `sandbox exec` tunnel's sandbox: a byte stream to its SSH server (absent on older tickets). */
  sandboxId?: string | null;
  op: 'console' | 'exec' | 'tcp';
  port: number | null;
  cols: number;
  rows: number;
  /** The IAM action the open was decided on, decided again while the tunnel is open. */
  action: string;
  /** Milliseconds since the epoch after which the ticket is refused. */
  expiresAt: number;
  /** The deployment's trust domain, so one deployment's ticket never opens another's tunnel. */
  audience: string;
}

export function signTicket(claims: TicketClaims, key: KeyObject): string {
  const body = `${PREFIX}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${body}.${sign(null, Buffer.from(body), key).toString('base64url')}`;
}

function refused(message: string): ComputeError {
  return new ComputeError('UNAUTHENTICATED', message, {
    hint: 'Open a new tunnel (better-compute console, exec or forward); a ticket works once, within a minute.',
  });
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The claims of a ticket whose signature and audience check out; UNAUTHENTICATED otherwise. */
export function readTicket(ticket: string, key: KeyObject, audience: string, now: Date): TicketClaims {
  if (ticket.length > MAX_TICKET_LENGTH) throw refused('the tunnel ticket is too long to be one');
  const parts = ticket.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX || !BASE64URL.test(parts[1]!) || !BASE64URL.test(parts[2]!))
    throw refused('the tunnel ticket is malformed');
  const good = verify(null, Buffer.from(`${parts[0]}.${parts[1]}`), key, Buffer.from(parts[2]!, 'base64url'));
  if (!good) throw refused('the tunnel ticket’s signature does not verify');
  let claims: TicketClaims;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as TicketClaims;
  } catch {
    throw refused('the tunnel ticket is malformed');
  }
  if (claims.audience !== audience) throw refused('the tunnel ticket is for another deployment');
  if (!(claims.expiresAt > now.getTime())) throw refused('the tunnel ticket has expired');
  return claims;
}
