/**
 * A gateway's certificate and key from files (gateway/tls.ts gatewayTlsFromFiles), as serve's
 * --tls-cert/--tls-key and the console's CONSOLE_GATEWAY_CERT/KEY load them: taken when the key is
 * the certificate's and a machine CA of the bundle signed it; refused, naming the file and the
 * field, when a file cannot be read, is no PEM, holds another certificate's key, or comes from
 * another deployment's CA.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gatewayTlsFromFiles } from '../src/index.js';
import { createPkiBundle } from '../src/pki/create.js';
import { issueGatewayCertificate } from '../src/pki/issue.js';

const SECRET = 'gateway-tls-files-suite-secret';
const dir = mkdtempSync(join(tmpdir(), 'bc-gateway-tls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function issued(bundleName: string, name: string) {
  const bundle = await createPkiBundle({ path: join(dir, `${bundleName}.json`), secret: SECRET });
  const certificate = await issueGatewayCertificate(bundle, SECRET, '127.0.0.1');
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  writeFileSync(certFile, certificate.certificatePem);
  writeFileSync(keyFile, certificate.privateKeyPem, { mode: 0o600 });
  return { bundle, certFile, keyFile, pem: certificate.certificatePem };
}

describe('gatewayTlsFromFiles', async () => {
  const ours = await issued('ours', 'gw');
  const { bundle } = ours;
  const second = await issueGatewayCertificate(bundle, SECRET, '127.0.0.1');
  const secondKey = join(dir, 'second.key');
  writeFileSync(secondKey, second.privateKeyPem, { mode: 0o600 });
  const theirs = await issued('theirs', 'foreign');

  it('takes a certificate the bundle’s machine CA signed, with its own key', () => {
    const tls = gatewayTlsFromFiles(bundle, ours);
    expect(tls.certificatePem).toBe(ours.pem);
    expect(tls.caPems).toContain(bundle.machineCa.certificatePem);
  });

  it('refuses each bad file with INVALID_ARGUMENT, naming it and its field, never printing the key', () => {
    const refusal = (files: { certFile: string; keyFile: string }) => {
      try {
        gatewayTlsFromFiles(bundle, files);
      } catch (error) {
        const e = error as { code: string; message: string; details?: { field?: string } };
        return { code: e.code, message: e.message, field: e.details?.field };
      }
      throw new Error('accepted');
    };
    expect(refusal({ certFile: ours.certFile, keyFile: secondKey })).toEqual({
      code: 'INVALID_ARGUMENT',
      message: `${secondKey} is not the key of ${ours.certFile}`,
      field: 'tls-key',
    });
    expect(refusal(theirs)).toEqual({
      code: 'INVALID_ARGUMENT',
      message: `${theirs.certFile} was not signed by a machine CA of the PKI bundle`,
      field: 'tls-cert',
    });
    expect(refusal({ certFile: join(dir, 'absent.crt'), keyFile: ours.keyFile })).toMatchObject({
      message: `the certificate ${join(dir, 'absent.crt')} cannot be read`,
      field: 'tls-cert',
    });
    expect(refusal({ certFile: ours.keyFile, keyFile: ours.keyFile })).toMatchObject({
      message: `${ours.keyFile} is not a PEM certificate`,
      field: 'tls-cert',
    });
    expect(refusal({ certFile: ours.certFile, keyFile: ours.certFile })).toMatchObject({
      message: `${ours.certFile} is not a PEM private key`,
      field: 'tls-key',
    });
  });
});
