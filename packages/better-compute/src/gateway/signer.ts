/**
 * The command root: the one narrow interface through which the deployment signs commands. The PKI
 * bundle provides it in production (its command root key); tests and `dev` make one with
 * node:crypto. Daemons pin `publicKeyPem` and refuse any command its key did not sign.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { envelopeBytes } from '@better-compute/core';
import type { RotationEntry } from '@better-compute/core/command-root';

export interface CommandSigner {
  /** The Ed25519 public key, SPKI PEM, that daemons pin. */
  readonly publicKeyPem: string;
  /**
   * The signed statements that lead from earlier command roots to this one (oldest first), sent to
   * daemons so one that pinned an earlier root can follow them; none for a root never rotated.
   */
  readonly rotations?: readonly RotationEntry[];
  /** The trust domain the rotation statements name. */
  readonly trustDomain?: string;
  sign(bytes: Uint8Array): Uint8Array;
}

/** A signer over an Ed25519 private key (PKCS#8 PEM or a KeyObject). */
export function ed25519CommandSigner(privateKey: string | KeyObject): CommandSigner {
  const key = typeof privateKey === 'string' ? createPrivateKey(privateKey) : privateKey;
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('the command root key must be an Ed25519 key');
  const publicKeyPem = createPublicKey(key).export({ type: 'spki', format: 'pem' }).toString();
  return { publicKeyPem, sign: (bytes) => sign(null, bytes, key) };
}

/** A fresh key pair, for tests and `dev` (the PKI bundle's command root replaces it in production). */
export function generatedCommandSigner(): CommandSigner & { privateKeyPem: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  return { ...ed25519CommandSigner(privateKey), privateKeyPem };
}

export { envelopeBytes };
