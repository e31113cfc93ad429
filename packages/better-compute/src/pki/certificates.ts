/**
 * X.509 for the bundle: the machine CA's self-signed certificate and the certificates it issues
 * (gateway TLS, nodes), built with @peculiar/x509 over WebCrypto. No ASN.1 is written here.
 */
import { createPublicKey, generateKeyPairSync, type KeyObject, randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import { ComputeError } from '@better-compute/core';

type X509 = typeof import('@peculiar/x509');
let loaded: Promise<X509> | undefined;

/** @peculiar/x509, loaded on first use (it needs the reflect-metadata polyfill first). */
function x509(): Promise<X509> {
  loaded ??= (async () => {
    await import('reflect-metadata');
    return await import('@peculiar/x509');
  })();
  return loaded;
}

const ECDSA = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A new ECDSA P-256 key pair, the machine CA's and a gateway's kind. */
export function newP256Key(): KeyObject {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
}

async function signingKeyOf(privateKey: KeyObject): Promise<webcrypto.CryptoKey> {
  const der = privateKey.export({ type: 'pkcs8', format: 'der' });
  return webcrypto.subtle.importKey('pkcs8', der, ECDSA, false, ['sign']);
}

async function publicKeyOf(lib: X509, key: KeyObject): Promise<InstanceType<X509['PublicKey']>> {
  const spki = (key.type === 'public' ? key : createPublicKey(key)).export({ type: 'spki', format: 'der' });
  return new lib.PublicKey(spki);
}

/** A positive 128-bit serial number, hexadecimal. */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return bytes.toString('hex');
}

/** A trust domain as it may appear in a name: a DNS-like label list. */
export function checkTrustDomain(name: string): string {
  if (
    !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(name) ||
    name.length > 253
  ) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `--trust-domain "${name.slice(0, 80)}" is not a DNS-style name`,
      {
        hint: 'Use lowercase letters, digits, dots and hyphens, such as compute.example.com.',
      },
    );
  }
  return name;
}

export interface CaCertificate {
  pem: string;
  serialNumber: string;
  subject: string;
  notBefore: Date;
  notAfter: Date;
}

/** The machine CA's self-signed certificate for `key` (ECDSA P-256). */
export async function createCaCertificate(options: {
  key: KeyObject;
  trustDomain: string;
  notBefore: Date;
  notAfter: Date;
}): Promise<CaCertificate> {
  const lib = await x509();
  const serial = serialNumber();
  const subject = `CN=better-compute machine CA ${serial.slice(0, 8)}, O=${options.trustDomain}`;
  const publicKey = await publicKeyOf(lib, options.key);
  const certificate = await lib.X509CertificateGenerator.create(
    {
      serialNumber: serial,
      subject,
      issuer: subject,
      notBefore: options.notBefore,
      notAfter: options.notAfter,
      signingAlgorithm: ECDSA,
      publicKey,
      signingKey: await signingKeyOf(options.key),
      extensions: [
        new lib.BasicConstraintsExtension(true, 0, true),
        new lib.KeyUsagesExtension(lib.KeyUsageFlags.keyCertSign | lib.KeyUsageFlags.cRLSign, true),
        await lib.SubjectKeyIdentifierExtension.create(publicKey, false, webcrypto as Crypto),
      ],
    },
    webcrypto as Crypto,
  );
  return {
    pem: certificate.toString('pem'),
    serialNumber: serial,
    subject,
    notBefore: options.notBefore,
    notAfter: options.notAfter,
  };
}

export type CertificateUsage = 'server' | 'client';

/** A leaf certificate signed by the machine CA. */
export async function issueCertificate(options: {
  caCertificatePem: string;
  caKey: KeyObject;
  /** The subject's public key: ECDSA P-256 or Ed25519. */
  subjectKey: KeyObject;
  commonName: string;
  /** DNS names and IP addresses for the SAN. */
  hosts: readonly string[];
  usages: readonly CertificateUsage[];
  notBefore: Date;
  notAfter: Date;
}): Promise<{ pem: string; serialNumber: string }> {
  const lib = await x509();
  const ca = new lib.X509Certificate(options.caCertificatePem);
  if (options.notAfter.getTime() > ca.notAfter.getTime()) {
    throw new ComputeError('INVALID_STATE', 'the certificate would outlive the machine CA that signs it', {
      hint: 'Run "better-compute pki renew-ca", then issue it again.',
    });
  }
  const serial = serialNumber();
  const publicKey = await publicKeyOf(lib, options.subjectKey);
  const names = options.hosts.map((host) => ({
    type: isIP(host) ? ('ip' as const) : ('dns' as const),
    value: host,
  }));
  const usages = options.usages.map((usage) =>
    usage === 'server' ? lib.ExtendedKeyUsage.serverAuth : lib.ExtendedKeyUsage.clientAuth,
  );
  const certificate = await lib.X509CertificateGenerator.create(
    {
      serialNumber: serial,
      subject: `CN=${options.commonName}`,
      issuer: ca.subjectName,
      notBefore: options.notBefore,
      notAfter: options.notAfter,
      signingAlgorithm: ECDSA,
      publicKey,
      signingKey: await signingKeyOf(options.caKey),
      extensions: [
        new lib.BasicConstraintsExtension(false, undefined, true),
        new lib.KeyUsagesExtension(lib.KeyUsageFlags.digitalSignature, true),
        new lib.ExtendedKeyUsageExtension(usages, false),
        ...(names.length ? [new lib.SubjectAlternativeNameExtension(names, false)] : []),
        await lib.SubjectKeyIdentifierExtension.create(publicKey, false, webcrypto as Crypto),
        await lib.AuthorityKeyIdentifierExtension.create(ca, false, webcrypto as Crypto),
      ],
    },
    webcrypto as Crypto,
  );
  return { pem: certificate.toString('pem'), serialNumber: serial };
}

/** A host name for a certificate: a DNS name (a leading `*.` allowed) or an IP address. */
export function checkHostName(host: string): string {
  if (isIP(host)) return host;
  const name = host.toLowerCase();
  if (
    name.length > 253 ||
    !/^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(name)
  ) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `--host "${host.slice(0, 80)}" is not a DNS name or an IP address`,
      {
        hint: 'Pass the name clients connect to, such as gw1.compute.example.com or 10.0.0.5.',
      },
    );
  }
  return name;
}
