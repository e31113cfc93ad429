/**
 * Signed notes (https://c2sp.org/signed-note) with Ed25519 keys, and the public-key pins the
 * deployment publishes (`sha256/` + base64 of SHA-256 over the key's SubjectPublicKeyInfo DER).
 *
 * A note is its text (UTF-8, newline-terminated lines), a blank line, then one line per signature:
 * `— <key name> <base64(key id || signature)>`. The key id of an Ed25519 key is the first four bytes
 * of SHA-256(name || 0x0A || 0x01 || the 32-byte public key); the signature covers the text.
 */
import { createHash, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';

/** The signature algorithm byte of Ed25519 in key ids and verifier keys. */
const ED25519 = 0x01;
const DASH = '\u2014';

export function publicKeyPinOf(key: KeyObject): string {
  const der = key.export({ type: 'spki', format: 'der' });
  return `sha256/${createHash('sha256').update(der).digest('base64')}`;
}

/** The raw 32 bytes of an Ed25519 public key. */
export function rawEd25519(key: KeyObject): Buffer {
  if (key.asymmetricKeyType !== 'ed25519') throw new TypeError('not an Ed25519 key');
  const der = key.export({ type: 'spki', format: 'der' });
  return der.subarray(der.length - 32);
}

/** An Ed25519 public key from its raw 32 bytes. */
export function ed25519FromRaw(raw: Uint8Array): KeyObject {
  if (raw.length !== 32) throw new TypeError('an Ed25519 public key is 32 bytes');
  const prefix = Buffer.from('302a300506032b6570032100', 'hex');
  return createPublicKey({ key: Buffer.concat([prefix, raw]), format: 'der', type: 'spki' });
}

/** A key name: non-empty, no whitespace, no `+`. */
export function isKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name) && !/\p{Cc}/u.test(name);
}

export function keyId(name: string, publicKey: KeyObject): Buffer {
  const hash = createHash('sha256')
    .update(Buffer.from(name, 'utf8'))
    .update(Buffer.from([0x0a, ED25519]))
    .update(rawEd25519(publicKey))
    .digest();
  return hash.subarray(0, 4);
}

/** The verifier key string of c2sp.org/signed-note: `<name>+<hex key id>+<base64(0x01 || key)>`. */
export function verifierKey(name: string, publicKey: KeyObject): string {
  const encoded = Buffer.concat([Buffer.from([ED25519]), rawEd25519(publicKey)]).toString('base64');
  return `${name}+${keyId(name, publicKey).toString('hex')}+${encoded}`;
}

/** Parses a verifier key string; null when it is malformed or not Ed25519, or its id does not match. */
export function parseVerifierKey(text: string): { name: string; publicKey: KeyObject } | null {
  // The name and the id end at the first two `+`; the base64 after them may hold more.
  const match = /^([^+]*)\+([^+]*)\+(.*)$/s.exec(text);
  if (!match) return null;
  const [, name, id, encoded] = match as unknown as [string, string, string, string];
  if (!isKeyName(name) || !/^[0-9a-f]{8}$/.test(id) || !/^[A-Za-z0-9+/]+=*$/.test(encoded)) return null;
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length !== 33 || bytes[0] !== ED25519) return null;
  const publicKey = ed25519FromRaw(bytes.subarray(1));
  return keyId(name, publicKey).toString('hex') === id ? { name, publicKey } : null;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Well-formed note text: valid UTF-8 lines without control characters, ending in a newline. */
function checkText(text: string): string | null {
  if (!text.endsWith('\n')) return 'the note text does not end with a newline';
  if (/[\p{Cc}]/u.test(text.replace(/\n/g, ''))) return 'the note text has a control character';
  if (text.includes('\uFFFD') || LONE_SURROGATE.test(text)) return 'the note text is not valid UTF-8';
  return null;
}

/** Signs `text` with an Ed25519 private key under `name`; answers the whole note. */
export function signNote(text: string, name: string, privateKey: KeyObject, publicKey: KeyObject): string {
  const problem = checkText(text) ?? (isKeyName(name) ? null : `"${name}" is not a key name`);
  if (problem) throw new TypeError(problem);
  const signature = sign(null, Buffer.from(text, 'utf8'), privateKey);
  const blob = Buffer.concat([keyId(name, publicKey), signature]).toString('base64');
  return `${text}\n${DASH} ${name} ${blob}\n`;
}

interface NoteSignature {
  name: string;
  keyId: string;
  signature: Buffer;
}

export interface ParsedNote {
  text: string;
  signatures: NoteSignature[];
}

/** Splits a note into its text and signature lines; a reason when it is not a signed note. */
export function parseNote(note: string): ParsedNote | { error: string } {
  const split = note.lastIndexOf('\n\n');
  if (split < 0) return { error: 'the note has no signature block' };
  const text = note.slice(0, split + 1);
  const problem = checkText(text);
  if (problem) return { error: problem };
  const block = note.slice(split + 2);
  if (!block.endsWith('\n')) return { error: 'the signature block does not end with a newline' };
  const signatures: NoteSignature[] = [];
  for (const line of block.slice(0, -1).split('\n')) {
    const match = /^\u2014 (\S+) ([A-Za-z0-9+/]+=*)$/u.exec(line);
    if (!match || !isKeyName(match[1]!))
      return { error: `malformed signature line: ${JSON.stringify(line)}` };
    const bytes = Buffer.from(match[2]!, 'base64');
    if (bytes.length < 5) return { error: 'a signature is too short' };
    signatures.push({
      name: match[1]!,
      keyId: bytes.subarray(0, 4).toString('hex'),
      signature: bytes.subarray(4),
    });
  }
  if (signatures.length === 0) return { error: 'the note has no signatures' };
  return { text, signatures };
}

/**
 * Whether `note` carries a valid signature by `publicKey` under `name`: a line with that name and
 * the key's id whose Ed25519 signature verifies over the text. Answers the text, or a reason.
 */
export function verifyNote(
  note: string,
  name: string,
  publicKey: KeyObject,
): { ok: true; text: string } | { ok: false; reason: string } {
  const parsed = parseNote(note);
  if ('error' in parsed) return { ok: false, reason: parsed.error };
  const id = keyId(name, publicKey).toString('hex');
  const mine = parsed.signatures.filter((s) => s.name === name && s.keyId === id);
  if (mine.length === 0) return { ok: false, reason: `the note is not signed by ${name}+${id}` };
  const text = Buffer.from(parsed.text, 'utf8');
  const valid = mine.some((s) => s.signature.length === 64 && verify(null, text, publicKey, s.signature));
  return valid
    ? { ok: true, text: parsed.text }
    : { ok: false, reason: `the signature by ${name} is not valid` };
}
