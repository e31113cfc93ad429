/**
 * What the bundle's keys are for, checked with independent tools: a gateway certificate verifies
 * against the machine CA (node:crypto and openssl), renew-ca keeps the old CA trusted beside the new
 * one, a rotation statement verifies under the old command root (and a forged one does not), the
 * SSH CAs parse with ssh-keygen, add-sandbox-ca and reseal change only what they say.
 */
import { execFileSync } from 'node:child_process';
import { createPublicKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ComputeError } from '@better-compute/core';
import { publicKeyPin, readPkiBundle } from '../src/pki/bundle.js';
import { createPkiBundle } from '../src/pki/create.js';
import { issueGatewayCertificate, issueNodeCertificate } from '../src/pki/issue.js';
import {
  addSandboxCa,
  followRotations,
  renewMachineCa,
  replaceBundle,
  resealBundle,
  rotateCommandRoot,
  verifyRotationStatement,
} from '../src/pki/rotation.js';

const secret = 'a deployment secret for the tests';
const dir = mkdtempSync(join(tmpdir(), 'bc-pki-rot-'));

function has(program: string, args: string[]): boolean {
  try {
    execFileSync(program, args, { stdio: 'ignore' });
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

describe('certificates from the machine CA', () => {
  const path = join(dir, 'certs.json');

  it('a gateway certificate names its host, verifies against the CA, and not against another CA', async () => {
    const bundle = await createPkiBundle({ path, secret, trustDomain: 'compute.example.com' });
    const issued = await issueGatewayCertificate(bundle, secret, 'gw1.compute.example.com');
    const certificate = new X509Certificate(issued.certificatePem);
    expect(certificate.verify(bundle.machineCa.certificate.publicKey)).toBe(true);
    expect(certificate.checkIssued(bundle.machineCa.certificate)).toBe(true);
    expect(certificate.checkHost('gw1.compute.example.com')).toBe('gw1.compute.example.com');
    expect(certificate.checkHost('other.example.com')).toBeUndefined();
    expect(certificate.ca).toBe(false);
    expect(publicKeyPin(createPublicKey(issued.privateKeyPem))).toBe(publicKeyPin(certificate.publicKey));
    const other = await createPkiBundle({ path: join(dir, 'other.json'), secret });
    expect(certificate.verify(other.machineCa.certificate.publicKey)).toBe(false);

    const byIp = await issueGatewayCertificate(bundle, secret, '10.0.0.5');
    expect(new X509Certificate(byIp.certificatePem).checkIP('10.0.0.5')).toBe('10.0.0.5');
    expect(await codeOf(issueGatewayCertificate(bundle, secret, 'bad host!'))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(issueGatewayCertificate(bundle, 'wrong secret value', 'gw2.example.com'))).toBe(
      'PKI_UNSEAL_FAILED',
    );

    if (has('openssl', ['version'])) {
      writeFileSync(join(dir, 'ca.pem'), bundle.machineCa.certificatePem);
      writeFileSync(join(dir, 'gw.pem'), issued.certificatePem);
      const out = execFileSync('openssl', [
        'verify',
        '-CAfile',
        join(dir, 'ca.pem'),
        '-purpose',
        'sslserver',
        join(dir, 'gw.pem'),
      ]).toString();
      expect(out.trim()).toBe(`${join(dir, 'gw.pem')}: OK`);
    }
  });

  it('a node certificate is a client certificate for the node id and its own key', async () => {
    const bundle = await readPkiBundle(path);
    const { publicKey } = generateKeyPairSync('ed25519');
    const nodeId = 'node_01k5w8x9y0z1a2b3c4d5e6f7g8';
    const issued = await issueNodeCertificate(bundle, secret, { nodeId, publicKey });
    const certificate = new X509Certificate(issued.certificatePem);
    expect(certificate.subject).toBe(`CN=${nodeId}`);
    expect(certificate.verify(bundle.machineCa.certificate.publicKey)).toBe(true);
    expect(publicKeyPin(certificate.publicKey)).toBe(publicKeyPin(publicKey));
    expect(certificate.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    expect(await codeOf(issueNodeCertificate(bundle, secret, { nodeId: 'nope', publicKey }))).toBe(
      'INVALID_ARGUMENT',
    );
  });

  it('renew-ca issues a new CA and keeps the old one trusted until it expires; old certificates still verify', async () => {
    const before = await readPkiBundle(path);
    const oldCert = await issueGatewayCertificate(before, secret, 'gw-old.example.com');
    // Certificates carry whole seconds: a renewal in the same second as the bundle's creation would end
    // in the same second as the old CA, so this one happens a minute later, as renewals do.
    const { bundle: renewed, previous } = await renewMachineCa(path, secret, {
      now: new Date(Date.now() + 60_000),
    });
    expect(previous).toEqual([before.machineCa.pin]);
    expect(renewed.machineCa.pin).not.toBe(before.machineCa.pin);
    expect(renewed.trustedMachineCas().map((ca) => ca.pin)).toEqual([
      renewed.machineCa.pin,
      before.machineCa.pin,
    ]);
    const reread = await readPkiBundle(path);
    expect(reread.machineCas.map((ca) => ca.pin)).toEqual([renewed.machineCa.pin, before.machineCa.pin]);
    // Old certificates verify under a trusted CA; new ones come from the new CA.
    const trusted = reread.trustedMachineCas();
    expect(trusted.some((ca) => new X509Certificate(oldCert.certificatePem).verify(ca.publicKey))).toBe(true);
    const fresh = await issueGatewayCertificate(reread, secret, 'gw-new.example.com');
    expect(new X509Certificate(fresh.certificatePem).verify(renewed.machineCa.publicKey)).toBe(true);
    // After the old CA's end, only the new one is trusted, and the next renewal drops it.
    const later = new Date(Date.parse(before.machineCa.notAfter) + 1000);
    expect(reread.trustedMachineCas(later).map((ca) => ca.pin)).toEqual([renewed.machineCa.pin]);
    expect(await codeOf(renewMachineCa(path, 'not the secret of it'))).toBe('PKI_UNSEAL_FAILED');
    expect(readFileSync(path, 'utf8')).toContain(before.machineCa.pin);
  });
});

describe('command root rotation', () => {
  const path = join(dir, 'rotation.json');

  it('publishes a statement the old root signed; a daemon pinned to the old root reaches the new one', async () => {
    const first = await createPkiBundle({ path, secret, trustDomain: 'compute.example.com' });
    const { bundle: second, rotation } = await rotateCommandRoot(path, secret);
    expect(rotation.from).toBe(first.commandRoot.pin);
    expect(rotation.to).toBe(second.commandRoot.pin);
    const next = verifyRotationStatement(rotation, first.commandRoot.publicKey, 'compute.example.com');
    expect(publicKeyPin(next)).toBe(second.commandRoot.pin);
    const { bundle: third } = await rotateCommandRoot(path, secret);
    const reread = await readPkiBundle(path);
    expect(reread.previousCommandRoots.map((key) => key.pin)).toEqual([
      second.commandRoot.pin,
      first.commandRoot.pin,
    ]);
    expect(publicKeyPin(followRotations(first.commandRoot.publicKey, reread.commandRootRotations))).toBe(
      third.commandRoot.pin,
    );
    // The retired root's private key is gone from the file.
    expect(JSON.stringify(reread.document.previousCommandRoots)).not.toContain('sealedKey');
  });

  it('refuses a statement signed by another key, edited, or for another trust domain', async () => {
    const bundle = await readPkiBundle(path);
    const rotation = bundle.commandRootRotations[0]!;
    const oldKey = bundle.previousCommandRoots.at(-1)!.publicKey;
    const stranger = generateKeyPairSync('ed25519').publicKey;
    const codeOfSync = (fn: () => unknown): string => {
      try {
        fn();
      } catch (error) {
        return (error as ComputeError).code;
      }
      return 'none';
    };
    expect(codeOfSync(() => verifyRotationStatement(rotation, stranger))).toBe('PKI_INVALID_ROTATION');
    const edited = {
      ...rotation,
      statement: rotation.statement.replace(/at: .*/, 'at: 2030-01-01T00:00:00.000Z'),
    };
    expect(codeOfSync(() => verifyRotationStatement(edited, oldKey))).toBe('PKI_INVALID_ROTATION');
    const signature = Buffer.from(rotation.signature, 'base64');
    signature[0] = signature[0]! ^ 1;
    expect(
      codeOfSync(() =>
        verifyRotationStatement({ ...rotation, signature: signature.toString('base64') }, oldKey),
      ),
    ).toBe('PKI_INVALID_ROTATION');
    expect(codeOfSync(() => verifyRotationStatement(rotation, oldKey, 'other.example.com'))).toBe(
      'PKI_INVALID_ROTATION',
    );
    expect(codeOfSync(() => verifyRotationStatement(rotation, oldKey, 'compute.example.com'))).toBe('none');
  });
});

describe('SSH CAs, add-sandbox-ca and reseal', () => {
  const path = join(dir, 'ssh.json');

  it.runIf(has('which', ['ssh-keygen']))(
    'writes OpenSSH public keys that ssh-keygen reads, with the fingerprint of the key',
    async () => {
      const bundle = await createPkiBundle({ path, secret, trustDomain: 'compute.example.com' });
      for (const ca of [bundle.breakGlassSshCa, bundle.sandboxSshCa!]) {
        const file = join(dir, `${ca.pin.slice(7, 15).replace(/[^A-Za-z0-9]/g, '_')}.pub`);
        writeFileSync(file, `${ca.sshPublicKey}\n`);
        const listed = execFileSync('ssh-keygen', ['-l', '-f', file]).toString();
        expect(listed).toMatch(/^256 SHA256:\S+ .*\(ED25519\)/);
        const raw = ca.publicKey.export({ format: 'jwk' }).x!;
        expect(ca.sshPublicKey).toContain(
          Buffer.concat([
            Buffer.from([0, 0, 0, 11]),
            Buffer.from('ssh-ed25519'),
            Buffer.from([0, 0, 0, 32]),
            Buffer.from(raw, 'base64url'),
          ]).toString('base64'),
        );
      }
    },
  );

  it('add-sandbox-ca adds the CA to a bundle without one, and refuses when it is there', async () => {
    await createPkiBundle({ path, secret, force: true });
    const document = JSON.parse(readFileSync(path, 'utf8'));
    delete document.sandboxSshCa;
    writeFileSync(path, JSON.stringify(document), { mode: 0o600 });
    expect((await readPkiBundle(path)).sandboxSshCa).toBeUndefined();
    expect(await codeOf(addSandboxCa(path, 'the wrong secret here'))).toBe('PKI_UNSEAL_FAILED');
    const added = await addSandboxCa(path, secret);
    expect(added.sandboxSshCa!.sshPublicKey).toMatch(/^ssh-ed25519 /);
    expect((await readPkiBundle(path)).sandboxSshCa!.pin).toBe(added.sandboxSshCa!.pin);
    expect(await added.sandboxSshCa!.privateKey(secret)).toBeDefined();
    expect(await codeOf(addSandboxCa(path, secret))).toBe('ALREADY_EXISTS');
  });

  it('reseal re-encrypts every key under fresh parameters, or under a new secret', async () => {
    const before = await readPkiBundle(path);
    const resealed = await resealBundle(path, secret, undefined);
    expect(resealed.document.seal.salt).not.toBe(before.document.seal.salt);
    expect(resealed.commandRoot.pin).toBe(before.commandRoot.pin);
    expect(publicKeyPin(await resealed.audit!.privateKey(secret))).toBe(before.audit!.pin);

    const next = 'the next deployment secret, long';
    await resealBundle(path, secret, next);
    const after = await readPkiBundle(path);
    expect(await codeOf(after.commandRoot.privateKey(secret))).toBe('PKI_UNSEAL_FAILED');
    for (const key of [
      after.commandRoot,
      after.machineCa,
      after.execTicket,
      after.breakGlassSshCa,
      after.audit!,
    ])
      expect(publicKeyPin(await key.privateKey(next))).toBe(key.pin);
    // A bundle changed by another command between the read and the write is not overwritten.
    const read = await readPkiBundle(path);
    await renewMachineCa(path, next);
    const changed = readFileSync(path, 'utf8');
    expect(await codeOf(replaceBundle(read, read.document, new Date()))).toBe('CONFLICT');
    expect(readFileSync(path, 'utf8')).toBe(changed);
    // A wrong old secret changes nothing.
    const text = readFileSync(path, 'utf8');
    expect(await codeOf(resealBundle(path, secret, 'yet another secret value'))).toBe('PKI_UNSEAL_FAILED');
    expect(readFileSync(path, 'utf8')).toBe(text);
  });
});
