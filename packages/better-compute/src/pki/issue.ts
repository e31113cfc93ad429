/**
 * Certificates the machine CA issues: gateway TLS certificates (`pki issue-gateway`) and node
 * certificates (the daemon's session), each for a fresh or given key, never outliving the CA.
 */
import { type KeyObject } from 'node:crypto';
import { assertId, ComputeError } from '@better-compute/core';
import type { PkiBundle } from './bundle.js';
import { checkHostName, issueCertificate, newP256Key } from './certificates.js';
import { DAY_MS } from './create.js';
import { requireSecret } from './sealing.js';

/** A gateway certificate lives 90 days by default, as public TLS certificates do. */
const GATEWAY_VALIDITY_DAYS = 90;

export interface IssuedCertificate {
  certificatePem: string;
  serialNumber: string;
  notBefore: string;
  notAfter: string;
  /** The issuing CA's pin. */
  caPin: string;
}

/** Issues a certificate from the bundle's current machine CA (opened with `secret`). */
async function issueFromBundle(
  bundle: PkiBundle,
  secret: string | undefined,
  options: {
    subjectKey: KeyObject;
    commonName: string;
    hosts: readonly string[];
    usages: readonly ('server' | 'client')[];
    days: number;
    now?: Date;
  },
): Promise<IssuedCertificate> {
  const now = options.now ?? new Date();
  const ca = bundle.machineCa;
  if (Date.parse(ca.notAfter) <= now.getTime()) {
    throw new ComputeError('INVALID_STATE', `the machine CA ${ca.pin} expired at ${ca.notAfter}`, {
      hint: 'Run "better-compute pki renew-ca" first.',
    });
  }
  const caKey = await ca.privateKey(requireSecret(secret));
  const notBefore = new Date(now.getTime() - 5 * 60 * 1000);
  const wanted = now.getTime() + options.days * DAY_MS;
  const notAfter = new Date(Math.min(wanted, Date.parse(ca.notAfter)));
  const issued = await issueCertificate({
    caCertificatePem: ca.certificatePem,
    caKey,
    subjectKey: options.subjectKey,
    commonName: options.commonName,
    hosts: options.hosts,
    usages: options.usages,
    notBefore,
    notAfter,
  });
  return {
    certificatePem: issued.pem,
    serialNumber: issued.serialNumber,
    notBefore: notBefore.toISOString(),
    notAfter: notAfter.toISOString(),
    caPin: ca.pin,
  };
}

/** A gateway TLS certificate and its new P-256 key for `host` (a DNS name or an IP address). */
export async function issueGatewayCertificate(
  bundle: PkiBundle,
  secret: string | undefined,
  host: string,
  options: { days?: number; now?: Date } = {},
): Promise<IssuedCertificate & { privateKeyPem: string; host: string }> {
  const name = checkHostName(host);
  const key = newP256Key();
  const issued = await issueFromBundle(bundle, secret, {
    subjectKey: key,
    commonName: name,
    hosts: [name],
    usages: ['server', 'client'],
    days: options.days ?? GATEWAY_VALIDITY_DAYS,
    ...(options.now ? { now: options.now } : {}),
  });
  return { ...issued, host: name, privateKeyPem: key.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** A node's client certificate for its own public key (Ed25519 or P-256), named by its node id. */
export async function issueNodeCertificate(
  bundle: PkiBundle,
  secret: string | undefined,
  options: { nodeId: string; publicKey: KeyObject; days?: number; now?: Date },
): Promise<IssuedCertificate> {
  assertId('node', options.nodeId, 'nodeId');
  return issueFromBundle(bundle, secret, {
    subjectKey: options.publicKey,
    commonName: options.nodeId,
    hosts: [],
    usages: ['client'],
    days: options.days ?? 365,
    ...(options.now ? { now: options.now } : {}),
  });
}
