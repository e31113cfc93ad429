/**
 * Public keys as the project's signed documents carry them (SPKI DER, or an SPKI PEM in a
 * `PATH.pub` file), read strictly: one encoding per key, so one id per key. The quorum's approver
 * keys (P-256) and the release keys (Ed25519) are both read through here; each names its kind.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';

const PEM = /^-----BEGIN PUBLIC KEY-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END PUBLIC KEY-----\s*$/;

/** The DER inside an SPKI PEM, or null when `text` is not one. */
export function spkiDerOfPem(text: string): Buffer | null {
  const pem = PEM.exec(text);
  return pem ? Buffer.from(pem[1]!.replace(/\s/g, ''), 'base64') : null;
}

/**
 * The public key in `der` when it is of the wanted kind, at most `maxBytes` long, and re-exports
 * to exactly these bytes; null for anything else. Never throws.
 */
export function strictSpkiKey(
  der: Uint8Array,
  maxBytes: number,
  wanted: (key: KeyObject) => boolean,
): KeyObject | null {
  if (der.length === 0 || der.length > maxBytes) return null;
  try {
    const bytes = Buffer.from(der);
    const key = createPublicKey({ key: bytes, format: 'der', type: 'spki' });
    return wanted(key) && bytes.equals(key.export({ type: 'spki', format: 'der' })) ? key : null;
  } catch {
    return null;
  }
}
