/**
 * The PKI bundle's file and sealing: written 0600 and never over a bundle without force, every
 * private key opens only with the secret, in its own slot and untampered, and the pins are the
 * SHA-256 of the SPKI DER as openssl computes it.
 */
import { execFileSync } from 'node:child_process';
import { createPublicKey, sign, verify } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ComputeError } from '@better-compute/core';
import { DEFAULT_PKI_PATH, publicKeyPin, readPkiBundle } from '../src/pki/bundle.js';
import { createPkiBundle } from '../src/pki/create.js';

const secret = 'correct horse battery staple 0123';
const dir = mkdtempSync(join(tmpdir(), 'bc-pki-'));

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ComputeError);
    return (error as ComputeError).code;
  }
  throw new Error('expected a failure');
}

describe('the PKI bundle file', () => {
  const path = join(dir, 'a', DEFAULT_PKI_PATH);

  it('is written with mode 0600 and holds every key, each opening with the secret', async () => {
    const bundle = await createPkiBundle({ path, secret, trustDomain: 'compute.example.com' });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const read = await readPkiBundle(path);
    expect(read.trustDomain).toBe('compute.example.com');
    expect(read.commandRoot.pin).toBe(bundle.commandRoot.pin);
    for (const key of [
      read.commandRoot,
      read.audit!,
      read.execTicket,
      read.breakGlassSshCa,
      read.sandboxSshCa!,
      read.machineCa,
    ]) {
      const privateKey = await key.privateKey(secret);
      expect(publicKeyPin(privateKey)).toBe(key.pin);
      const signature = sign(key.algorithm === 'Ed25519' ? null : 'sha256', Buffer.from('m'), privateKey);
      expect(
        verify(key.algorithm === 'Ed25519' ? null : 'sha256', Buffer.from('m'), key.publicKey, signature),
      ).toBe(true);
    }
    expect(read.commandRoot.algorithm).toBe('Ed25519');
    expect(read.audit!.algorithm).toBe('Ed25519');
    expect(read.machineCa.algorithm).toBe('ECDSA-P256');
    // Separate keys for separate jobs.
    expect(new Set([read.breakGlassSshCa.pin, read.sandboxSshCa!.pin, read.commandRoot.pin]).size).toBe(3);
    // No private key in the clear in the file.
    const text = readFileSync(path, 'utf8');
    expect(text).not.toContain('PRIVATE');
  });

  it('refuses to replace a bundle without force, and replaces it with force', async () => {
    const before = readFileSync(path, 'utf8');
    expect(await codeOf(createPkiBundle({ path, secret }))).toBe('ALREADY_EXISTS');
    expect(readFileSync(path, 'utf8')).toBe(before);
    const replaced = await createPkiBundle({ path, secret, force: true });
    expect(readFileSync(path, 'utf8')).not.toBe(before);
    expect((await readPkiBundle(path)).commandRoot.pin).toBe(replaced.commandRoot.pin);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('refuses a wrong or missing secret', async () => {
    const bundle = await readPkiBundle(path);
    expect(await codeOf(bundle.commandRoot.privateKey('not the secret at all'))).toBe('PKI_UNSEAL_FAILED');
    expect(await codeOf(bundle.commandRoot.privateKey(''))).toBe('MISSING_ENV');
    expect(await codeOf(createPkiBundle({ path: join(dir, 'none.json'), secret: undefined }))).toBe(
      'MISSING_ENV',
    );
  });

  it('refuses a sealed key moved into another slot (the audit key pasted over the command root)', async () => {
    const document = JSON.parse(readFileSync(path, 'utf8'));
    document.commandRoot = { ...document.audit };
    document.audit = undefined;
    const swapped = join(dir, 'swapped.json');
    writeFileSync(swapped, JSON.stringify(document), { mode: 0o600 });
    const bundle = await readPkiBundle(swapped);
    expect(bundle.commandRoot.pin).toBe(JSON.parse(readFileSync(path, 'utf8')).audit.pin);
    expect(await codeOf(bundle.commandRoot.privateKey(secret))).toBe('PKI_UNSEAL_FAILED');
  });

  it('refuses a tampered sealed key, and a pin that is not its key', async () => {
    const document = JSON.parse(readFileSync(path, 'utf8'));
    const ct = Buffer.from(document.audit.sealedKey.ct, 'base64');
    ct[5] = ct[5]! ^ 1;
    document.audit.sealedKey.ct = ct.toString('base64');
    const tampered = join(dir, 'tampered.json');
    writeFileSync(tampered, JSON.stringify(document), { mode: 0o600 });
    expect(await codeOf((await readPkiBundle(tampered)).audit!.privateKey(secret))).toBe('PKI_UNSEAL_FAILED');

    const wrongPin = JSON.parse(readFileSync(path, 'utf8'));
    wrongPin.commandRoot.pin = wrongPin.audit.pin;
    writeFileSync(tampered, JSON.stringify(wrongPin), { mode: 0o600 });
    expect(await codeOf(readPkiBundle(tampered))).toBe('PKI_INVALID');
  });

  it('says PKI_NOT_FOUND for a missing file and PKI_INVALID for a file that is not a bundle', async () => {
    expect(await codeOf(readPkiBundle(join(dir, 'missing.json')))).toBe('PKI_NOT_FOUND');
    const junk = join(dir, 'junk.json');
    writeFileSync(junk, '{"format":"something else"}');
    expect(await codeOf(readPkiBundle(junk))).toBe('PKI_INVALID');
    writeFileSync(junk, 'not json');
    expect(await codeOf(readPkiBundle(junk))).toBe('PKI_INVALID');
    // A file cannot weaken the key derivation below scrypt N = 2^15, nor ask for gigabytes.
    const document = JSON.parse(readFileSync(path, 'utf8'));
    for (const seal of [
      { ...document.seal, N: 2 ** 14 },
      { ...document.seal, N: 2 ** 21 },
      { ...document.seal, N: 3 * 2 ** 15 },
      { ...document.seal, r: 64 },
      { ...document.seal, salt: 'c2hvcnQ=' },
      { ...document.seal, kdf: 'pbkdf2' },
    ]) {
      writeFileSync(junk, JSON.stringify({ ...document, seal }));
      expect(await codeOf(readPkiBundle(junk))).toBe('PKI_INVALID');
    }
  });

  it.runIf(hasOpenssl())('has pins equal to openssl over the SPKI DER', async () => {
    const bundle = await readPkiBundle(path);
    for (const key of [bundle.commandRoot, bundle.audit!, bundle.machineCa]) {
      const pem = key.publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const der = execFileSync('openssl', ['pkey', '-pubin', '-outform', 'DER'], { input: pem });
      const digest = execFileSync('openssl', ['dgst', '-sha256', '-binary'], { input: der });
      expect(key.pin).toBe(`sha256/${digest.toString('base64')}`);
      expect(publicKeyPin(createPublicKey(pem))).toBe(key.pin);
    }
  });
});
