/**
 * The command root and its rotations, as both sides check them: the gateway's PKI bundle writes a
 * rotation statement (the new root's key, signed by the old one), and a daemon that pinned the old
 * root follows the statements to the new one. One definition, so the two never disagree. Node
 * only (node:crypto); browsers have no use for it.
 */
import { createHash, createPublicKey, type KeyObject, verify } from 'node:crypto';
import { ComputeError } from './errors.js';

/** 'sha256/' + base64 of SHA-256 over the key's SubjectPublicKeyInfo DER. */
export function publicKeyPin(key: KeyObject): string {
  const publicKey = key.type === 'public' ? key : createPublicKey(key);
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return `sha256/${createHash('sha256').update(der).digest('base64')}`;
}

/** A command-root rotation statement: the new root's key, signed by the old one. */
export interface RotationEntry {
  from: string;
  to: string;
  at: string;
  /** The signed text (`rotationStatementText`). */
  statement: string;
  /** base64 Ed25519 signature of `statement` by the `from` key. */
  signature: string;
}

/** The text a rotation statement signs: the new root's key, bound to the old pin and the trust domain. */
export function rotationStatementText(trustDomain: string, from: string, to: KeyObject, at: string): string {
  const spki = (to.type === 'public' ? to : createPublicKey(to)).export({ type: 'spki', format: 'der' });
  return [
    'better-compute command-root rotation v1',
    `trust-domain: ${trustDomain}`,
    `from: ${from}`,
    `to: ${publicKeyPin(to)}`,
    `key: ${spki.toString('base64')}`,
    `at: ${at}`,
    '',
  ].join('\n');
}

/**
 * Checks one rotation statement against the key a verifier already trusts; returns the new
 * command root's public key, or throws PKI_INVALID_ROTATION.
 */
export function verifyRotationStatement(
  rotation: RotationEntry,
  trusted: KeyObject,
  trustDomain?: string,
): KeyObject {
  const refuse = (why: string): never => {
    throw new ComputeError(
      'PKI_INVALID_ROTATION',
      `the command-root rotation statement is not valid: ${why}`,
      {
        hint: 'Take the statement from the bundle that made it ("better-compute pki show --query commandRootRotations").',
      },
    );
  };
  const lines = rotation.statement.split('\n');
  if (lines[0] !== 'better-compute command-root rotation v1' || lines.length !== 7 || lines[6] !== '')
    refuse('it is not a version 1 statement');
  const field = (i: number, name: string): string => {
    const line = lines[i]!;
    if (!line.startsWith(`${name}: `)) refuse(`line ${i + 1} is not "${name}"`);
    return line.slice(name.length + 2);
  };
  const domain = field(1, 'trust-domain');
  const from = field(2, 'from');
  const to = field(3, 'to');
  const key = field(4, 'key');
  const at = field(5, 'at');
  if (trustDomain !== undefined && domain !== trustDomain) refuse('it is for another trust domain');
  if (from !== publicKeyPin(trusted) || from !== rotation.from)
    refuse('it is not signed by the trusted command root');
  if (to !== rotation.to || at !== rotation.at) refuse('its fields do not match the statement');
  let next: KeyObject;
  try {
    next = createPublicKey({ key: Buffer.from(key, 'base64'), format: 'der', type: 'spki' });
  } catch {
    return refuse('its key is not a public key');
  }
  if (next.asymmetricKeyType !== 'ed25519' || publicKeyPin(next) !== to)
    refuse('its key is not the Ed25519 key it names');
  const signature = Buffer.from(rotation.signature, 'base64');
  if (!verify(null, Buffer.from(rotation.statement, 'utf8'), trusted, signature))
    refuse('the signature does not verify under the old command root');
  return next;
}

/**
 * Follows the rotation statements from a pinned command root to the current one; returns the
 * current root's public key, or throws when the chain breaks.
 */
export function followRotations(
  pinned: KeyObject,
  rotations: readonly RotationEntry[],
  trustDomain?: string,
): KeyObject {
  let current = pinned;
  // Each statement is used at most once, so a list that loops back cannot keep this going.
  const unused = [...rotations];
  for (;;) {
    const pin = publicKeyPin(current);
    const at = unused.findIndex((rotation) => rotation.from === pin);
    if (at < 0) return current;
    current = verifyRotationStatement(unused.splice(at, 1)[0]!, current, trustDomain);
  }
}
