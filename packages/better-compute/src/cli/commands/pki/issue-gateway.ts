/** `pki issue-gateway --host NAME`: a gateway TLS certificate and key signed by the machine CA. */
import { defineCommand } from '../../define.js';
import { bundlePath, pkiFlag, secretOf } from './shared.js';

export default defineCommand({
  name: 'pki issue-gateway',
  group: 'PKI',
  summary: 'Issue a gateway TLS certificate and key for a host name or IP address',
  description:
    'The key is new (ECDSA P-256) and written with mode 0600; neither file is ever written over an existing one.',
  target: 'none',
  flags: {
    ...pkiFlag,
    host: {
      type: 'string',
      required: true,
      description: 'The DNS name or IP address clients connect to',
      placeholder: 'NAME',
    },
    outCert: { type: 'string', description: 'The certificate file (default NAME.crt)', placeholder: 'FILE' },
    outKey: { type: 'string', description: 'The private key file (default NAME.key)', placeholder: 'FILE' },
    days: {
      type: 'number',
      integer: true,
      min: 1,
      max: 825,
      default: 90,
      description: 'Days the certificate is valid (never past the CA)',
    },
  },
  examples: [
    'better-compute pki issue-gateway --host gw1.compute.example.com',
    'better-compute pki issue-gateway --host 10.0.0.5 --out-cert gw.crt --out-key gw.key',
  ],
  async run({ flags, io }) {
    const { readPkiBundle } = await import('../../../pki/bundle.js');
    const { issueGatewayCertificate } = await import('../../../pki/issue.js');
    const { checkHostName } = await import('../../../pki/certificates.js');
    const { requireSecret } = await import('../../../pki/sealing.js');
    const { createOutFile } = await import('../shared.js');
    const bundle = await readPkiBundle(await bundlePath(io, flags.pki));
    const host = checkHostName(flags.host);
    const secret = requireSecret(secretOf(io));
    const certPath = flags.outCert ?? `${host.replace(/^\*\./, 'wildcard.')}.crt`;
    const keyPath = flags.outKey ?? `${host.replace(/^\*\./, 'wildcard.')}.key`;
    // createOutFile's refusals name the flag this command has.
    const claim = (path: string, flag: string, refusal: string) => createOutFile(io.cwd, path, refusal, flag);
    // Both files are claimed before anything is issued, so neither is half there.
    const certFile = await claim(certPath, '--out-cert', 'a certificate is never written over a file');
    let keyFile;
    try {
      keyFile = await claim(keyPath, '--out-key', 'a private key is never written over a file');
    } catch (error) {
      await certFile.discard();
      throw error;
    }
    try {
      const issued = await issueGatewayCertificate(bundle, secret, host, { days: flags.days });
      await keyFile.write(issued.privateKeyPem);
      await certFile.write(issued.certificatePem);
      return {
        host: issued.host,
        certificate: certFile.path,
        key: keyFile.path,
        serialNumber: issued.serialNumber,
        notBefore: issued.notBefore,
        notAfter: issued.notAfter,
        caPin: issued.caPin,
      };
    } catch (error) {
      await keyFile.discard();
      await certFile.discard();
      throw error;
    }
  },
});
