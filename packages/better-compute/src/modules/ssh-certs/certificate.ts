/**
 * OpenSSH certificates, signed in this one place for every CA of the deployment (break-glass
 * logins on nodes, sandbox host and user certificates). The format is OpenSSH's PROTOCOL.certkeys,
 * written here and signed with node:crypto by the Ed25519 CA; sshpk only parses and checks the
 * caller's public key.
 *
 * A break-glass certificate opens one account on one node: its one principal is
 * `<account>@<nodeId>`, which only that node's sshd accepts for that account (through its
 * AuthorizedPrincipalsFile). The key id names the holder, so sshd's log says who logged in. sshd
 * gives no pty without `permit-pty`: the usual `permit-*` extensions are set, agent forwarding
 * excepted.
 */
import { createHash, randomBytes, sign, type KeyObject } from 'node:crypto';
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

/** One certificate: what it certifies, for whom, until when, and the CA that signs it. */
export interface SshCertificateRequest {
  /** The subject's OpenSSH public key line (`ssh-ed25519 AAAA… comment`). */
  publicKey: string;
  kind: 'user' | 'host';
  principals: readonly string[];
  keyId: string;
  serial: bigint;
  validAfter: Date;
  validBefore: Date;
  /** Extensions, each with empty data (`permit-pty`, …); host certificates take none. */
  extensions?: readonly string[];
  /** The CA's Ed25519 private key. */
  caPrivateKey: KeyObject;
}

/** A random serial below 2^63, so it prints the same as a signed and an unsigned 64-bit number. */
export function newSerial(): bigint {
  return randomBytes(8).readBigUInt64BE() >> 1n;
}

/** SSH wire encoding (RFC 4251): a string is its uint32 length then its bytes. */
function sshString(value: Buffer | string): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value) : value;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

function uint64(value: bigint): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(value);
  return bytes;
}

/** Seconds since the epoch, as certificates carry them. */
const seconds = (date: Date) => BigInt(Math.floor(date.getTime() / 1000));

/** The parts of an OpenSSH public key line: its type and its wire blob, checked to agree. */
function publicKeyBlob(line: string): { type: string; blob: Buffer } {
  const [type = '', encoded = ''] = line.trim().split(/\s+/);
  const blob = Buffer.from(encoded, 'base64');
  if (
    blob.length < 4 ||
    blob.readUInt32BE(0) !== type.length ||
    blob.subarray(4, 4 + type.length).toString() !== type
  )
    throw badKey('publicKey is not a valid OpenSSH public key');
  return { type, blob };
}

/** The CA's public key as the certificate's `signature key` field names it. */
function ed25519Blob(caPrivateKey: KeyObject): Buffer {
  if (caPrivateKey.asymmetricKeyType !== 'ed25519')
    throw new ComputeError('INTERNAL', 'an SSH CA key must be Ed25519');
  const jwk = caPrivateKey.export({ format: 'jwk' });
  return Buffer.concat([sshString('ssh-ed25519'), sshString(Buffer.from(jwk.x!, 'base64url'))]);
}

/**
 * Signs an OpenSSH certificate for `request.publicKey` (its type's `-cert-v01@openssh.com` form):
 * the subject key's own fields, then serial, type, key id, principals, validity, no critical
 * options, the sorted extensions, and the CA's Ed25519 signature over all of it.
 */
export function signSshCertificate(request: SshCertificateRequest): string {
  const { type, blob } = publicKeyBlob(request.publicKey);
  const certType = `${type}-cert-v01@openssh.com`;
  const extensions = [...(request.extensions ?? [])].sort();
  const body = Buffer.concat([
    sshString(certType),
    sshString(randomBytes(32)),
    // The subject key's fields are its blob after the type string, whatever the key type.
    blob.subarray(4 + type.length),
    uint64(request.serial),
    Buffer.from([0, 0, 0, request.kind === 'user' ? 1 : 2]),
    sshString(request.keyId),
    sshString(Buffer.concat(request.principals.map((principal) => sshString(principal)))),
    uint64(seconds(request.validAfter)),
    uint64(seconds(request.validBefore)),
    sshString(Buffer.alloc(0)),
    sshString(
      Buffer.concat(extensions.map((name) => Buffer.concat([sshString(name), sshString(Buffer.alloc(0))]))),
    ),
    sshString(Buffer.alloc(0)),
    sshString(ed25519Blob(request.caPrivateKey)),
  ]);
  const signature = sign(null, body, request.caPrivateKey);
  const certificate = Buffer.concat([
    body,
    sshString(Buffer.concat([sshString('ssh-ed25519'), sshString(signature)])),
  ]);
  return `${certType} ${certificate.toString('base64')}`;
}

/** The SHA256 fingerprint of an OpenSSH public key line, as ssh-keygen -l prints it. */
export function sshFingerprint(publicKey: string): string {
  const { blob } = publicKeyBlob(publicKey);
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** A break-glass certificate: one principal, the usual extensions; with the key's fingerprint. */
export async function signUserCertificate(request: {
  publicKey: string;
  principal: string;
  keyId: string;
  serial: bigint;
  validAfter: Date;
  validBefore: Date;
  caPrivateKey: KeyObject;
}): Promise<{ certificate: string; fingerprint: string }> {
  await parseUserPublicKey(request.publicKey);
  return {
    certificate: signSshCertificate({
      ...request,
      kind: 'user',
      principals: [request.principal],
      extensions: EXTENSIONS,
    }),
    fingerprint: sshFingerprint(request.publicKey),
  };
}
