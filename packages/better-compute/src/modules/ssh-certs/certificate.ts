/**
 * OpenSSH user certificates with sshpk. A certificate opens one account on one node: its one
 * principal is `<account>@<nodeId>`, which only that node's sshd accepts for that account (through
 * its AuthorizedPrincipalsFile). The key id names the holder, so sshd's log says who logged in.
 * sshpk writes no extensions by default, and sshd then gives no pty: the usual `permit-*`
 * extensions are set (agent forwarding excepted) and the certificate signed again.
 */
import { randomBytes, type KeyObject } from 'node:crypto';
import { ComputeError } from '@better-compute/core';

type Sshpk = typeof import('sshpk');

async function sshpk(): Promise<Sshpk> {
  const loaded = (await import('sshpk')) as Sshpk & { default?: Sshpk };
  return loaded.default ?? loaded;
}

const KEY_TYPES = new Set([
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'ssh-rsa',
]);
const EXTENSIONS = ['permit-pty', 'permit-port-forwarding', 'permit-user-rc', 'permit-X11-forwarding'];

function badKey(message: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', message, {
    details: { field: 'publicKey' },
    hint: 'Send the one line of your .pub file (ssh-ed25519 AAAA… you@host), never the private key.',
  });
}

/** The public key a caller sent, checked: one OpenSSH public key line of a supported type. */
export async function parseUserPublicKey(text: string) {
  const line = text.trim();
  if (/PRIVATE KEY/.test(line)) throw badKey('publicKey holds a private key; send only the public key');
  if (line.includes('\n')) throw badKey('publicKey must be one line');
  const type = line.split(/\s+/, 1)[0] ?? '';
  if (!KEY_TYPES.has(type))
    throw badKey(`publicKey must be an OpenSSH public key (${[...KEY_TYPES].join(', ')})`);
  const lib = await sshpk();
  let key;
  try {
    key = lib.parseKey(line, 'ssh');
  } catch {
    throw badKey('publicKey is not a valid OpenSSH public key');
  }
  if (key.type === 'rsa' && key.size < 2048) throw badKey('an RSA publicKey must have at least 2048 bits');
  return key;
}

export interface CertificateRequest {
  publicKey: string;
  principal: string;
  keyId: string;
  serial: bigint;
  validAfter: Date;
  validBefore: Date;
  caPrivateKey: KeyObject;
}

/** A random serial below 2^63, so it prints the same as a signed and an unsigned 64-bit number. */
export function newSerial(): bigint {
  return randomBytes(8).readBigUInt64BE() >> 1n;
}

/** Signs the certificate; answers its OpenSSH line and the subject key's SHA256 fingerprint. */
export async function signUserCertificate(
  request: CertificateRequest,
): Promise<{ certificate: string; fingerprint: string }> {
  const lib = await sshpk();
  const subjectKey = await parseUserPublicKey(request.publicKey);
  const caKey = lib.parsePrivateKey(
    request.caPrivateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    'pem',
  );
  const serial = Buffer.alloc(8);
  serial.writeBigUInt64BE(request.serial);
  const certificate = lib.createCertificate(
    lib.identityForUser(request.principal),
    subjectKey,
    lib.identityForHost('break-glass-ssh-ca'),
    caKey,
    { validFrom: request.validAfter, validUntil: request.validBefore, serial },
  );
  const openssh = (certificate as unknown as { signatures: { openssh: OpensshSignature } }).signatures
    .openssh;
  openssh.keyId = request.keyId;
  openssh.exts = EXTENSIONS.map((name) => ({ name, critical: false, data: Buffer.alloc(0) }));
  certificate.signWith(caKey);
  return {
    certificate: `${certificate.toString('openssh')}`.trim(),
    fingerprint: subjectKey.fingerprint('sha256').toString(),
  };
}

interface OpensshSignature {
  keyId?: string;
  exts?: { name: string; critical: boolean; data: Buffer }[];
}
