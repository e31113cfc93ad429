/**
 * A command to a node daemon as the command root signs it, and the bytes the signature covers: one
 * definition for the gateway that signs and the daemon that checks, so the two can never disagree.
 */
import { canonicalJson } from './records.js';

/** What a command's signature covers: every field the daemon acts on. */
export interface CommandEnvelope {
  id: string;
  nodeId: string;
  kind: string;
  payload: Record<string, unknown>;
  issuedAt: string;
  expiresAt: string;
}

/** The bytes the command root signs: the envelope's fields as canonical JSON (keys sorted, no spaces). */
export function envelopeBytes(envelope: CommandEnvelope): Uint8Array {
  const { id, nodeId, kind, payload, issuedAt, expiresAt } = envelope;
  return new TextEncoder().encode(canonicalJson({ id, nodeId, kind, payload, issuedAt, expiresAt }));
}
