/**
 * Witness cosignatures in the C2SP cosignature/v1 format, checked against the spec's own words
 * rather than our functions: the key id is SHA-256(name || 0x0A || 0x04 || key)[:4], the line's blob
 * is key id || 8-byte big-endian timestamp || 64-byte Ed25519 signature, and the signature covers
 * "cosignature/v1\ntime <t>\n" followed by the checkpoint body. A cosigned note is still the log's
 * note; a changed byte, another key or a key that only shares the name is no valid cosignature.
 */
import { createHash, generateKeyPairSync, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  cosignaturesOf,
  cosignNote,
  formatWitnessKey,
  parseWitnessKey,
  parseWitnessVerifier,
  witnessVerifierKey,
} from '../src/audit/cosignature.js';
import { rawEd25519, signNote, verifyNote } from '../src/audit/note.js';

const body = 'compute.example.com/audit/acme\n5\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';
const log = generateKeyPairSync('ed25519');
const logNote = signNote(body, 'compute.example.com/audit/acme', log.privateKey, log.publicKey);

function witness(name: string) {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { name, privateKey, publicKey };
}

describe('cosignature/v1', () => {
  it('writes the line the spec describes, over the message the spec describes', () => {
    const w = witness('witness.example.com/w1');
    const cosigned = cosignNote(logNote, w, 1679315147n);
    expect(cosigned.startsWith(logNote)).toBe(true);
    const line = cosigned.slice(logNote.length).trimEnd();
    const match = /^\u2014 witness\.example\.com\/w1 ([A-Za-z0-9+/]+=*)$/u.exec(line);
    expect(match).not.toBeNull();
    const blob = Buffer.from(match![1]!, 'base64');
    expect(blob.length).toBe(4 + 8 + 64);
    const id = createHash('sha256')
      .update(Buffer.concat([Buffer.from('witness.example.com/w1\n\x04', 'latin1'), rawEd25519(w.publicKey)]))
      .digest()
      .subarray(0, 4);
    expect(blob.subarray(0, 4)).toEqual(id);
    expect(blob.readBigUInt64BE(4)).toBe(1679315147n);
    const message = Buffer.from(`cosignature/v1\ntime 1679315147\n${body}`, 'utf8');
    expect(verify(null, message, w.publicKey, blob.subarray(12))).toBe(true);
    // The log's own signature still verifies on the cosigned note.
    expect(verifyNote(cosigned, 'compute.example.com/audit/acme', log.publicKey).ok).toBe(true);

    const vkey = witnessVerifierKey(w.name, w.publicKey);
    expect(vkey).toBe(
      `witness.example.com/w1+${id.toString('hex')}+${Buffer.concat([Buffer.from([4]), rawEd25519(w.publicKey)]).toString('base64')}`,
    );
    expect(cosignaturesOf(cosigned, [parseWitnessVerifier(vkey)!])).toEqual({
      valid: [{ witness: 'witness.example.com/w1', timestamp: 1679315147 }],
      forged: [],
    });
  });

  it('keeps the key file round trip, and a second cosign replaces the witness’s own line only', () => {
    const w = witness('w1.example');
    const parsed = parseWitnessKey(formatWitnessKey(w));
    expect('error' in parsed).toBe(false);
    const other = witness('w2.example');
    const twice = cosignNote(cosignNote(cosignNote(logNote, w, 1n), other, 2n), parsed as typeof w, 3n);
    const lines = twice.trimEnd().split('\n');
    expect(lines.filter((l) => l.startsWith('\u2014 w1.example '))).toHaveLength(1);
    expect(lines.filter((l) => l.startsWith('\u2014 w2.example '))).toHaveLength(1);
    const verifiers = [w, other].map((k) => parseWitnessVerifier(witnessVerifierKey(k.name, k.publicKey))!);
    expect(cosignaturesOf(twice, verifiers).valid.map((c) => [c.witness, c.timestamp])).toEqual([
      ['w1.example', 3],
      ['w2.example', 2],
    ]);
    expect(parseWitnessKey('PRIVATE+KEY+w1.example+00000000+AQ==')).toHaveProperty('error');
  });

  it('counts no cosignature that was changed, moved to another body, or made by another key', () => {
    const w = witness('w1.example');
    const verifier = parseWitnessVerifier(witnessVerifierKey(w.name, w.publicKey))!;
    const cosigned = cosignNote(logNote, w, 1700000000n);
    const line = cosigned.slice(logNote.length);
    const blob = Buffer.from(line.trim().split(' ')[2]!, 'base64');
    blob[20] = blob[20]! ^ 1;
    const changed = `${logNote}\u2014 w1.example ${blob.toString('base64')}\n`;
    expect(cosignaturesOf(changed, [verifier])).toEqual({ valid: [], forged: ['w1.example'] });
    // The timestamp is signed: moving it is a forgery too.
    const later = Buffer.from(line.trim().split(' ')[2]!, 'base64');
    later.writeBigUInt64BE(1700000001n, 4);
    expect(
      cosignaturesOf(`${logNote}\u2014 w1.example ${later.toString('base64')}\n`, [verifier]).valid,
    ).toEqual([]);
    // The same line under another checkpoint body.
    const otherBody = body.replace('\n5\n', '\n6\n');
    const otherNote = signNote(otherBody, 'compute.example.com/audit/acme', log.privateKey, log.publicKey);
    expect(cosignaturesOf(`${otherNote}${line}`, [verifier]).valid).toEqual([]);
    // Another key under the same name: its key id differs, so the line is not this witness's.
    const impostor = witness('w1.example');
    expect(cosignaturesOf(cosignNote(logNote, impostor, 1n), [verifier])).toEqual({ valid: [], forged: [] });
    // A note-signature key (0x01) is not a cosignature key.
    expect(parseWitnessVerifier(witnessVerifierKey(w.name, w.publicKey).replace(/\+B/, '+A'))).toBeNull();
  });
});
