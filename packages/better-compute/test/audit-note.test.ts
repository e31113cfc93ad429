/**
 * Signed notes and checkpoints: the golang.org/x/mod/sumdb/note reference note (signed and verified
 * byte for byte), a key of our own, and every way a note can be bent.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { auditOrigin, formatCheckpoint, parseCheckpoint } from '../src/audit/checkpoint.js';
import {
  keyId,
  parseNote,
  parseVerifierKey,
  publicKeyPinOf,
  signNote,
  verifierKey,
  verifyNote,
} from '../src/audit/note.js';

// The example of golang.org/x/mod/sumdb/note: the signer key is 0x01 || the Ed25519 seed.
const PETER_SIGNER = 'AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
const PETER_VERIFIER = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const PETER_TEXT =
  "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const PETER_NOTE = `${PETER_TEXT}\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`;

function peterKeys() {
  const seed = Buffer.from(PETER_SIGNER, 'base64').subarray(1);
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]);
  const privateKey = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

describe('signed notes', () => {
  it('reproduces and verifies the sumdb/note reference note', () => {
    const { privateKey, publicKey } = peterKeys();
    expect(verifierKey('PeterNeumann', publicKey)).toBe(PETER_VERIFIER);
    expect(keyId('PeterNeumann', publicKey).toString('hex')).toBe('c74f20a3');
    expect(signNote(PETER_TEXT, 'PeterNeumann', privateKey, publicKey)).toBe(PETER_NOTE);
    const parsed = parseVerifierKey(PETER_VERIFIER)!;
    expect(parsed.name).toBe('PeterNeumann');
    expect(verifyNote(PETER_NOTE, parsed.name, parsed.publicKey)).toEqual({ ok: true, text: PETER_TEXT });
  });

  it('refuses a changed text, a changed signature, another name or key, and malformed notes', () => {
    const { publicKey } = peterKeys();
    const other = generateKeyPairSync('ed25519').publicKey;
    expect(verifyNote(PETER_NOTE.replace('answer', 'Answer'), 'PeterNeumann', publicKey).ok).toBe(false);
    expect(verifyNote(PETER_NOTE.replace('x08go', 'x08gp'), 'PeterNeumann', publicKey).ok).toBe(false);
    expect(verifyNote(PETER_NOTE, 'PeterNeumann', other).ok).toBe(false);
    expect(verifyNote(PETER_NOTE.replace('— PeterNeumann', '— Peter'), 'PeterNeumann', publicKey).ok).toBe(
      false,
    );
    expect(verifyNote(PETER_TEXT, 'PeterNeumann', publicKey).ok).toBe(false);
    expect(verifyNote(PETER_NOTE.slice(0, -1), 'PeterNeumann', publicKey).ok).toBe(false);
    expect(verifyNote(`\u0007${PETER_NOTE}`, 'PeterNeumann', publicKey).ok).toBe(false);
    expect('error' in parseNote(`${PETER_TEXT}\n- PeterNeumann abc=\n`)).toBe(true);
    expect(parseVerifierKey(PETER_VERIFIER.replace('c74f20a3', 'c74f20a4'))).toBeNull();
    expect(parseVerifierKey('PeterNeumann+c74f20a3')).toBeNull();
    // transparency-dev/formats' test key, whose base64 holds a '+'.
    expect(parseVerifierKey('TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6')?.name).toBe('TEST');
  });

  it('signs checkpoints with a fresh key and names the pin of its SubjectPublicKeyInfo', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const origin = auditOrigin('example.com', 'acme');
    const body = formatCheckpoint({ origin, size: 7, root: new Uint8Array(32).fill(9) });
    expect(body).toBe(`example.com/audit/acme\n7\n${Buffer.alloc(32, 9).toString('base64')}\n`);
    const note = signNote(body, origin, privateKey, publicKey);
    const verdict = verifyNote(note, origin, publicKey);
    expect(verdict.ok && parseCheckpoint(verdict.text)).toEqual({
      origin,
      size: 7,
      root: new Uint8Array(32).fill(9),
    });
    expect(publicKeyPinOf(publicKey)).toMatch(/^sha256\/[A-Za-z0-9+/]{43}=$/);
    expect(() => signNote('no newline', origin, privateKey, publicKey)).toThrow();
    expect(() => signNote(body, 'has space', privateKey, publicKey)).toThrow();
    for (const bad of [
      'o\n07\nroot\n',
      'o\n-1\n' + 'A'.repeat(43) + '=\n',
      '\n1\n' + 'A'.repeat(43) + '=\n',
      'o\n1\n',
    ]) {
      expect('error' in parseCheckpoint(bad)).toBe(true);
    }
  });
});
