/**
 * The bundle's OpenSSH certificate authorities (break-glass and sandbox): Ed25519 keys whose public
 * halves are written as OpenSSH public key lines with sshpk, for `TrustedUserCAKeys` on machines
 * and `@cert-authority` lines in known-hosts files.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';

type Sshpk = typeof import('sshpk');

async function sshpk(): Promise<Sshpk> {
  const loaded = (await import('sshpk')) as Sshpk & { default?: Sshpk };
  return loaded.default ?? loaded;
}

/** `ssh-ed25519 AAAA… comment` for an Ed25519 key (private or public half). */
export async function sshPublicKeyLine(key: KeyObject, comment: string): Promise<string> {
  const lib = await sshpk();
  const publicKey = key.type === 'public' ? key : createPublicKey(key);
  const parsed = lib.parseKey(publicKey.export({ type: 'spki', format: 'pem' }).toString(), 'pem');
  parsed.comment = comment.replace(/[^A-Za-z0-9@._:-]/g, '-');
  return parsed.toString('ssh');
}
