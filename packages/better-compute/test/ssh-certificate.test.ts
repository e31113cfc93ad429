/**
 * The one OpenSSH certificate signer, read back by OpenSSH itself: `ssh-keygen -L` parses each
 * certificate and checks the CA's signature over it, so a certificate it lists is one sshd takes,
 * and one byte changed makes it refuse. Every subject key type a caller may send is covered.
 */
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { signSshCertificate, sshFingerprint } from '../src/modules/ssh-certs/certificate.js';

const scratch = mkdtempSync(join(tmpdir(), 'bc-sshcert-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const ca = generateKeyPairSync('ed25519').privateKey;

/** A fresh subject key of `type` made by ssh-keygen: its public line. */
function subjectKey(type: string, bits?: number): string {
  const file = join(scratch, `${type}-${Math.random().toString(36).slice(2)}`);
  const made = spawnSync('ssh-keygen', [
    '-q',
    '-t',
    type,
    ...(bits ? ['-b', String(bits)] : []),
    '-N',
    '',
    '-f',
    file,
  ]);
  expect(made.status).toBe(0);
  return readFileSync(`${file}.pub`, 'utf8').trim();
}

/** `ssh-keygen -L` of a certificate line: its listing, or null when OpenSSH refuses it. */
function listed(certificate: string): string | null {
  const file = join(scratch, `cert-${Math.random().toString(36).slice(2)}-cert.pub`);
  writeFileSync(file, `${certificate}\n`);
  const run = spawnSync('ssh-keygen', ['-L', '-f', file], { encoding: 'utf8' });
  return run.status === 0 ? run.stdout : null;
}

const validAfter = new Date('2026-01-01T00:00:00Z');
const validBefore = new Date('2026-01-01T00:05:00Z');

describe('signSshCertificate', () => {
  it.each([
    ['ed25519', undefined],
    ['ecdsa', 256],
    ['rsa', 2048],
  ])('a %s user certificate lists with its principal, key id, validity and extensions', (type, bits) => {
    const publicKey = subjectKey(type, bits);
    const certificate = signSshCertificate({
      publicKey,
      kind: 'user',
      principals: ['root@node_01'],
      keyId: 'alice@acme',
      serial: 42n,
      validAfter,
      validBefore,
      extensions: ['permit-pty', 'permit-agent-forwarding'],
      caPrivateKey: ca,
    });
    expect(certificate.split(' ')[0]).toMatch(/-cert-v01@openssh\.com$/);
    const listing = listed(certificate)!;
    expect(listing).not.toBeNull();
    expect(listing).toMatch(/Type: \S+ user certificate/);
    expect(listing).toContain('Key ID: "alice@acme"');
    expect(listing).toContain('Serial: 42');
    expect(listing).toMatch(/Principals:\s+root@node_01/);
    expect(listing).toMatch(/Valid: from 2026-01-01T0\d:00:00 to 2026-01-01T0\d:05:00/);
    expect(listing).toMatch(/Extensions:\s+permit-agent-forwarding\s+permit-pty/);
    expect(listing).toContain(`Public key: `);
    expect(listing).toContain(sshFingerprint(publicKey));
  });

  it('a host certificate has no extensions; a changed byte or another CA’s signature is refused', () => {
    const publicKey = subjectKey('ed25519');
    const certificate = signSshCertificate({
      publicKey,
      kind: 'host',
      principals: ['sbx_01'],
      keyId: 'sbx_01',
      serial: 7n,
      validAfter,
      validBefore,
      caPrivateKey: ca,
    });
    const listing = listed(certificate)!;
    expect(listing).toMatch(/Type: \S+ host certificate/);
    expect(listing).toMatch(/Extensions: \(none\)/);

    const [type, encoded] = certificate.split(' ') as [string, string];
    const bytes = Buffer.from(encoded, 'base64');
    // The key id's first byte, well inside the signed part.
    const at = bytes.indexOf(Buffer.from('sbx_01'));
    bytes[at] = bytes[at]! ^ 1;
    expect(listed(`${type} ${bytes.toString('base64')}`)).toBeNull();
  });

  it('refuses a public key line whose blob does not name its type', () => {
    const publicKey = subjectKey('ed25519');
    const [, encoded] = publicKey.split(' ');
    expect(() =>
      signSshCertificate({
        publicKey: `ssh-rsa ${encoded}`,
        kind: 'user',
        principals: ['x'],
        keyId: 'x',
        serial: 1n,
        validAfter,
        validBefore,
        caPrivateKey: ca,
      }),
    ).toThrow(/not a valid OpenSSH public key/);
  });
});
