/**
 * Witness cosignatures of checkpoints (https://c2sp.org/tlog-cosignature, `cosignature/v1`, Ed25519).
 *
 * A witness that checked a checkpoint extends the last one it saw adds one signature line to the
 * note: `— <witness name> <base64(key id || timestamp || signature)>`, where the key id is the first
 * four bytes of SHA-256(name || 0x0A || 0x04 || public key), the timestamp eight bytes big-endian
 * (POSIX seconds), and the Ed25519 signature covers `cosignature/v1\ntime <timestamp>\n` followed by
 * the checkpoint body (the note text, without any signature line). The log's own signature stays
 * as it was, so a cosigned note is still the log's note.
 *
 * A witness key is kept as `PRIVATE+KEY+<name>+<hex key id>+<base64(0x04 || 32-byte seed)>`, the
 * shape of golang.org/x/mod/sumdb/note's keys with the cosignature algorithm byte; its verifier key
 * is `<name>+<hex key id>+<base64(0x04 || public key)>`.
 */
import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { ed25519FromRaw, isKeyName, parseNote, rawEd25519 } from './note.js';

/** The signature algorithm byte of Ed25519 cosignature/v1 keys (c2sp.org/signed-note). */
const COSIGNATURE_V1 = 0x04;
const DASH = '\u2014';
/** The largest timestamp tlog-cosignature allows: 2^63 - 1. */
const MAX_TIMESTAMP = (1n << 63n) - 1n;
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface WitnessKey {
  name: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export interface WitnessVerifier {
  name: string;
  publicKey: KeyObject;
  /** The key id, hex. */
  keyId: string;
}

function cosignatureKeyId(name: string, publicKey: KeyObject): Buffer {
  return createHash('sha256')
    .update(Buffer.from(name, 'utf8'))
    .update(Buffer.from([0x0a, COSIGNATURE_V1]))
    .update(rawEd25519(publicKey))
    .digest()
    .subarray(0, 4);
}

/** `<name>+<hex key id>+<base64(0x04 || public key)>`. */
export function witnessVerifierKey(name: string, publicKey: KeyObject): string {
  const encoded = Buffer.concat([Buffer.from([COSIGNATURE_V1]), rawEd25519(publicKey)]).toString('base64');
  return `${name}+${cosignatureKeyId(name, publicKey).toString('hex')}+${encoded}`;
}

/** The key file's text for a witness key. */
export function formatWitnessKey(key: WitnessKey): string {
  const der = key.privateKey.export({ format: 'der', type: 'pkcs8' });
  const seed = der.subarray(der.length - 32);
  const encoded = Buffer.concat([Buffer.from([COSIGNATURE_V1]), seed]).toString('base64');
  return `PRIVATE+KEY+${key.name}+${cosignatureKeyId(key.name, key.publicKey).toString('hex')}+${encoded}\n`;
}

/** A witness key from its file's text; a reason when it is not one. */
export function parseWitnessKey(text: string): WitnessKey | { error: string } {
  const match = /^PRIVATE\+KEY\+([^+]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)\n?$/.exec(text);
  if (!match) return { error: 'it is not a witness key (PRIVATE+KEY+<name>+<key id>+<key>)' };
  const [, name, id, encoded] = match as unknown as [string, string, string, string];
  if (!isKeyName(name)) return { error: `"${name}" is not a key name` };
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length !== 33 || bytes[0] !== COSIGNATURE_V1) {
    return { error: 'it is not an Ed25519 cosignature/v1 key (algorithm 0x04, 32 bytes)' };
  }
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, bytes.subarray(1)]),
    format: 'der',
    type: 'pkcs8',
  });
  const publicKey = createPublicKey(privateKey);
  if (cosignatureKeyId(name, publicKey).toString('hex') !== id) {
    return { error: 'its key id does not match its name and key' };
  }
  return { name, privateKey, publicKey };
}

/** A witness's verifier key string; null when malformed, not cosignature/v1, or its id does not match. */
export function parseWitnessVerifier(text: string): WitnessVerifier | null {
  const match = /^([^+]*)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(text);
  if (!match) return null;
  const [, name, id, encoded] = match as unknown as [string, string, string, string];
  if (!isKeyName(name)) return null;
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length !== 33 || bytes[0] !== COSIGNATURE_V1) return null;
  const publicKey = ed25519FromRaw(bytes.subarray(1));
  return cosignatureKeyId(name, publicKey).toString('hex') === id ? { name, publicKey, keyId: id } : null;
}

/** The message a cosignature/v1 signature covers. */
function cosignedMessage(body: string, timestamp: bigint): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp.toString()}\n${body}`, 'utf8');
}

/**
 * Adds the witness's cosignature to a signed note (replacing an earlier one by the same key): the
 * note's text and its other signatures are kept as they are.
 */
export function cosignNote(note: string, key: WitnessKey, timestamp: bigint): string {
  const parsed = parseNote(note);
  if ('error' in parsed) throw new TypeError(parsed.error);
  if (timestamp < 0n || timestamp > MAX_TIMESTAMP) throw new RangeError('the timestamp is out of range');
  const id = cosignatureKeyId(key.name, key.publicKey);
  const time = Buffer.alloc(8);
  time.writeBigUInt64BE(timestamp);
  const signature = sign(null, cosignedMessage(parsed.text, timestamp), key.privateKey);
  const line = `${DASH} ${key.name} ${Buffer.concat([id, time, signature]).toString('base64')}`;
  // The signature block is every line after the text's blank line; an older line by this key goes.
  const idHex = id.toString('hex');
  const others = note
    .slice(parsed.text.length + 1, -1)
    .split('\n')
    .filter((existing) => !(existing.startsWith(`${DASH} ${key.name} `) && lineKeyId(existing) === idHex));
  return `${parsed.text}\n${[...others, line].join('\n')}\n`;
}

function lineKeyId(line: string): string {
  return Buffer.from(line.split(' ')[2] ?? '', 'base64')
    .subarray(0, 4)
    .toString('hex');
}

export interface Cosignature {
  witness: string;
  timestamp: number;
}

/**
 * The witnesses among `verifiers` whose cosignature on the note is valid, each once. A line with a
 * witness's name and key id whose signature does not verify is reported in `forged`.
 */
export function cosignaturesOf(
  note: string,
  verifiers: readonly WitnessVerifier[],
): { valid: Cosignature[]; forged: string[] } {
  const parsed = parseNote(note);
  if ('error' in parsed) return { valid: [], forged: [] };
  const valid: Cosignature[] = [];
  const forged: string[] = [];
  for (const verifier of verifiers) {
    const lines = parsed.signatures.filter((s) => s.name === verifier.name && s.keyId === verifier.keyId);
    let good: Cosignature | undefined;
    for (const line of lines) {
      // keyId (4, already split off) || timestamp (8) || Ed25519 signature (64).
      if (line.signature.length !== 72) continue;
      const timestamp = line.signature.readBigUInt64BE(0);
      if (timestamp > MAX_TIMESTAMP) continue;
      const ok = verify(
        null,
        cosignedMessage(parsed.text, timestamp),
        verifier.publicKey,
        line.signature.subarray(8),
      );
      if (ok) good = { witness: verifier.name, timestamp: Number(timestamp) };
    }
    if (good) valid.push(good);
    else if (lines.length > 0) forged.push(verifier.name);
  }
  return { valid, forged };
}
